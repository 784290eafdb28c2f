"""Wait until an app reaches a state, woken by the scheduler's change signal."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from typing import Any

import anyio

from asyncsched.errors import WaitTimeoutError
from asyncsched.schedulers.api import DescribeAppResponse, Scheduler
from asyncsched.schedulers.responses import response_of
from asyncsched.specs import AppState

__all__ = ("StateTimeoutError", "wait_for_state")

#: how often an app the scheduler does not know (yet) is read again, at most
_UNKNOWN_POLL = 1.0
#: the first pause of a poll, growing by half each time up to the bound
_FIRST_PAUSE = 0.05


class StateTimeoutError(WaitTimeoutError):
    """:func:`wait_for_state` ran out of time; ``detail`` says where the app was."""

    def __init__(self, app_id: str, timeout: float, detail: str = "") -> None:
        super().__init__(app_id, timeout, detail)
        text = f"app {app_id!r} did not reach the state waited for within {timeout}s"
        self.args = (f"{text} ({detail})",)


def _predicate(
    until: Callable[[DescribeAppResponse], bool] | AppState | Collection[AppState],
) -> tuple[Callable[[DescribeAppResponse], bool], str]:
    if isinstance(until, AppState):
        until = (until,)
    if callable(until):
        return until, getattr(until, "__name__", "the predicate")
    states = frozenset(until)
    names = " or ".join(sorted(s.name for s in states))
    return (lambda desc: desc.state in states), names


async def wait_for_state(
    sched: Scheduler[Any],
    app_id: str,
    until: Callable[[DescribeAppResponse], bool] | AppState | Collection[AppState],
    timeout: float = 30.0,  # noqa: ASYNC109 -- like Scheduler.wait
) -> DescribeAppResponse:
    """Wait until ``describe(app_id)`` satisfies ``until``; return that description.

    ``until`` is a state, a collection of states, or a predicate of the
    description. The app is read again at each change the scheduler signals
    (the event is taken before each read, so no change is missed), and at
    least as often as the backend's poll interval for apps it cannot signal
    (the pause grows from 50 ms up to it), as ``Scheduler.wait`` does. An
    app the scheduler does not know (yet) is read again within a second.

    Raises:
        StateTimeoutError: (a ``WaitTimeoutError``) ``timeout`` seconds passed
            first; the message says the state the app was in.
        SchedulerClosedError: the scheduler is or gets closed.

    Example:
        >>> async def started(sched, app_id):
        ...     return await wait_for_state(sched, app_id, AppState.RUNNING, timeout=10)
    """
    check, wanted = _predicate(until)
    seen = "unknown"
    async with sched._watching(app_id):
        key = app_id
        delay = 0.0
        with anyio.move_on_after(timeout):
            while True:
                sched._check_open()
                changed = sched.changed(key)
                snapshot = await sched._describe(app_id)
                poll: float | None = _UNKNOWN_POLL
                if snapshot is not None:
                    if (snapshot.change_key or snapshot.app_id) != key:
                        key = snapshot.change_key or snapshot.app_id
                        continue  # take the right event before reading again
                    desc = response_of(snapshot)
                    if check(desc):
                        return desc
                    seen = desc.state.name
                    poll = sched._poll_interval(snapshot)
                pause = math.inf
                if poll is not None:
                    delay = min(delay * 1.5, poll) if delay else min(_FIRST_PAUSE, poll)
                    pause = delay
                with anyio.move_on_after(pause):
                    await changed.wait()
    sched._check_open()
    raise StateTimeoutError(app_id, timeout, f"waiting for {wanted}; it is {seen}")
