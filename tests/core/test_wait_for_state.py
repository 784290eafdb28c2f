"""wait_for_state: woken by the scheduler's change signal, bounded by its poll."""

from __future__ import annotations

import anyio
import pytest

from asyncsched.errors import SchedulerClosedError, WaitTimeoutError
from asyncsched.schedulers.kit import AppSnapshot
from asyncsched.specs import AppState
from asyncsched.testing import (
    ContractTarget,
    InMemoryScheduler,
    StateTimeoutError,
    wait_for_state,
)
from tests.plugin_example.memo import MemoScheduler

pytestmark = pytest.mark.anyio


class NeverSignals(MemoScheduler):
    """Its change events never fire: only its 0.1 s poll shows changes."""

    def changed(self, key: str) -> anyio.Event:
        return anyio.Event()

    def _poll_interval(self, snapshot: AppSnapshot) -> float | None:
        return 0.1


async def test_returns_the_description_once_the_app_is_in_a_state() -> None:
    async with InMemoryScheduler("states") as sched:
        app_id = await ContractTarget(sched).run("sleep 0.2; exit 3")
        running = await wait_for_state(sched, app_id, AppState.RUNNING, timeout=10)
        assert running.state == AppState.RUNNING
        ended = await wait_for_state(
            sched, app_id, {AppState.FAILED, AppState.SUCCEEDED}, timeout=10
        )
        assert ended.state == AppState.FAILED


async def test_a_predicate_sees_each_description() -> None:
    async with InMemoryScheduler("predicate") as sched:
        app_id = await ContractTarget(sched).run("echo x", replicas=2)
        desc = await wait_for_state(
            sched,
            app_id,
            lambda d: all(r.exit_code == 0 for r in d.roles_statuses[0].replicas),
            timeout=10,
        )
        assert desc.state == AppState.SUCCEEDED


async def test_a_signalled_change_wakes_it_without_any_poll() -> None:
    async with MemoScheduler("signals") as sched:  # signals, never polls
        app_id = await ContractTarget(sched).run("sleep 0.3")
        with anyio.fail_after(5):  # never woken: it would wait forever
            desc = await wait_for_state(sched, app_id, AppState.SUCCEEDED, 10)
    assert desc.state == AppState.SUCCEEDED


async def test_an_unsignalled_change_is_seen_at_the_backends_poll_interval() -> None:
    async with NeverSignals("polls") as sched:
        app_id = await ContractTarget(sched).run("sleep 0.3")
        with anyio.fail_after(5):
            desc = await wait_for_state(sched, app_id, AppState.SUCCEEDED, 10)
    assert desc.state == AppState.SUCCEEDED


async def test_running_out_of_time_names_the_state_the_app_is_in() -> None:
    async with InMemoryScheduler("timeout") as sched:
        app_id = await ContractTarget(sched).run("sleep 60")
        await wait_for_state(sched, app_id, AppState.RUNNING, timeout=10)
        with pytest.raises(StateTimeoutError) as info:
            await wait_for_state(sched, app_id, AppState.SUCCEEDED, timeout=0.2)
    assert isinstance(info.value, WaitTimeoutError)
    assert str(info.value) == (
        f"app {app_id!r} did not reach the state waited for within 0.2s"
        " (waiting for SUCCEEDED; it is RUNNING)"
    )


async def test_closing_the_scheduler_ends_the_wait_with_scheduler_closed() -> None:
    async with InMemoryScheduler("closing") as sched:
        app_id = await ContractTarget(sched).run("sleep 60")
        outcome: list[BaseException] = []

        async def waiter() -> None:
            try:
                await wait_for_state(sched, app_id, AppState.SUCCEEDED, 30)
            except SchedulerClosedError as exc:
                outcome.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
            with anyio.fail_after(5):
                await sched.aclose()
    assert len(outcome) == 1
    with pytest.raises(SchedulerClosedError):
        await wait_for_state(sched, app_id, AppState.SUCCEEDED, 1)
