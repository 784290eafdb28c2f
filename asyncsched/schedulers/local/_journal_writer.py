"""What a supervising process puts in its session's event journal.

:class:`EventJournal` turns each change of an app supervised here (the
snapshot at that moment: submitted, a replica started or exited with its exit
code and reason, a restart, the app's state) into journal lines, queued in the
event loop. The record writer takes the queue with each batch of records and
appends it in the same worker-thread hop, after the records: a reader told of
a change finds the record at least that new. A failed append (a full disk) is
logged and never touches the apps: the next append starts with a gap line, so
readers resync instead of missing changes silently.

Example:
    >>> import tempfile
    >>> from asyncsched.schedulers.kit import AppSnapshot
    >>> journal = EventJournal(tempfile.mkdtemp())
    >>> journal.changed(AppSnapshot("a", []), observed=1.0)
    >>> [line["k"] for line in journal.take()]
    ['submitted']
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from asyncsched.errors import InvalidArgumentError
from asyncsched.schedulers.events import replica_to_json
from asyncsched.schedulers.kit import (
    AppEvent,
    AppSnapshot,
    ChangeSignal,
    SnapshotDiffer,
)
from asyncsched.schedulers.local._journal import (
    DEFAULT_SEGMENT_BYTES,
    DEFAULT_SEGMENTS,
    JournalFile,
)
from asyncsched.schedulers.local._journal_tail import (
    DEFAULT_TAIL_BATCHES,
    Appended,
    JournalTail,
)
from asyncsched.schedulers.local._journal_watch import watch_journal
from asyncsched.specs import NONE

__all__ = ("REPLICA_DEFAULTS", "EventJournal", "JournalBounds", "event_line")

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class JournalBounds:
    """How much event history a local session keeps on disk.

    The journal is written in segments; once the current segment holds
    ``segment_bytes`` a new one starts, and only the newest ``segments`` are
    kept. A cursor older than the oldest kept event resumes with RESYNC.
    Besides, the last ``tail_batches`` appended batches stay in memory for
    the session's readers in this process, which take them from there instead
    of reading the file; a reader further behind reads the file.

    Example:
        >>> JournalBounds().segment_bytes, JournalBounds().segments
        (4194304, 4)
        >>> JournalBounds().tail_batches
        256

    Raises:
        InvalidArgumentError: a bound is not a positive int (``segments`` < 2).
    """

    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    segments: int = DEFAULT_SEGMENTS
    tail_batches: int = DEFAULT_TAIL_BATCHES

    def __post_init__(self) -> None:
        for name, low in (("segment_bytes", 1), ("segments", 2), ("tail_batches", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise InvalidArgumentError(
                    f"JournalBounds.{name} must be an int >= {low}, got {value!r}"
                )


def event_line(event: AppEvent) -> dict[str, Any]:
    """A change event as a compact journal line (without its number)."""
    line: dict[str, Any] = {
        "k": event.kind.value,
        "a": event.app_id,
        "st": event.state.name,
        "t": round(event.observed, 3),
        "n": event.num_restarts,
    }
    if event.msg and event.msg != NONE:
        line["m"] = event.msg
    if event.role is not None:
        line["r"] = event.role
        line["i"] = event.replica_id
    if event.replicas:
        line["rs"] = [_compact(replica_to_json(r)) for r in event.replicas]
    return line


#: replica fields every local replica has: left out of journal lines
REPLICA_DEFAULTS: dict[str, Any] = {
    "hostname": "localhost",
    "structured_error_msg": NONE,
}


def _compact(replica: dict[str, Any]) -> dict[str, Any]:
    for key, value in REPLICA_DEFAULTS.items():
        if replica.get(key) == value:
            del replica[key]
    return replica


class EventJournal:
    """The journal lines of this process's apps, queued until the next batch.

    Args:
        directory: The session's journal directory.
        bounds: Segment size and count.
        before_write: The fault seam's hook, called with the directory
            (in the worker thread) before each append.
        kernel_watch: Let the kernel tell of other processes' appends where
            it can (inotify); False polls the journal's size.
    """

    def __init__(
        self,
        directory: str,
        bounds: JournalBounds | None = None,
        before_write: Callable[[str], None] | None = None,
        *,
        kernel_watch: bool = True,
    ) -> None:
        bounds = bounds or JournalBounds()
        self.file = JournalFile(
            directory, bounds.segment_bytes, bounds.segments, keep_open=True
        )
        self._before_write = before_write
        self._differ = SnapshotDiffer()
        self._pending: list[dict[str, Any]] = []
        #: notified (in the loop) after each append of this process, and by
        #: :meth:`watch` when the journal grew (another process appended)
        self.appended = ChangeSignal()
        #: the batches appended last, for this process's readers
        self.tail = JournalTail(bounds.tail_batches)
        #: readers following the journal now (the watch runs while > 0)
        self.readers = 0
        #: raised by the watch whenever a segment may have been added
        self.segments = 0
        self._watching = False
        self.kernel_watch = kernel_watch
        #: appends come from the record writer's hop and from the spawn and
        #: exit jobs that write their own app's record: one at a time
        self._write_lock = threading.Lock()

    def start_watch(self, spawn: Callable[..., None]) -> None:
        """Count one more reader; start the watch (with ``spawn``) if none runs."""
        self.readers += 1
        if not self._watching:
            self._watching = True
            spawn(self._watch, name="local:journal-watch")

    async def _watch(self) -> None:
        """Wake every reader of this process when the journal may have grown
        (another process appended): see ``_journal_watch``."""
        try:
            await watch_journal(
                self.file.directory,
                self._grew,
                lambda: self.readers > 0,
                kernel=self.kernel_watch,
            )
        finally:
            self._watching = False

    def _grew(self, new_segment: bool) -> None:
        if new_segment:
            self.segments += 1
        self.appended.notify()

    def close(self) -> None:
        """Release the journal's kept descriptor (appends still work after)."""
        self.file.close()

    @property
    def directory(self) -> str:
        return self.file.directory

    def changed(self, snapshot: AppSnapshot, *, observed: float) -> None:
        """``snapshot`` is the app's state now: queue what changed (in the loop)."""
        for draft in self._differ.update(snapshot, observed=observed):
            self._pending.append(event_line(draft))

    def new_app_lines(
        self, snapshot: AppSnapshot, *, observed: float
    ) -> list[dict[str, Any]]:
        """The lines of an app not journaled yet, as :meth:`changed` would queue
        them (pure: any thread; :meth:`remember` it once they are written)."""
        return [
            event_line(e) for e in SnapshotDiffer().update(snapshot, observed=observed)
        ]

    def remember(self, snapshot: AppSnapshot, *, observed: float) -> None:
        """``snapshot`` was journaled outside the queue (in the loop): the next
        change of its app is diffed against it."""
        self._differ.update(snapshot, observed=observed)

    def preview(
        self, snapshot: AppSnapshot, *, observed: float
    ) -> list[dict[str, Any]]:
        """The lines :meth:`changed` would queue for ``snapshot``, queueing and
        remembering nothing (in the loop)."""
        return [event_line(e) for e in self._differ.peek(snapshot, observed=observed)]

    def knows(self, app_id: str) -> bool:
        """True while the last journaled state of ``app_id`` is kept."""
        return app_id in self._differ

    def forget(self, app_id: str) -> None:
        """Drop the last journaled state of ``app_id`` (it will not change)."""
        self._differ.forget(app_id, observed=0.0)

    @property
    def pending(self) -> bool:
        return bool(self._pending)

    def take(self) -> list[dict[str, Any]]:
        """The queued lines (in the loop); the queue is empty afterwards."""
        lines, self._pending = self._pending, []
        return lines

    def write(self, lines: Sequence[dict[str, Any]]) -> None:
        """Append ``lines`` now (blocking: a worker thread). Never raises."""
        if not lines:
            return
        try:
            if self._before_write is not None:
                self._before_write(self.file.directory)
            with self._write_lock:
                last = self.file.append(lines)
                if self.file.written is not None:
                    journal_id, segment, end = self.file.written
                    first = last - len(lines) + 1
                    self.tail.add(Appended(journal_id, segment, end, first, lines))
        except Exception as exc:  # noqa: BLE001 - supervision goes on; readers resync
            self.file.lost = True
            logger.warning(
                "appending %d event(s) to %s failed (readers will resync): %s",
                len(lines),
                self.file.directory,
                exc,
            )
