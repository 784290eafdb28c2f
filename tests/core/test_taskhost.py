from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest

from asyncsched.errors import SchedulerClosedError
from asyncsched.schedulers.shared.taskhost import TaskHost
from asyncsched.specs import AppState


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


async def test_entered_host_runs_tasks_and_returns_their_start_value() -> None:
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


# -- containment, on asyncio and trio -------------------------------------------


@pytest.mark.anyio
async def test_a_raising_task_is_reported_to_its_owner_and_spares_its_siblings(
    anyio_backend: str,
) -> None:
    host = TaskHost("test")
    reported: list[Exception] = []
    sibling_done = anyio.Event()

    async def sibling() -> None:
        await anyio.sleep(0.05)
        sibling_done.set()

    async def failing() -> None:
        raise ValueError("task exploded")

    await host.start_soon(sibling)
    await host.start_soon(failing, on_error=reported.append)
    await host.start_soon(failing)  # no owner: logged only
    with anyio.fail_after(5):
        await sibling_done.wait()
    assert [str(e) for e in reported] == ["task exploded"]
    await host.start_soon(sibling)  # the group is still open
    await host.aclose()


@pytest.mark.anyio
async def test_a_failing_service_is_restarted(anyio_backend: str) -> None:
    host = TaskHost("test")
    runs: list[int] = []
    done = anyio.Event()

    async def service() -> None:
        runs.append(1)
        if len(runs) < 3:
            raise RuntimeError("service exploded")
        done.set()

    await host.start_service(service, name="svc")
    with anyio.fail_after(5):
        await done.wait()
    assert len(runs) == 3
    await host.aclose()


@pytest.mark.anyio
async def test_start_raises_an_error_before_started_to_the_caller(
    anyio_backend: str,
) -> None:
    host = TaskHost("test")
    reported: list[Exception] = []

    async def never_starts(*, task_status: anyio.abc.TaskStatus[None]) -> None:
        raise OSError("cannot connect")

    async def fails_later(*, task_status: anyio.abc.TaskStatus[str]) -> None:
        task_status.started("up")
        raise OSError("lost")

    with pytest.raises(OSError, match="cannot connect"):
        await host.start(never_starts, on_error=reported.append)
    assert await host.start(fails_later, on_error=reported.append) == "up"
    with anyio.fail_after(5):
        while not reported:
            await anyio.sleep(0.01)
    assert [str(e) for e in reported] == ["lost"]
    await host.aclose()


@pytest.mark.anyio
async def test_host_opened_in_one_task_is_closed_from_another(
    anyio_backend: str,
) -> None:
    host = TaskHost("test")
    started = anyio.Event()
    cancelled = anyio.Event()

    async def worker() -> None:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(host.start_soon, worker)
    with anyio.fail_after(5):
        await started.wait()
    async with anyio.create_task_group() as tg:
        tg.start_soon(host.aclose)
    assert cancelled.is_set()


async def test_in_memory_app_whose_task_raises_fails_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from asyncsched.testing import InMemoryScheduler
    from tests.runner.helpers import sh_app

    original = InMemoryScheduler._run_app

    async def run_app(self: InMemoryScheduler, app: Any, commands: Any) -> None:
        if app.app.name == "bad":
            raise RuntimeError("interpreter exploded")
        await original(self, app, commands)

    monkeypatch.setattr(InMemoryScheduler, "_run_app", run_app)
    async with InMemoryScheduler("t") as sched:
        good = await sched.submit(sh_app("sleep 0.2", name="good"))
        bad = await sched.submit(sh_app("exit 0", name="bad"))
        desc = await sched.wait(bad, timeout=5)
        assert desc is not None
        assert desc.state == AppState.FAILED
        assert "interpreter exploded" in desc.msg
        desc = await sched.wait(good, timeout=5)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
