"""The chunks a stream's log got last, kept in memory for the readers following it.

While a ``log_iter(..., should_tail=True)`` of the supervising process
follows a stream, :class:`~asyncsched.schedulers.local._logs.ReplicaLog`
hands every chunk it appends to that stream's file to the stream's
:class:`LogWindow` too, with its end offset in the file and its arrival time
(the same ``(end, time)`` as its index entry). A follower then takes the
bytes after its file position from here: no read of the file and no
worker-thread hop between the pipe and the reader.

Memory stays bounded: a window exists only while someone follows the stream,
drops every chunk all its followers have taken, and keeps at most
:data:`WINDOW_BYTES` (plus the chunk just added) for a follower that lags;
the one that falls behind its start reads the file, which holds the same
bytes at the same offsets, until it catches up.

Example:
    >>> w = LogWindow(start=0)
    >>> reader = w.join(0)
    >>> w.add(b"a\\nb", 1.0)
    >>> w.add(b"\\n", 2.0)
    >>> w.take(reader, 0, 1 << 20)
    [(b'a\\nb', 3, 1.0), (b'\\n', 4, 2.0)]
    >>> w.take(reader, 4, 1 << 20)  # nothing new
    []
    >>> w.leave(reader)
"""

from __future__ import annotations

import bisect

__all__ = ("WINDOW_BYTES", "Chunk", "LogWindow")

#: bytes a window keeps for a follower that lags (beyond that it reads the file)
WINDOW_BYTES = 1 << 20

#: what a chunk costs beyond its bytes (its tuple, its entry), counted in the limit
_CHUNK_OVERHEAD = 128

#: ``(data, end offset in the file, arrival time)``
Chunk = tuple[bytes, int, float]


class LogWindow:
    """The chunks appended to one stream's file since ``start``, for its followers.

    Used from the event-loop thread only (the supervisor appends there, and
    the followers take there).
    """

    __slots__ = (
        "_chunks",
        "_ends",
        "_head",
        "_held",
        "_limit",
        "_next",
        "_readers",
        "_stopped",
        "end",
        "start",
    )

    def __init__(self, start: int, limit: int = WINDOW_BYTES) -> None:
        #: file offset of the first byte held; :attr:`end` of the last
        self.start = self.end = start
        self._limit = limit
        #: the chunks held are ``_chunks[_head:]``; ``_ends`` their end offsets
        self._chunks: list[Chunk] = []
        self._ends: list[int] = []
        self._head = 0
        self._held = 0
        #: follower -> the file offset it has taken everything before
        self._readers: dict[int, int] = {}
        self._next = 0
        self._stopped = False

    @property
    def followers(self) -> int:
        """How many followers take from this window."""
        return len(self._readers)

    @property
    def held(self) -> int:
        """Bytes held now, a small overhead per chunk counted."""
        return self._held

    def join(self, pos: int) -> int:
        """Register a follower that has everything before ``pos``; its token."""
        self._next += 1
        self._readers[self._next] = pos
        return self._next

    def leave(self, reader: int) -> None:
        """Forget a follower (its chunks are dropped once nobody needs them)."""
        self._readers.pop(reader, None)
        self._trim()

    def add(self, data: bytes, when: float) -> None:
        """Keep ``data``, just appended to the file at :attr:`end`, arrived at ``when``."""
        self.end += len(data)
        self._chunks.append((data, self.end, when))
        self._ends.append(self.end)
        self._held += len(data) + _CHUNK_OVERHEAD
        if self._held > self._limit:
            self._trim()

    def stop(self) -> None:
        """No more chunks come here (a write failed): every take reads the file."""
        self._stopped = True
        del self._chunks[:], self._ends[:]
        self._head = self._held = 0

    def take(self, reader: int, pos: int, most: int) -> list[Chunk] | None:
        """The chunks from file offset ``pos`` on (about ``most`` bytes at
        most, at least one chunk), the first cut to start at ``pos``; ``[]``
        when nothing came since; None when ``pos`` is not in the window (read
        the file there)."""
        if self._stopped or not self.start <= pos <= self.end:
            return None
        if pos == self.end:
            return []
        chunks = self._chunks
        first = bisect.bisect_right(self._ends, pos, self._head)  # ends after pos
        data, end, when = chunks[first]
        out = [
            (data[pos - end :], end, when) if end - len(data) < pos else chunks[first]
        ]
        size = end - pos
        for i in range(first + 1, len(chunks)):
            if size >= most:
                break
            out.append(chunks[i])
            size += len(chunks[i][0])
        if reader in self._readers:
            self._readers[reader] = out[-1][1]
            self._trim()
        return out

    def _trim(self) -> None:
        """Drop the chunks every follower took, and the oldest beyond the limit."""
        chunks, head = self._chunks, self._head
        done = min(self._readers.values(), default=self.end)
        last = len(chunks) - 1
        while head <= last and (
            chunks[head][1] <= done or (self._held > self._limit and head < last)
        ):
            self._held -= len(chunks[head][0]) + _CHUNK_OVERHEAD
            self.start = chunks[head][1]
            head += 1
        if head > 64 and head * 2 > len(chunks):  # compact now and then
            del chunks[:head], self._ends[:head]
            head = 0
        self._head = head
