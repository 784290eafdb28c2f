"""An in-process, bounded, ordered log of events that readers resume in.

The fallback event source of a backend without a native one: every event
gets the next sequence number and a cursor naming this history (a random
token) and the number. A reader resumes after a cursor as long as the
history still holds the events after it; a cursor of another history (a
new process) or of trimmed events is not honoured (:meth:`EventHistory.after`
returns None) and the reader starts over with RESYNC.

Example:
    >>> from asyncsched.schedulers.events import AppEvent, EventKind
    >>> h = EventHistory("demo", capacity=2)
    >>> first = h.append(AppEvent("", EventKind.SUBMITTED, "a"))
    >>> h.after(first.cursor)
    []
"""

from __future__ import annotations

import secrets
from collections import deque
from dataclasses import replace

import anyio

from asyncsched.errors import InvalidArgumentError
from asyncsched.schedulers.events import AppEvent
from asyncsched.schedulers.shared.changes import ChangeSignal
from asyncsched.schedulers.shared.cursor import decode_cursor, encode_cursor

__all__ = ("DEFAULT_HISTORY", "EventHistory")

#: events an in-process history keeps for readers that resume
DEFAULT_HISTORY = 16384


class EventHistory:
    """Events numbered in order, the last ``capacity`` kept."""

    def __init__(self, source: str, capacity: int = DEFAULT_HISTORY) -> None:
        if capacity < 1:
            raise InvalidArgumentError(f"capacity must be >= 1, got {capacity}")
        self.source = source
        self.token = secrets.token_hex(8)
        self._events: deque[tuple[int, AppEvent]] = deque(maxlen=capacity)
        self._seq = 0
        self._appended = ChangeSignal()
        #: serialises refreshes of the source that feeds this history
        self.lock = anyio.Lock()

    @property
    def seq(self) -> int:
        """The number of the last event appended (0: none yet)."""
        return self._seq

    def cursor_at(self, seq: int) -> str:
        """The cursor that resumes after event ``seq``."""
        return encode_cursor(self.source, {"t": self.token, "s": seq})

    def append(self, draft: AppEvent) -> AppEvent:
        """Number ``draft``, stamp its cursor, keep it; wake readers."""
        self._seq += 1
        event = replace(draft, cursor=self.cursor_at(self._seq))
        self._events.append((self._seq, event))
        self._appended.notify()
        return event

    def appended(self) -> anyio.Event:
        """Set at the next :meth:`append` (take it before reading)."""
        return self._appended.changed()

    def position(self, cursor: str) -> int | None:
        """The sequence number ``cursor`` resumes after, or None when this
        history cannot honour it (another history, trimmed, or from the future).

        Raises:
            InvalidArgumentError: not a cursor of this source.
        """
        where = decode_cursor(cursor, self.source)
        seq = where.get("s")
        if where.get("t") != self.token or not isinstance(seq, int):
            return None
        oldest = self._events[0][0] if self._events else self._seq + 1
        if seq > self._seq or seq < oldest - 1:
            return None
        return seq

    def after(self, cursor_or_seq: str | int) -> list[AppEvent] | None:
        """The events after a cursor or sequence number (None: not honoured)."""
        if isinstance(cursor_or_seq, str):
            seq = self.position(cursor_or_seq)
            if seq is None:
                return None
        else:
            seq = cursor_or_seq
        return [e for _, e in self.numbered_after(seq)]

    def numbered_after(self, seq: int) -> list[tuple[int, AppEvent]]:
        """``(number, event)`` of every kept event after number ``seq``."""
        if not self._events or self._events[-1][0] <= seq:
            return []
        start = max(0, seq + 1 - self._events[0][0])
        return [self._events[i] for i in range(start, len(self._events))]
