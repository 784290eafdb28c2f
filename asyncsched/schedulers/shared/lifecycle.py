"""``async with`` and a shielded, bounded, idempotent ``aclose()`` for long-lived objects.

Schedulers and runners own background tasks (and, for local backends,
processes) from ``__aenter__`` until ``aclose()``. :class:`AsyncClosable`
writes that lifecycle once; a subclass supplies the hooks ``_aenter`` (open
resources in the entering task), ``_aclose`` (release them; runs shielded from
cancellation) and ``_close_timeout`` (how long ``_aclose`` may take before what
is left is abandoned and logged).

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

import logging
from types import TracebackType
from typing import Self

import anyio

from asyncsched.errors import SchedulerClosedError

__all__ = ["AsyncClosable"]

logger = logging.getLogger(__name__)


class AsyncClosable:
    """An object used as ``async with`` (or closed by :meth:`aclose`), once."""

    _closed: bool = False

    async def __aenter__(self) -> Self:
        self._check_open()
        await self._aenter()
        return self

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
        """Hook: open resources in the entering task (e.g. a task group)."""

    async def _aclose(self) -> None:
        """Hook: release resources. Runs shielded from cancellation."""
