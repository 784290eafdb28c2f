"""The lines this process appended last, for its own readers (no file read).

The writer adds each appended batch (in its worker thread) with where it
ends in the journal; a reader of the same process takes the lines after its
position from here as soon as the writer's signal wakes it, without a read
of the file (one worker-thread hop less on the way from a change to its
event), and moves its file position past them. Lines of other processes are
not here: where the numbers jump, the reader reads the file.

Example:
    >>> tail = JournalTail()
    >>> tail.add(Appended("j1", "seg-1.jsonl", 120, 3, [{"k": "app"}]))
    >>> tail.after("j1", 2)
    ([{'s': 3, 'k': 'app'}], ('seg-1.jsonl', 120))
    >>> tail.after("j1", 1) is None  # line 2 came from another process
    True
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ("DEFAULT_TAIL_BATCHES", "Appended", "JournalTail")

#: batches a process keeps for its readers (older ones are read from the file)
DEFAULT_TAIL_BATCHES = 256
#: lines one call hands out at most (whole batches: a reader far behind
#: catches up in steps, or from the file)
_MOST = 128


@dataclass(frozen=True, slots=True)
class Appended:
    """One appended batch: journal, segment, offset after it, its numbers."""

    journal_id: str
    segment: str
    end: int
    first: int
    lines: Sequence[dict[str, Any]]

    @property
    def last(self) -> int:
        return self.first + len(self.lines) - 1


class JournalTail:
    """The last ``capacity`` batches this process appended (thread-safe)."""

    def __init__(self, capacity: int = DEFAULT_TAIL_BATCHES) -> None:
        self._lock = threading.Lock()
        self._batches: deque[Appended] = deque(maxlen=capacity)

    def add(self, batch: Appended) -> None:
        """Keep ``batch`` (the writer's thread, after the append)."""
        if batch.lines:
            with self._lock:
                self._batches.append(batch)

    def after(
        self, journal_id: str, seq: int
    ) -> tuple[list[dict[str, Any]], tuple[str, int]] | None:
        """The numbered lines right after ``seq`` that are kept here, without
        a jump (whole batches, about 128 lines at most), and the file
        position after the last of them; None when line ``seq + 1`` is not
        here."""
        with self._lock:
            batches = [b for b in self._batches if b.last > seq]
        out: list[dict[str, Any]] = []
        where: tuple[str, int] | None = None
        want = seq + 1
        for batch in batches:
            if batch.journal_id != journal_id or batch.first > want:
                break  # another journal, or lines of another process between
            skip = want - batch.first
            out.extend(
                {"s": batch.first + i, **line}
                for i, line in enumerate(batch.lines)
                if i >= skip
            )
            want = batch.last + 1
            where = (batch.segment, batch.end)
            if len(out) >= _MOST:
                break
        if where is None:
            return None
        return out, where
