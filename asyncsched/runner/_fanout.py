"""Wait for many apps at once: the engine of ``Runner.as_completed/wait_all``.

Worker tasks run in the runner's task group (never in the consuming
generator, so no cancel scope is open across a ``yield``) and hand
``(handle, status)`` events to the consumer through a memory stream; a worker
failure reaches the consumer as an exception, and an abandoned iterator only
cancels the workers' scope.

A worker is started per app, but at most ``PROBING`` of them are in their
first check at once: an app already final is reported and its worker gone
before the next one starts, so waiting on 10,000 apps of which most have
ended holds a task only for each unfinished one (each held task is a dozen
coroutine frames the garbage collector scans again and again).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import anyio

from asyncsched.errors import SchedulerClosedError, WaitTimeoutError
from asyncsched.schedulers.shared.taskhost import TaskHost
from asyncsched.specs import AppHandle, AppStatus

__all__ = ["FanOut", "StatusEvent"]

StatusEvent = tuple[AppHandle, AppStatus | None]
"""``(handle, status)``; ``status`` is None when the scheduler does not know the app."""

#: how an app's status is read: now, or once the app is terminal (None: unknown)
_Probe = Callable[[AppHandle], Awaitable[AppStatus | None]]
#: ``(True, final status)`` if the app is final now, else ``(False, None)``
_FinalNow = Callable[[AppHandle], Awaitable[tuple[bool, AppStatus | None]]]
_Emit = Callable[[StatusEvent], Awaitable[None]]
#: a worker calls ``checked()`` once past its first check of the app
_Worker = Callable[[AppHandle, _Emit, Callable[[], None]], Coroutine[Any, Any, None]]

#: workers in their first check of an app at once (the next one starts when
#: one is past it): starting 10,000 at once would hold the loop for seconds
#: and keep 10,000 tasks alive while most of them only read a final status
PROBING = 64


@dataclass
class _Failure:
    """Carries an exception from the worker tasks to the consuming iterator."""

    exc: BaseException


_Item = StatusEvent | _Failure


@dataclass(frozen=True, eq=False)
class FanOut:
    """Watch or wait for many apps from tasks of ``host``.

    Args:
        host: The task group the workers run in (the runner's).
        final: The status of an app once it is terminal (None: unknown).
        final_now: Whether an app is final now, and its status if so.
    """

    host: TaskHost
    final: _Probe
    final_now: _FinalNow

    def as_completed(
        self,
        handles: Sequence[AppHandle],
        timeout: float | None,
    ) -> AsyncIterator[StatusEvent]:
        """Each app's final status, in completion order."""

        async def worker(
            handle: AppHandle, emit: _Emit, checked: Callable[[], None]
        ) -> None:
            final, status = await self.final_now(handle)
            checked()
            if not final:
                status = await self.final(handle)
            await emit((handle, status))

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

        probing = anyio.Semaphore(PROBING)

        async def emit(item: StatusEvent) -> None:
            await send.send(item)

        async def gated(handle: AppHandle) -> None:
            checking = True

            def checked() -> None:
                nonlocal checking
                if checking:
                    checking = False
                    probing.release()

            try:
                await worker(handle, emit, checked)
            finally:
                checked()

        async def run_all() -> None:
            with send:  # closed however this ends, so the consumer sees the end
                failure: BaseException | None = None
                with scope:
                    try:
                        async with anyio.create_task_group() as tg:
                            for handle in handles:
                                await probing.acquire()
                                tg.start_soon(gated, handle)
                    except Exception as exc:  # noqa: BLE001 -- handed to the consumer
                        failure = exc
                if failure is not None:
                    with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                        send.send_nowait(_Failure(failure))

        await self.host.start_soon(run_all, name="runner-fan-out")
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
