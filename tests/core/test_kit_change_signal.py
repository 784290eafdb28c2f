"""A backend signals changes through public methods of the base class."""

from __future__ import annotations

import anyio
import anyio.abc
import pytest

from asyncsched.testing import InMemoryScheduler

pytestmark = pytest.mark.anyio


async def test_notify_changed_sets_the_event_taken_before_it_for_that_key_only() -> (
    None
):
    async with InMemoryScheduler("signal") as sched:
        mine = sched.changed("app-1")
        other = sched.changed("app-2")
        sched.notify_changed("app-1")
        assert mine.is_set()
        assert not other.is_set()
        assert not sched.changed("app-1").is_set()  # one-shot: a fresh event next


async def test_a_waiter_wakes_at_notify_changed() -> None:
    async with InMemoryScheduler("signal") as sched:
        woke = anyio.Event()

        async def waiter(*, task_status: anyio.abc.TaskStatus[None]) -> None:
            event = sched.changed("k")
            task_status.started()
            await event.wait()
            woke.set()

        async with anyio.create_task_group() as tg:
            await tg.start(waiter)  # it holds its event: ready
            sched.notify_changed("k")
            with anyio.fail_after(10):
                await woke.wait()


async def test_parts_handed_the_change_source_wake_the_schedulers_waiters() -> None:
    async with InMemoryScheduler("signal") as sched:
        event = sched.changed("k")
        sched.change_source.notify("k")
        assert event.is_set()
