"""The contract as plain functions: check_scheduler runs it from any runner,
and fails (never skips) a backend that declares what it does not do."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, aclosing, asynccontextmanager
from pathlib import Path
from typing import Any, cast

import pytest

from asyncsched.schedulers.kit import AppSnapshot, LogQuery, Scheduler, TaskHost
from asyncsched.testing import (
    ContractFailure,
    ContractTarget,
    InMemoryScheduler,
    check_scheduler,
)
from asyncsched.testing.cases import CASES
from tests.plugin_example.memo import MemoScheduler

MakeTarget = Callable[[], AbstractAsyncContextManager[ContractTarget]]

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


class IgnoresLogQueries(MemoScheduler):
    """Declares every log stream and since/until, yet serves every line."""

    async def _log_iter(self, app: AppSnapshot, query: LogQuery) -> AsyncIterator[str]:
        everything = LogQuery(query.role_name, query.k, None, None, False, None)
        lines = super()._log_iter(app, everything)
        async with aclosing(cast(AsyncGenerator[str, None], lines)) as closing:
            async for line in closing:
                yield line


class LeavesATaskRunning(MemoScheduler):
    """Starts a background task that its ``aclose`` never stops."""

    async def _aenter(self) -> None:
        await super()._aenter()
        self._forgotten = TaskHost("forgotten")
        await self._forgotten.enter()


def _maker(kind: Callable[[str], Scheduler[Any]]) -> MakeTarget:
    @asynccontextmanager
    async def make_target() -> AsyncIterator[ContractTarget]:
        async with kind("contract") as sched:
            yield ContractTarget(sched, quick_timeout=10, posix_shell=False)

    return make_target


async def test_check_scheduler_reports_each_case_by_name() -> None:
    report = await check_scheduler(_maker(InMemoryScheduler))
    shell = "wait_after_cancel_waits_out_the_replicas_grace"
    applicable = [c.name for c in CASES if c.name != shell]
    assert report.passed == applicable
    assert report.failed == {}
    assert report.not_applicable == {shell: "replicas do not run a POSIX shell"}


async def test_declared_log_streams_and_since_until_not_honoured_fail(
    anyio_backend: str,
) -> None:
    cases = [
        "declared_log_streams_are_served",
        "declared_log_since_until_is_honoured",
        "log_regex_and_streams",
        "successful_app_is_succeeded",
    ]
    with pytest.raises(ContractFailure) as info:
        await check_scheduler(_maker(IgnoresLogQueries), cases=cases)
    failure = info.value
    assert isinstance(failure, ExceptionGroup)
    assert sorted(failure.report.failed) == sorted(cases[:3])
    assert failure.report.passed == ["successful_app_is_succeeded"]
    assert "declared_log_streams_are_served" in str(failure)
    notes = [note for exc in failure.exceptions for note in exc.__notes__]
    case = "declared_log_since_until_is_honoured"
    assert f"contract case: {case} ({anyio_backend})" in notes


async def test_a_task_left_running_after_aclose_fails_the_close_cases() -> None:
    cases = ["cancelled_aclose_still_closes", "aclose_ends_a_pending_wait"]
    report = await check_scheduler(
        _maker(LeavesATaskRunning), cases=cases, raise_on_failure=False
    )
    assert sorted(report.failed) == sorted(cases)
    assert "forgotten" in str(report.failed["cancelled_aclose_still_closes"])


async def test_the_close_cases_pass_on_a_scheduler_that_closes_cleanly() -> None:
    cases = ["cancelled_aclose_still_closes", "aclose_ends_a_pending_wait"]
    report = await check_scheduler(_maker(InMemoryScheduler), cases=cases)
    assert sorted(report.passed) == sorted(cases)


def test_check_scheduler_runs_under_plain_anyio_run_without_pytest() -> None:
    script = textwrap.dedent(
        """
        import sys
        sys.modules["pytest"] = None  # importing pytest now fails
        from contextlib import asynccontextmanager
        import anyio
        from asyncsched.testing import (
            ContractTarget, InMemoryScheduler, check_scheduler,
        )

        @asynccontextmanager
        async def make_target():
            async with InMemoryScheduler("plain") as sched:
                yield ContractTarget(sched, quick_timeout=10, posix_shell=False)

        for loop in ("asyncio", "trio"):
            report = anyio.run(
                lambda: check_scheduler(
                    make_target, cases=["successful_app_is_succeeded", "unknown_app"]
                ),
                backend=loop,
            )
            print(loop, report.passed)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "asyncio ['successful_app_is_succeeded', 'unknown_app']",
        "trio ['successful_app_is_succeeded', 'unknown_app']",
    ]


async def test_an_unknown_case_name_is_refused() -> None:
    from asyncsched.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="no_such_case"):
        await check_scheduler(_maker(InMemoryScheduler), cases=["no_such_case"])
