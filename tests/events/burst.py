"""A reader that stops inside the CURRENT burst and resumes there (every backend).

A stream started without a cursor first sends one CURRENT event per app. A
reader that stops after ``k`` of them and resumes from the ``k``-th cursor
must get every app's current state (the whole burst again), then live
changes: :func:`check_resume_inside_burst` asserts that on any scheduler.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio

from asyncsched.schedulers.kit import AppEvent, EventKind, Scheduler
from asyncsched.specs import AppState

__all__ = ("check_resume_inside_burst",)


async def check_resume_inside_burst(
    sched: Scheduler[Any],
    states: Mapping[str, AppState],
    submit: Callable[[], Awaitable[str]],
    *,
    k: int = 1,
    timeout: float = 60.0,
) -> list[AppEvent]:
    """Stop after ``k`` CURRENT events of ``states``' apps (their states now),
    resume from the ``k``-th cursor: each app's CURRENT state arrives, then
    the first event of the app ``submit()`` makes. Returns the resumed events."""
    assert 0 < k < len(states), "stop inside the burst"
    first: list[AppEvent] = []
    with anyio.fail_after(timeout):
        async with sched.events() as stream:
            async for event in stream:
                assert event.kind is EventKind.CURRENT, event
                if event.app_id in states:
                    first.append(event)
                if len(first) == k:
                    break
    assert len(first) == k, first
    resumed: list[AppEvent] = []
    left = set(states)
    with anyio.fail_after(timeout):
        async with sched.events(since=first[-1].cursor) as stream:
            async for event in stream:
                resumed.append(event)
                if event.kind is EventKind.CURRENT and event.app_id in left:
                    assert event.state == states[event.app_id], event
                    left.discard(event.app_id)
                if not left:
                    break
            assert not left, f"{sorted(left)} never came after the resume"
            # then the stream is live: a change made now arrives
            new = await submit()
            async for event in stream:
                resumed.append(event)
                if event.app_id == new:
                    assert event.kind is not EventKind.CURRENT, event
                    return resumed
    raise AssertionError(f"the stream ended before {new} was seen")
