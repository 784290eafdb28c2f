"""A task group owned by a long-lived object (a scheduler), not by one call.

Schedulers run background tasks (process reapers, event streams) that must live
from the first submit until ``aclose()``. The group is hosted by a task of its
own -- an asyncio task, or a trio system task -- which ``aclose()`` (or the
event loop's shutdown) cancels, so nothing outlives the loop and the owner may
be entered and closed from different tasks, on asyncio and on trio alike.

Failures stay contained: no exception of a task ever reaches the group, so one
failing task never cancels its siblings.

* A task started with ``on_error=callback`` (a per-app task) that raises is
  logged and ``callback(exc)`` runs, so that the owner can fail that app only.
* A task without ``on_error`` that raises is logged and forgotten.
* A *service* (:meth:`TaskHost.start_service`, a host-level loop such as an
  event stream or a completion dispatcher) that raises is logged and restarted
  after a backoff (0.1 s doubling up to 5 s), so the host stays usable.

Only ``Exception`` is contained; ``KeyboardInterrupt``/``SystemExit`` propagate.

Example:
    >>> async def main() -> None:
    ...     host = TaskHost("demo")
    ...     await host.start_soon(anyio.sleep, 0, on_error=print)
    ...     await host.aclose()
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import sniffio
from anyio.abc import TaskGroup, TaskStatus

from asyncsched.errors import SchedulerClosedError, SchedulerError

__all__ = [
    "CLOSE_TIMEOUT",
    "ErrorCallback",
    "TaskFunc",
    "TaskHost",
    "describe_error",
]

logger = logging.getLogger(__name__)

#: seconds :meth:`TaskHost.aclose` waits for cancelled tasks to finish their
#: (shielded, themselves bounded) cleanup before it gives up and logs
CLOSE_TIMEOUT = 30.0

#: backoff of a restarted service: first delay, cap
_SERVICE_BACKOFF = (0.1, 5.0)

ErrorCallback = Callable[[Exception], object]
TaskFunc = Callable[..., Coroutine[Any, Any, Any]]


def describe_error(exc: BaseException) -> str:
    """``"Type: message"`` of ``exc``; the distinct leaves of an exception group.

    Example:
        >>> describe_error(ExceptionGroup("x", [OSError("disk full")]))
        'OSError: disk full'
    """
    if isinstance(exc, BaseExceptionGroup):
        leaves = dict.fromkeys(describe_error(e) for e in exc.exceptions)
        return "; ".join(leaves)
    return f"{type(exc).__name__}: {exc}"


class _Status:
    """Forward ``started`` and remember that it was called."""

    def __init__(self, inner: TaskStatus[Any]) -> None:
        self.inner = inner
        self.started_called = False

    def started(self, value: Any = None) -> None:
        self.started_called = True
        self.inner.started(value)


class TaskHost:
    """Own one anyio task group from first use until :meth:`aclose`."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._tg: TaskGroup | None = None
        self._stop: anyio.Event | None = None
        self._finished: anyio.Event | None = None
        self._lock: anyio.Lock | None = None
        self._hosting: object = None  # a strong reference to the hosting task
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once :meth:`aclose` has run."""
        return self._closed

    async def enter(self) -> None:
        """Open the group now (an ``async with`` owner calls this on entry)."""
        await self.group()

    async def group(self) -> TaskGroup:
        """Return the open task group, starting the hosting task on first use.

        Tasks started directly in this group are not guarded: prefer
        :meth:`spawn`, :meth:`start_soon`, :meth:`start` and
        :meth:`start_service`.
        """
        self._check_open()
        if self._tg is not None:
            return self._tg
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            current = self._current()  # another task may have opened it meanwhile
            return current if current is not None else await self._start_hosted()

    def _current(self) -> TaskGroup | None:
        return self._tg

    def spawn(
        self,
        func: TaskFunc,
        *args: object,
        name: str | None = None,
        on_error: ErrorCallback | None = None,
    ) -> None:
        """Run ``func(*args)`` in the (already open) group; never raises into it.

        While :meth:`aclose` runs, the task still starts (and is cancelled at
        once), so cleanup code may call this without checking.

        Raises:
            SchedulerClosedError: the host is closed.
            SchedulerError: the group was never opened (call :meth:`group`).
        """
        if self._tg is None:
            self._check_open()
            raise SchedulerError(f"{self._name}: the task group is not open yet")
        label = name or self._name
        self._tg.start_soon(self._guarded, func, args, label, on_error, name=label)

    async def start_soon(
        self,
        func: TaskFunc,
        *args: object,
        name: str | None = None,
        on_error: ErrorCallback | None = None,
    ) -> None:
        """Run ``func(*args)`` in the group (opened if needed); see :meth:`spawn`."""
        await self.group()
        self.spawn(func, *args, name=name, on_error=on_error)

    async def start(
        self,
        func: TaskFunc,
        *args: object,
        name: str | None = None,
        on_error: ErrorCallback | None = None,
    ) -> Any:
        """Run ``func(*args, task_status=...)``; return what it reports as started.

        An exception before ``task_status.started()`` is raised here; one after
        it is contained like :meth:`spawn`'s.
        """
        label = name or self._name
        tg = await self.group()
        return await tg.start(
            self._guarded_start, func, args, label, on_error, name=label
        )

    async def start_service(
        self, func: TaskFunc, *args: object, name: str | None = None
    ) -> None:
        """Run the host-level loop ``func(*args)``, restarted whenever it raises.

        A service that returns is done; one that raises is logged and started
        again after a backoff.
        """
        await self.start_soon(self._service, func, args, name or self._name, name=name)

    async def aclose(self) -> None:
        """Cancel every task of the group and wait for them; idempotent.

        Waits at most :data:`CLOSE_TIMEOUT` seconds (shielded) for the tasks'
        cleanup, then logs what is left and returns.
        """
        if self._closed:
            return
        self._closed = True
        tg, stop, finished = self._tg, self._stop, self._finished
        if tg is not None:
            tg.cancel_scope.cancel()
        if stop is not None:
            stop.set()
        if finished is not None:
            with anyio.CancelScope(shield=True):
                with anyio.move_on_after(CLOSE_TIMEOUT) as scope:
                    await finished.wait()
            if scope.cancelled_caught:
                logger.error(
                    "%s: background tasks did not finish within %ss of aclose()",
                    self._name,
                    CLOSE_TIMEOUT,
                )
        self._tg = None

    def _check_open(self) -> None:
        if self._closed:
            raise SchedulerClosedError(f"{self._name} is closed")

    # -- containment -----------------------------------------------------------

    def _report(
        self, label: str, exc: Exception, on_error: ErrorCallback | None
    ) -> None:
        logger.error("%s: background task %r failed", self._name, label, exc_info=exc)
        if on_error is None:
            return
        try:
            on_error(exc)
        except Exception:
            logger.exception("%s: the error handler of %r failed", self._name, label)

    async def _guarded(
        self,
        func: TaskFunc,
        args: tuple[object, ...],
        label: str,
        on_error: ErrorCallback | None,
    ) -> None:
        try:
            await func(*args)
        except Exception as exc:  # noqa: BLE001 - contained: logged and reported
            self._report(label, exc, on_error)

    async def _guarded_start(
        self,
        func: TaskFunc,
        args: tuple[object, ...],
        label: str,
        on_error: ErrorCallback | None,
        *,
        task_status: TaskStatus[Any] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        status = _Status(task_status)
        try:
            await func(*args, task_status=status)
        except Exception as exc:
            if not status.started_called:
                raise  # the caller of start() gets it
            self._report(label, exc, on_error)

    async def _service(
        self, func: TaskFunc, args: tuple[object, ...], label: str
    ) -> None:
        delay, cap = _SERVICE_BACKOFF
        while True:
            try:
                await func(*args)
            except Exception as exc:
                logger.error(
                    "%s: service %r failed; restarting in %.1fs",
                    self._name,
                    label,
                    delay,
                    exc_info=exc,
                )
            else:
                return
            await anyio.sleep(delay)
            delay = min(delay * 2, cap)

    # -- hosting ---------------------------------------------------------------

    async def _start_hosted(self) -> TaskGroup:
        ready = anyio.Event()
        groups: list[TaskGroup] = []
        self._stop = stop = anyio.Event()
        self._finished = finished = anyio.Event()

        async def host() -> None:
            try:
                async with anyio.create_task_group() as tg:
                    self._tg = tg
                    groups.append(tg)
                    ready.set()
                    await stop.wait()
                    tg.cancel_scope.cancel()
            except Exception:  # pragma: no cover - tasks are guarded
                logger.exception("%s: the task host failed", self._name)
            finally:
                finished.set()

        library = sniffio.current_async_library()
        label = f"{self._name}-taskhost"
        if library == "asyncio":
            self._hosting = asyncio.get_running_loop().create_task(host(), name=label)
        elif library == "trio":
            import trio

            trio.lowlevel.spawn_system_task(host, name=label)
        else:  # pragma: no cover - anyio supports asyncio and trio only
            raise SchedulerError(f"{self._name}: unsupported event loop {library!r}")
        await ready.wait()
        return groups[0]
