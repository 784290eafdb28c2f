"""What ``Scheduler.events()`` returns: a backend's events, filtered and named.

A plain async iterator (not a generator) around the backend's source: it
keeps the wanted apps' events (RESYNC always), sets each event's handle, and
closes the source when closed. Use it as ``async with`` (or
``contextlib.aclosing``) to release the source as soon as the reader stops:

    >>> async def first_change(sched) -> None:
    ...     async with sched.events() as stream:
    ...         async for event in stream:
    ...             return event
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import replace

from asyncsched.schedulers.events import AppEvent, EventKind
from asyncsched.schedulers.shared.closing_iterator import ClosingIterator

__all__ = ("EventStream",)


class EventStream(ClosingIterator[AppEvent]):
    """``source``'s events of the ``wanted`` apps (None: all), with handles."""

    def __init__(
        self,
        source: AsyncIterator[AppEvent],
        wanted: frozenset[str] | None,
        handle: Callable[[str], str],
    ) -> None:
        self._source = source
        self._wanted = wanted
        self._handle = handle

    async def __anext__(self) -> AppEvent:
        while True:
            event = await self._source.__anext__()
            if event.kind is EventKind.RESYNC:
                return event
            if self._wanted is None or event.app_id in self._wanted:
                return replace(event, handle=self._handle(event.app_id))

    async def aclose(self) -> None:
        """Stop reading and release the source."""
        closer = getattr(self._source, "aclose", None)
        if closer is not None:
            await closer()
