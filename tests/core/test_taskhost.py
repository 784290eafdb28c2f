from __future__ import annotations

import asyncio

import anyio
import pytest

from asyncsched.errors import SchedulerClosedError
from asyncsched.schedulers.shared.taskhost import TaskHost


async def test_hosted_group_runs_tasks_and_close_cancels_them() -> None:
    host = TaskHost("test")
    started = anyio.Event()
    cancelled = anyio.Event()

    async def worker() -> None:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    await host.start_soon(worker)
    await started.wait()
    await host.aclose()
    assert cancelled.is_set()
    await host.aclose()  # idempotent
    with pytest.raises(SchedulerClosedError):
        await host.start_soon(worker)


async def test_entered_group_lives_in_the_callers_task() -> None:
    host = TaskHost("test")
    await host.enter()
    results: list[int] = []

    async def worker(value: int, *, task_status: anyio.abc.TaskStatus[int]) -> None:
        task_status.started(value * 2)
        results.append(value)

    assert await host.start(worker, 21) == 42
    await host.aclose()
    assert results == [21]


async def test_cancelling_the_caller_does_not_kill_hosted_tasks() -> None:
    host = TaskHost("test")
    done = anyio.Event()

    async def worker() -> None:
        await anyio.sleep(0.05)
        done.set()

    async def caller() -> None:
        await host.start_soon(worker)
        await anyio.sleep_forever()

    task = asyncio.get_running_loop().create_task(caller())
    await anyio.sleep(0.01)
    task.cancel()
    with anyio.fail_after(5):
        await done.wait()
    await host.aclose()
