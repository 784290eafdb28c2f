"""The contract's cases about closing a scheduler."""

from __future__ import annotations

import builtins
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import sniffio

from asyncsched.errors import (
    SchedulerClosedError,
)
from asyncsched.schedulers.api import DescribeAppResponse
from asyncsched.specs import (
    is_terminal,
)

from ._case_base import (
    CLOSED_WAIT_ENDS_WITHIN,
    _case,
    _raises,
    _wait_running,
)
from .target import ContractTarget

# -- closing -----------------------------------------------------------------


@_case()
async def _closed_scheduler_refuses_work(target: ContractTarget) -> None:
    """After ``aclose`` (idempotent) every operation raises SchedulerClosedError."""
    sched = target.scheduler
    info = await sched.submit_dryrun(target.app("echo late"), target.cfg)
    await sched.aclose()
    await sched.aclose()  # idempotent
    with _raises(SchedulerClosedError):
        await sched.submit(target.app("echo late"), target.cfg)
    with _raises(SchedulerClosedError):
        await sched.submit_dryrun(target.app("echo late"), target.cfg)
    with _raises(SchedulerClosedError):
        await sched.schedule(info)
    with _raises(SchedulerClosedError):
        await sched.describe("any-app")
    with _raises(SchedulerClosedError):
        await sched.exists("any-app")
    with _raises(SchedulerClosedError):
        await sched.list()
    with _raises(SchedulerClosedError):
        await sched.wait("any-app")
    with _raises(SchedulerClosedError):
        await sched.wait("any-app", timeout=1)
    with _raises(SchedulerClosedError):
        await sched.cancel("any-app")
    with _raises(SchedulerClosedError):
        sched.log_iter("any-app", "worker")


@_case()
async def _aclose_ends_a_pending_wait(target: ContractTarget) -> None:
    """A ``wait`` pending when the scheduler closes ends promptly, with
    SchedulerClosedError (or, where the close itself stopped the app, with
    its final description, every replica stopped), and no replica process
    is left running."""
    sched = target.scheduler
    app_id = await target.run("echo started; sleep 60")
    await _wait_running(target, app_id, replicas=1)
    outcome: builtins.list[object] = []
    ended = anyio.Event()

    async def waiter() -> None:
        try:
            outcome.append(await sched.wait(app_id))
        except Exception as exc:  # noqa: BLE001 -- what the case checks
            outcome.append(exc)
        finally:
            ended.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        with anyio.move_on_after(1):  # until the wait is blocked in it
            await anyio.wait_all_tasks_blocked()
        assert not ended.is_set(), f"wait ended before aclose: {outcome}"
        await sched.aclose()
        with anyio.fail_after(CLOSED_WAIT_ENDS_WITHIN):
            await ended.wait()
    [result] = outcome
    if isinstance(result, DescribeAppResponse):
        # the close stopped the app (local replicas die with their scheduler)
        # and the wait saw it over first: the final description then, with
        # every replica stopped, never a live one
        assert is_terminal(result.state), result
        for role in result.roles_statuses:
            assert all(is_terminal(r.state) for r in role.replicas), result
    else:
        assert isinstance(result, SchedulerClosedError), (
            f"a wait pending at aclose ended with {result!r}"
        )
    await _assert_nothing_left(target)


@_case()
async def _cancelled_aclose_still_closes(target: ContractTarget) -> None:
    """Cancelling the task that runs ``aclose`` leaves the scheduler closed:
    it refuses work, none of its tasks is left, no replica process runs, and
    a second ``aclose`` returns at once."""
    sched = target.scheduler
    app_id = await target.run("echo started; sleep 60")
    await _wait_running(target, app_id, replicas=1)
    closing = anyio.Event()

    async def close() -> None:
        closing.set()
        await sched.aclose()

    async with anyio.create_task_group() as tg:
        tg.start_soon(close)
        await closing.wait()
        await anyio.lowlevel.checkpoint()  # aclose under way
        tg.cancel_scope.cancel()
    with _raises(SchedulerClosedError):
        await sched.submit(target.app("echo late"), target.cfg)
    with anyio.fail_after(1):
        await sched.aclose()  # a no-op
    await _assert_nothing_left(target)


async def _assert_nothing_left(target: ContractTarget) -> None:
    with anyio.move_on_after(1):  # tasks end at their next checkpoint
        await anyio.wait_all_tasks_blocked()
    tasks = _scheduler_tasks(target.scheduler)
    assert not tasks, f"tasks left running after aclose: {tasks}"
    if target.replica_processes is not None:
        left = await target.replica_processes()
        assert not left, f"replica processes left running after aclose: {left}"


_PACKAGE = Path(__file__).resolve().parents[1]
#: the contract's own files: its tasks are not the scheduler's
_HARNESS = {
    str(Path(__file__).with_name(name).resolve())
    for name in (
        "_case_base.py",
        "_cases_closing.py",
        "_cases_input.py",
        "_cases_logs.py",
        "_cases_outcomes.py",
        "cases.py",
        "check.py",
        "waiting.py",
    )
}


def _scheduler_tasks(sched: Any) -> builtins.list[str]:
    """Tasks of this event loop (but the current one) running code of the
    package or of the scheduler's own module."""
    own = str(Path(sys.modules[type(sched).__module__].__file__ or "").resolve())

    def ours(filename: str) -> bool:
        path = str(Path(filename).resolve())
        return path == own or (path.startswith(str(_PACKAGE)) and path not in _HARNESS)

    found = []
    for name, coro in _other_tasks():
        files = _await_chain(coro)
        if any(ours(f) for f in files):
            found.append(name)
    return found


def _await_chain(coro: Any) -> Iterator[str]:
    while coro is not None:
        code = getattr(coro, "cr_code", None) or getattr(coro, "ag_code", None)
        code = code or getattr(coro, "gi_code", None)
        if code is not None:
            yield code.co_filename
        coro = (
            getattr(coro, "cr_await", None)
            or getattr(coro, "ag_await", None)
            or getattr(coro, "gi_yieldfrom", None)
        )


def _other_tasks() -> builtins.list[tuple[str, Any]]:
    if sniffio.current_async_library() == "trio":
        import trio

        current = trio.lowlevel.current_task()
        root = trio.lowlevel.current_root_task()
        stack = [] if root is None else [root]
        found = []
        while stack:
            task = stack.pop()
            if task is not current:
                found.append((task.name, task.coro))
            stack += [t for n in task.child_nurseries for t in n.child_tasks]
        return found
    import asyncio

    me = asyncio.current_task()
    return [(t.get_name(), t.get_coro()) for t in asyncio.all_tasks() if t is not me]
