"""Follow many apps at once: the engine of ``Runner.watch/as_completed/wait_all``.

One worker task per app runs in the runner's task group (never in the
consuming generator, so no cancel scope is open across a ``yield``) and hands
``(handle, status)`` events to the consumer through a memory stream; a worker
failure reaches the consumer as an exception, and an abandoned iterator only
cancels the workers' scope.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.lowlevel

from asyncsched.errors import SchedulerClosedError, WaitTimeoutError
from asyncsched.schedulers.shared.taskhost import TaskHost
from asyncsched.specs import AppHandle, AppState, AppStatus

__all__ = ["FanOut", "StatusEvent"]

StatusEvent = tuple[AppHandle, AppStatus | None]
"""``(handle, status)``; ``status`` is None when the scheduler does not know the app."""

#: how an app's status is read: now, or once the app is terminal (None: unknown)
_Probe = Callable[[AppHandle], Awaitable[AppStatus | None]]
_Emit = Callable[[StatusEvent], Awaitable[None]]
_Worker = Callable[[AppHandle, _Emit], Coroutine[Any, Any, None]]

#: seconds between a watched app's first two status checks (then doubling)
_FIRST_RECHECK = 0.05
#: workers started between two yields to the event loop: starting 10,000 at
#: once would hold the loop for seconds
SPAWN_BATCH = 64


@dataclass
class _Failure:
    """Carries an exception from the worker tasks to the consuming iterator."""

    exc: BaseException


_Item = StatusEvent | _Failure


class FanOut:
    """Watch or wait for many apps from tasks of ``host``.

    Args:
        host: The task group the workers run in (the runner's).
        current: The status of an app now (None: unknown to its scheduler).
        final: The status of an app once it is terminal (None: unknown).
        max_queries: At most this many ``current`` calls at once (``watch``).
    """

    def __init__(
        self, host: TaskHost, current: _Probe, final: _Probe, max_queries: int
    ) -> None:
        self._host = host
        self._current = current
        self._final = final
        self._max_queries = max_queries
        self._query_limiter: anyio.CapacityLimiter | None = None

    def _queries(self) -> anyio.CapacityLimiter:
        if self._query_limiter is None:
            self._query_limiter = anyio.CapacityLimiter(self._max_queries)
        return self._query_limiter

    def watch(
        self, handles: Sequence[AppHandle], poll_interval: float
    ) -> AsyncIterator[StatusEvent]:
        """Each app's status at first, then on every state change, until final."""

        async def worker(handle: AppHandle, emit: _Emit) -> None:
            last: AppState | None = None
            delay = _FIRST_RECHECK
            while True:
                async with self._queries():
                    status = await self._current(handle)
                if status is None:
                    await emit((handle, None))
                    return
                if status.state != last:
                    last = status.state
                    await emit((handle, status))
                if status.is_terminal():
                    return
                with anyio.move_on_after(delay):
                    await self._final(handle)
                delay = min(delay * 2, poll_interval)

        return self._fan_out(handles, worker, timeout=None)

    def as_completed(
        self,
        handles: Sequence[AppHandle],
        timeout: float | None,
    ) -> AsyncIterator[StatusEvent]:
        """Each app's final status, in completion order."""

        async def worker(handle: AppHandle, emit: _Emit) -> None:
            await emit((handle, await self._final(handle)))

        return self._fan_out(handles, worker, timeout=timeout)

    async def wait_all(
        self,
        handles: Sequence[AppHandle],
        timeout: float | None,  # noqa: ASYNC109 -- one deadline for all
    ) -> dict[AppHandle, AppStatus | None]:
        """Every app's final status, in the order of ``handles``."""
        results = {
            handle: status
            async for handle, status in self.as_completed(handles, timeout)
        }
        return {h: results[h] for h in handles}

    async def _fan_out(
        self,
        handles: Sequence[AppHandle],
        worker: _Worker,
        timeout: float | None,  # noqa: ASYNC109 -- a deadline, not a wrapper
    ) -> AsyncIterator[StatusEvent]:
        if not handles:
            return
        send, recv = anyio.create_memory_object_stream[_Item](math.inf)
        scope = anyio.CancelScope()

        async def emit(item: StatusEvent) -> None:
            await send.send(item)

        async def run_all() -> None:
            with send:  # closed however this ends, so the consumer sees the end
                failure: BaseException | None = None
                with scope:
                    try:
                        async with anyio.create_task_group() as tg:
                            for i, handle in enumerate(handles, 1):
                                tg.start_soon(worker, handle, emit)
                                if i % SPAWN_BATCH == 0:
                                    await anyio.lowlevel.checkpoint()
                    except Exception as exc:  # noqa: BLE001 -- handed to the consumer
                        failure = exc
                if failure is not None:
                    with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                        send.send_nowait(_Failure(failure))

        await self._host.start_soon(run_all, name="runner-fan-out")
        pending = dict.fromkeys(handles)
        deadline = None if timeout is None else anyio.current_time() + timeout
        try:
            with recv:
                while True:
                    item: _Item | None = None
                    remaining = (
                        math.inf
                        if deadline is None
                        else deadline - anyio.current_time()
                    )
                    with anyio.move_on_after(remaining):
                        try:
                            item = await recv.receive()
                        except anyio.EndOfStream:
                            if pending:  # the runner closed under us
                                raise SchedulerClosedError(
                                    f"the runner closed while {len(pending)} apps"
                                    " were still being waited for"
                                ) from None
                            return
                    if item is None:
                        assert timeout is not None
                        raise WaitTimeoutError(next(iter(pending)), timeout)
                    if isinstance(item, _Failure):
                        raise item.exc
                    if item[1] is None or item[1].is_terminal():
                        pending.pop(item[0], None)
                    yield item
        finally:
            scope.cancel()
