"""The app records on disk: one writer task batches every app's record writes.

Example:
    >>> supervisor_info()["pid"] == os.getpid()
    True
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from typing import Any, Protocol

import anyio

from asyncsched.schedulers.kit import ChangeSignal
from asyncsched.schedulers.local._journal_writer import EventJournal
from asyncsched.schedulers.local._process import pid_start_time
from asyncsched.schedulers.local._records import write_json_atomic, write_pointer

__all__ = ("RecordJob", "RecordWriter", "Recorded", "supervisor_info")

logger = logging.getLogger(__name__)

#: how long closing the record writer waits for the batch in flight
WRITER_CLOSE_TIMEOUT = 30.0

_SUPERVISOR: tuple[int, dict[str, Any]] | None = None


def supervisor_info() -> dict[str, Any]:
    """Identity of this (supervising) process, as records name it (cached)."""
    global _SUPERVISOR
    pid = os.getpid()
    if _SUPERVISOR is None or _SUPERVISOR[0] != pid:  # recomputed after a fork
        _SUPERVISOR = (
            pid,
            {
                "pid": pid,
                "start_time": pid_start_time(pid),
                "hostname": socket.gethostname(),
            },
        )
    return dict(_SUPERVISOR[1])


#: one app's write: record path, record, app dir, SUCCESS content, pointer
RecordJob = tuple[
    str, dict[str, Any], str, dict[str, Any] | None, tuple[str, str, str] | None
]


class Recorded(Protocol):
    """What the writer needs of an app: its change counters, its record job,
    and where to report a failed write."""

    #: bumped at each change; the record on disk is current once
    #: ``written_seq`` reaches it
    dirty_seq: int
    written_seq: int

    def record_job(self) -> RecordJob:
        """What to write now (called in the loop)."""
        ...

    def record_failed(self, exc: Exception, *, closing: bool = False) -> None:
        """Writing the record failed with ``exc``."""
        ...


class RecordWriter:
    """Write the records of every app of a scheduler from one task.

    Apps mark themselves dirty; the writer snapshots every dirty app (in the
    loop) and writes them all in ONE worker-thread hop, atomically each (temp
    file + rename), pointers after their records. Changes made while a batch
    is being written are coalesced into the next batch. With a ``journal``,
    each change is also journaled when it is marked (``on_mark`` makes its
    lines) and the lines go out in the same hop, after the records.
    """

    def __init__(
        self,
        before_write: Callable[[str], None] | None = None,
        *,
        journal: EventJournal | None = None,
        on_mark: Callable[[Any], None] | None = None,
    ) -> None:
        #: the fault seam's hook, called with each record path before it is written
        self._before_write = before_write
        self.journal = journal
        self._on_mark = on_mark
        self._dirty: dict[Recorded, None] = {}
        self._wake: anyio.Event | None = None
        self._written = ChangeSignal()
        self._scope: anyio.CancelScope | None = None
        self._stopped: anyio.Event | None = None
        self.closed = False
        #: worker-thread hops of its own made so far (each writes a batch)
        self.hops = 0

    def mark(self, app: Recorded) -> None:
        """``app`` changed: write its record soon."""
        if self._on_mark is not None:
            self._on_mark(app)
        if self.closed:
            return
        self._dirty[app] = None
        if self._wake is not None:
            self._wake.set()

    def discard(self, app: Recorded) -> None:
        """Forget ``app`` (it will not be written again by the writer)."""
        self._dirty.pop(app, None)

    def written(self) -> anyio.Event:
        """An event set when the next batch has been written."""
        return self._written.changed()

    async def run(self) -> None:
        """The writer task; runs until :meth:`aclose`."""
        self._stopped = anyio.Event()
        try:
            with anyio.CancelScope() as self._scope:
                if self.closed:
                    return
                while True:
                    if not self._dirty and not self._journal_pending():
                        self._wake = anyio.Event()
                        await self._wake.wait()
                        self._wake = None
                        continue
                    apps = list(self._dirty)
                    self._dirty.clear()
                    try:
                        await self.write(apps)
                    except Exception:
                        logger.exception("writing app records failed")
        finally:
            self._stopped.set()

    def _journal_pending(self) -> bool:
        return self.journal is not None and self.journal.pending

    async def write(self, apps: list[Recorded]) -> None:
        """Write the records of ``apps`` now (and the journal's queued lines),
        in one worker-thread hop."""
        lines = self.journal.take() if self.journal is not None else []
        if not apps and not lines:
            return
        seqs = [app.dirty_seq for app in apps]
        jobs = [app.record_job() for app in apps]
        # Not on cancellation: cancelled before the thread ran, nothing was
        # written and the records stay stale (aclose writes those once more).
        # An error is not retried (waiters must not wait for it forever).
        written = False
        failures: list[tuple[int, Exception]] = []
        try:
            self.hops += 1
            failures = await anyio.to_thread.run_sync(
                _write_batch, jobs, self._before_write, self.journal, lines
            )
            written = True
        except Exception:
            written = True
            raise
        finally:
            if written:
                for app, seq in zip(apps, seqs, strict=True):
                    app.written_seq = max(app.written_seq, seq)
            elif self.journal is not None and lines:  # cancelled: never written
                self.journal.file.lost = True
            self._written.notify()
            if self.journal is not None and lines:
                self.journal.appended.notify()
        for i, exc in failures:  # one app's record failing fails that app only
            apps[i].record_failed(exc, closing=self.closed)

    def write_here(
        self, jobs: list[RecordJob], lines: list[dict[str, Any]]
    ) -> list[tuple[int, Exception]]:
        """Write ``jobs``, then the journal ``lines``, in THIS thread (blocking).

        For a worker-thread job that already runs off the loop (the spawn, an
        exit) and writes its own app's record there instead of handing it to
        the writer's next hop; the loop then calls :meth:`wrote`. Returns the
        failures (index, error).
        """
        return _write_batch(jobs, self._before_write, self.journal, lines)

    def wrote(self, apps: list[tuple[Recorded, int]], lines: bool) -> None:
        """In the loop, after :meth:`write_here`: each app's record is on disk
        as of its change counter ``seq``; wake whoever waits for it."""
        for app, seq in apps:
            app.written_seq = max(app.written_seq, seq)
            if app.written_seq >= app.dirty_seq:
                self._dirty.pop(app, None)
        self._written.notify()
        if lines and self.journal is not None:
            self.journal.appended.notify()

    async def aclose(self) -> None:
        """Stop the writer task (after the batch in flight) and release waiters."""
        self.closed = True
        if self._scope is not None:
            self._scope.cancel()
        if self._stopped is not None:
            with anyio.CancelScope(shield=True):
                with anyio.move_on_after(WRITER_CLOSE_TIMEOUT):
                    await self._stopped.wait()
        self._written.notify()


def _write_batch(
    jobs: list[RecordJob],
    before_write: Callable[[str], None] | None,
    journal: EventJournal | None,
    lines: list[dict[str, Any]],
) -> list[tuple[int, Exception]]:
    """The records, then the journal lines (which never raise)."""
    failures = _write_records(jobs, before_write)
    if journal is not None:
        journal.write(lines)
    return failures


def _write_records(
    jobs: list[RecordJob], before_write: Callable[[str], None] | None
) -> list[tuple[int, Exception]]:
    """Write each job; return the failures (index, error): one never stops the rest."""
    failures: list[tuple[int, Exception]] = []
    for i, job in enumerate(jobs):
        try:
            if before_write is not None:
                before_write(job[0])
            _write_record(*job)
        except Exception as exc:  # noqa: BLE001 - reported to the app it belongs to
            failures.append((i, exc))
    return failures


def _write_record(
    path: str,
    data: dict[str, Any],
    app_dir: str,
    success: dict[str, Any] | None,
    pointer: tuple[str, str, str] | None,
) -> None:
    if success is not None:  # before the record: readers of a finished
        # record (other processes) always find SUCCESS next to it
        write_json_atomic(os.path.join(app_dir, "SUCCESS"), success)
    write_json_atomic(path, data)
    if pointer is not None:  # after the record: a pointer never dangles
        write_pointer(*pointer, app_dir)
