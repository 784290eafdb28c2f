"""Per-key change events: "wake me at the next change of this app".

A waiter takes :meth:`ChangeNotifier.changed` *before* it reads the state it
waits on, then awaits the event: a change between the read and the wait is
never missed. Events are one-shot and made on demand, and held weakly: a key
nobody holds an event of any more (its waiter saw the app end and returned)
costs nothing, so 10,000 apps waited to their end leave no event behind.

Example:
    >>> async def waiter(changes: ChangeNotifier, read_state) -> None:
    ...     while True:
    ...         event = changes.changed("app-1")
    ...         if read_state() == "done":
    ...             return
    ...         await event.wait()
"""

from __future__ import annotations

import weakref

import anyio

__all__ = ["ChangeNotifier", "ChangeSignal"]


class ChangeNotifier:
    """One-shot events keyed by a string (an app id, an object's key)."""

    def __init__(self) -> None:
        # weak: an event lives as long as someone may still await it
        self._events: weakref.WeakValueDictionary[str, anyio.Event] = (
            weakref.WeakValueDictionary()
        )
        self._any: anyio.Event | None = None

    def held(self) -> int:
        """How many keys have an event someone still holds (e.g. a waiter)."""
        return len(self._events)

    def changed(self, key: str) -> anyio.Event:
        """An event set at the next change of ``key`` (take it before reading)."""
        event = self._events.get(key)
        if event is None:
            event = anyio.Event()
            self._events[key] = event
        return event

    def changed_any(self) -> anyio.Event:
        """An event set at the next change of any key (take it before reading).

        For a consumer of every change (an event stream re-reading all apps).
        """
        if self._any is None:
            self._any = anyio.Event()
        return self._any

    def notify(self, key: str) -> None:
        """Wake everyone waiting on ``key`` (and on any key)."""
        event = self._events.pop(key, None)
        if event is not None:
            event.set()
        self._wake_any()

    def _wake_any(self) -> None:
        any_event, self._any = self._any, None
        if any_event is not None:
            any_event.set()

    def notify_all(self) -> None:
        """Wake every waiter (e.g. the cache was rebuilt, or the owner closed)."""
        events = list(self._events.values())
        self._events = weakref.WeakValueDictionary()
        self._wake_any()
        for event in events:
            event.set()


class ChangeSignal:
    """One unkeyed one-shot event: :class:`ChangeNotifier` for a single thing.

    Example:
        >>> signal = ChangeSignal()
        >>> event = signal.changed()
        >>> signal.notify()
        >>> event.is_set()
        True
    """

    def __init__(self) -> None:
        self._event: anyio.Event | None = None

    def changed(self) -> anyio.Event:
        """An event set at the next :meth:`notify` (take it before reading)."""
        if self._event is None:
            self._event = anyio.Event()
        return self._event

    def notify(self) -> None:
        """Wake everyone waiting for the next change."""
        event, self._event = self._event, None
        if event is not None:
            event.set()
