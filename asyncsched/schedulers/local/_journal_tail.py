"""The lines this process appended last, for its own readers (no file read).

The writer adds each appended batch (in its worker thread) with where it
ends in the journal; a reader of the same process takes the lines after its
position from here as soon as the writer's signal wakes it, without a read
of the file (one worker-thread hop less on the way from a change to its
event), and moves its file position past them. Lines of other processes are
not here: where the numbers jump, the reader reads the file.

A batch is kept as JSON text (what a reader of the file would decode), not as
the writer's dicts: text is not tracked by the garbage collector, so the
lines of the last 256 batches add nothing to full collections.

Example:
    >>> tail = JournalTail()
    >>> tail.add(Appended("j1", "seg-1.jsonl", 120, 3, [{"k": "app"}]))
    >>> tail.after("j1", 2)
    ([{'s': 3, 'k': 'app'}], ('seg-1.jsonl', 120))
    >>> tail.after("j1", 1) is None  # line 2 came from another process
    True
"""

from __future__ import annotations

import json
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


#: a kept batch: journal id, segment, offset after it, first and last
#: numbers, its lines as JSON text (a tuple of atomic values: untracked)
_Kept = tuple[str, str, int, int, int, str]


class JournalTail:
    """The last ``capacity`` batches this process appended (thread-safe)."""

    def __init__(self, capacity: int = DEFAULT_TAIL_BATCHES) -> None:
        self._lock = threading.Lock()
        self._batches: deque[_Kept] = deque(maxlen=capacity)

    def add(self, batch: Appended) -> None:
        """Keep ``batch`` (the writer's thread, after the append)."""
        if batch.lines:
            text = json.dumps(list(batch.lines), separators=(",", ":"), default=str)
            kept = (
                batch.journal_id,
                batch.segment,
                batch.end,
                batch.first,
                batch.last,
                text,
            )
            with self._lock:
                self._batches.append(kept)

    def after(
        self, journal_id: str, seq: int
    ) -> tuple[list[dict[str, Any]], tuple[str, int]] | None:
        """The numbered lines right after ``seq`` that are kept here, without
        a jump (whole batches, about 128 lines at most), and the file
        position after the last of them; None when line ``seq + 1`` is not
        here."""
        with self._lock:
            batches = [b for b in self._batches if b[4] > seq]
        out: list[dict[str, Any]] = []
        where: tuple[str, int] | None = None
        want = seq + 1
        for batch_journal, segment, end, first, last, text in batches:
            if batch_journal != journal_id or first > want:
                break  # another journal, or lines of another process between
            skip = want - first
            out.extend(
                {"s": first + i, **line}
                for i, line in enumerate(json.loads(text))
                if i >= skip
            )
            want = last + 1
            where = (segment, end)
            if len(out) >= _MOST:
                break
        if where is None:
            return None
        return out, where
