"""ChangeNotifier: per-key wake-ups that cost nothing once nobody waits."""

from __future__ import annotations

import gc
import weakref

import anyio
import pytest

from asyncsched.schedulers.shared.changes import ChangeNotifier

pytestmark = pytest.mark.anyio


async def test_an_event_nobody_holds_any_more_is_not_kept() -> None:
    # a waiter that saw its app end returns without a notify: 10,000 such
    # apps must not leave 10,000 events behind
    notifier = ChangeNotifier()
    refs = []
    for i in range(1000):
        event = notifier.changed(f"app-{i}")
        refs.append(weakref.ref(event))
        del event
    gc.collect()
    assert [r for r in refs if r() is not None] == []
    assert notifier.held() == 0


async def test_a_change_between_taking_the_event_and_waiting_is_not_missed() -> None:
    notifier = ChangeNotifier()
    event = notifier.changed("app")
    assert notifier.changed("app") is event  # one event per key while held
    assert notifier.held() == 1
    notifier.notify("app")
    with anyio.fail_after(5):
        await event.wait()
    assert notifier.changed("app") is not event  # one-shot: the next is new


async def test_notify_all_wakes_every_held_event() -> None:
    notifier = ChangeNotifier()
    events = [notifier.changed(f"app-{i}") for i in range(3)]
    woken: list[int] = []

    async def waiter(i: int) -> None:
        await events[i].wait()
        woken.append(i)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for i in range(3):
                tg.start_soon(waiter, i)
            await anyio.wait_all_tasks_blocked()
            notifier.notify_all()
    assert sorted(woken) == [0, 1, 2]
    assert notifier.held() == 0
