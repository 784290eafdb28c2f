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

from asyncsched.errors import InvalidArgumentError, SchedulerUnavailableError
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


class ListsNothing(MemoScheduler):
    """Declares ``list``, yet lists no app."""

    async def _list(self) -> list[AppSnapshot]:
        return []


class NeverTails(MemoScheduler):
    """Declares ``log_tail``, yet stops at the end of what exists now."""

    async def _log_iter(self, app: AppSnapshot, query: LogQuery) -> AsyncIterator[str]:
        now = LogQuery(query.role_name, query.k, query.since, query.until, False, None)
        lines = super()._log_iter(app, now)
        async with aclosing(cast(AsyncGenerator[str, None], lines)) as closing:
            async for line in closing:
                yield line


class FirstReplicaOnly(MemoScheduler):
    """Declares per-replica status, yet reports replica 0 of each role only."""

    async def _describe(self, app_id: str) -> AppSnapshot | None:
        snapshot = await super()._describe(app_id)
        if snapshot is not None:
            snapshot.replicas = [r for r in snapshot.replicas if r.id == 0]
        return snapshot


class AsyncioOnly(MemoScheduler):
    capabilities = MemoScheduler.capabilities.observed(event_loops=("asyncio",))


def _maker(kind: Callable[[str], Scheduler[Any]]) -> MakeTarget:
    @asynccontextmanager
    async def make_target() -> AsyncIterator[ContractTarget]:
        async with kind("contract") as sched:
            yield ContractTarget(
                sched, quick_timeout=10, posix_shell=False, log_time_step=0.5
            )

    return make_target


async def test_check_scheduler_reports_each_case_by_name(anyio_backend: str) -> None:
    report = await check_scheduler(_maker(InMemoryScheduler))
    shell = "wait_after_cancel_waits_out_the_replicas_grace"
    applicable = [c.name for c in CASES if c.name != shell]
    assert report.passed == applicable
    assert report.failed == {}
    assert report.not_applicable == {shell: "replicas do not run a POSIX shell"}
    assert str(report).splitlines() == [
        (
            f"contract on {anyio_backend}: {len(applicable)} passed, 0 failed,"
            " 1 not applicable"
        ),
        f"  not applicable {shell}: replicas do not run a POSIX shell",
    ]


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
                yield ContractTarget(
                    sched, quick_timeout=10, posix_shell=False, log_time_step=0.5
                )

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
    with pytest.raises(InvalidArgumentError, match="no_such_case"):
        await check_scheduler(_maker(InMemoryScheduler), cases=["no_such_case"])


@pytest.mark.parametrize(
    ("kind", "case"),
    [
        (ListsNothing, "list_contains_submitted_app"),
        (NeverTails, "log_tail_follows_until_terminal"),
        (FirstReplicaOnly, "declared_per_replica_status_reports_each_replica"),
    ],
    ids=["list", "log_tail", "per_replica_status"],
)
async def test_a_declared_capability_not_honoured_fails_its_case(
    kind: Callable[[str], Scheduler[Any]], case: str
) -> None:
    report = await check_scheduler(_maker(kind), cases=[case], raise_on_failure=False)
    assert list(report.failed) == [case]


async def test_an_event_loop_not_declared_is_refused(anyio_backend: str) -> None:
    if anyio_backend == "asyncio":
        report = await check_scheduler(_maker(AsyncioOnly), cases=["unknown_app"])
        assert report.passed == ["unknown_app"]
        return
    # the scheduler refuses to open; check_scheduler lets that through
    with pytest.raises(SchedulerUnavailableError, match="runs on asyncio, not trio"):
        await check_scheduler(_maker(AsyncioOnly), cases=["unknown_app"])


async def test_a_pytest_suite_whose_capabilities_differ_from_its_scheduler_fails() -> (
    None
):
    from asyncsched.schedulers.kit import Capabilities
    from asyncsched.testing import SchedulerContract

    class Mismatched(SchedulerContract):
        capabilities = Capabilities()  # memo declares far more

    async with MemoScheduler("mismatch") as sched:
        with pytest.raises(pytest.fail.Exception, match="is not what MemoScheduler"):
            await Mismatched().test_unknown_app(ContractTarget(sched))  # type: ignore[attr-defined]


def test_a_log_time_step_of_0_or_less_is_refused() -> None:
    sched = InMemoryScheduler("steps")
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(InvalidArgumentError, match="log_time_step"):
            ContractTarget(sched, log_time_step=bad)
    assert ContractTarget(sched).log_time_step == 1.0
