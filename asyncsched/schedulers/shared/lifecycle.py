"""``async with`` and a shielded, bounded, idempotent ``aclose()`` for long-lived objects.

Schedulers and runners own background tasks (and, for local backends,
processes) from ``__aenter__`` until ``aclose()``. :class:`AsyncClosable`
writes that lifecycle once; a subclass supplies the hooks ``_aenter`` (open
resources in the entering task), ``_aclose`` (release them; runs shielded from
cancellation) and ``_close_timeout`` (how long ``_aclose`` may take before what
is left is abandoned and logged).

Background tasks go in a
:class:`~asyncsched.schedulers.shared.taskhost.TaskHost` (``await
host.enter()`` in ``_aenter``, ``await host.aclose()`` in ``_aclose``), never
in a task group entered in ``_aenter``: such a group would wrap the caller's
``async with`` block, and ``_aclose`` runs inside ``aclose``'s own cancel
scopes, where it cannot be exited. ``__aenter__`` refuses it with a
:class:`~asyncsched.errors.SchedulerError` that says so.

Example:
    >>> class Pool(AsyncClosable):
    ...     def _close_timeout(self) -> float:
    ...         return 5.0
    ...
    ...     async def _aclose(self) -> None:
    ...         print("released")
    >>> async def main() -> None:
    ...     async with Pool() as pool:
    ...         pass  # aclose() ran at the end of the block: "released"
"""

from __future__ import annotations

import contextlib
import logging
from types import TracebackType
from typing import NoReturn, Self

import anyio

from asyncsched.errors import SchedulerClosedError, SchedulerError

__all__ = ["AsyncClosable"]

logger = logging.getLogger(__name__)


class AsyncClosable:
    """An object used as ``async with`` (or closed by :meth:`aclose`), once."""

    _closed: bool = False

    async def __aenter__(self) -> Self:
        self._check_open()
        # a cancel scope (a task group) _aenter leaves open cannot exit this
        # one in order: refused now, not as a puzzle at close time
        guard = anyio.CancelScope()
        guard.__enter__()
        try:
            await self._aenter()
        except BaseException as exc:
            guard.__exit__(type(exc), exc, exc.__traceback__)
            raise
        try:
            guard.__exit__(None, None, None)
        except RuntimeError as exc:
            if "cancel scope" not in str(exc).lower():
                raise
            await self._refuse_open_scope(guard, exc)
        return self

    async def _refuse_open_scope(
        self, guard: anyio.CancelScope, exc: RuntimeError
    ) -> NoReturn:
        """``_aenter`` left a scope open: close it with ``_aclose`` (in order
        here, on asyncio), leave ``guard``, and raise a clear error."""
        self._closed = True
        with contextlib.suppress(Exception):
            await self._aclose()
        with contextlib.suppress(RuntimeError):
            guard.__exit__(None, None, None)
        raise SchedulerError(
            f"{type(self).__name__}._aenter left a task group (or cancel scope) "
            "open; it cannot be closed in _aclose, which runs in aclose()'s own "
            "cancel scopes: start background tasks in a TaskHost (await "
            "host.enter() in _aenter, await host.aclose() in _aclose)"
        ) from exc

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Release everything the object holds; idempotent, never raises.

        Shielded from cancellation, and bounded: after ``_close_timeout()``
        seconds whatever is left is abandoned and logged.
        """
        if self._closed:
            return
        self._closed = True
        timeout = self._close_timeout()
        with anyio.CancelScope(shield=True), anyio.move_on_after(timeout) as scope:
            await self._aclose()
        if scope.cancelled_caught:
            logger.error("%r did not close within %ss", self, timeout)

    @property
    def closed(self) -> bool:
        """True once :meth:`aclose` ran."""
        return self._closed

    def _check_open(self) -> None:
        """Raise :class:`~asyncsched.errors.SchedulerClosedError` once closed."""
        if self._closed:
            raise SchedulerClosedError(f"{self!r} is closed")

    def _close_timeout(self) -> float:
        """Hook: how many seconds :meth:`aclose` may take."""
        return 60.0

    async def _aenter(self) -> None:
        """Hook: open resources in the entering task.

        Background tasks: ``await self._host.enter()`` on a
        :class:`~asyncsched.schedulers.shared.taskhost.TaskHost`, closed in
        :meth:`_aclose`. Never enter a task group (or a cancel scope) here
        and leave it open: ``__aenter__`` raises
        :class:`~asyncsched.errors.SchedulerError` for it (see the module).
        """

    async def _aclose(self) -> None:
        """Hook: release resources. Runs shielded from cancellation."""
