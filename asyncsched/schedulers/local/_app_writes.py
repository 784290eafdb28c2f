"""An app's record written by the worker-thread job it is in anyway.

Starting an app already costs a spawner-thread job (dirs, log files,
``fork``/``exec``); handing its first record to the record writer would cost a
second hop, one after the other, before ``submit`` may return. Instead the
spawn job itself writes the first record, the state-dir pointer and the app's
SUBMITTED journal line (through the writer's :meth:`RecordWriter.write_here`),
and the loop then takes them as written (:meth:`FirstRecord.adopt`). When
other spawns wait for the spawner (submits at once), the record is left to
the writer, whose one hop writes the records and journal lines of many apps:
there the batch costs less than a write per app.

Likewise at the end: the exit that ends an app already costs a hop to read its
exit facts (reply file, cancel marker). :class:`FinalRecord` makes, in the
loop, the final record, ``SUCCESS`` and journal lines the plain outcome would
give (the app's fields set and put back, nobody seeing them); the exit-facts
hop writes them when the facts are plain, and the loop, once it has handled
the exit as usual, checks that its record is the one written
(:meth:`FinalRecord.adopt`).

Example:
    >>> FirstRecord.__slots__[:2]
    ('app', 'failure')
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from asyncsched.schedulers.kit import AppSnapshot, SnapshotDiffer
from asyncsched.schedulers.local._app_record import app_record, success_file
from asyncsched.schedulers.local._journal_writer import event_line
from asyncsched.schedulers.local._local_app import LocalApp
from asyncsched.schedulers.local._logs import LogFiles
from asyncsched.schedulers.local._record_writer import RecordJob, RecordWriter
from asyncsched.schedulers.local._records import remove_pointer
from asyncsched.schedulers.local._replica import Replica
from asyncsched.schedulers.local._snapshot import snapshot_app
from asyncsched.schedulers.local._spawn import Started
from asyncsched.specs import AppState, rollup_state

__all__ = ("FinalRecord", "FinalRecords", "FirstRecord")


class FirstRecord:
    """The first record of an app, written in its spawn job.

    Called in the spawner thread once every replica started, before anyone
    else can see the app (it is in no table and no replica is watched yet):
    the app's first attempts are noted (:meth:`LocalApp.prepare`) and its
    record, pointer and journal line written. :meth:`adopt` (in the loop)
    tells the writer and the journal; :meth:`undo` (blocking) takes them back
    when the submit is undone.
    """

    __slots__ = (
        "app",
        "busy",
        "failure",
        "lines",
        "observed",
        "seq",
        "snapshot",
        "writer",
        "written",
    )

    def __init__(
        self, app: LocalApp, writer: RecordWriter, busy: Callable[[], bool]
    ) -> None:
        self.app = app
        self.writer = writer
        #: True when other spawns wait: the writer's batch is cheaper then
        self.busy = busy
        #: the record was written by the spawn job
        self.written = False
        self.snapshot: AppSnapshot | None = None
        self.observed = 0.0
        self.seq = 0
        self.lines: list[dict[str, Any]] = []
        #: why writing the record failed (the app FAILS once supervised)
        self.failure: Exception | None = None

    def __call__(self, files: list[LogFiles], started: list[Started]) -> FirstRecord:
        """Note the first attempts and write the record (spawner thread)."""
        del files  # the record names the log paths, not the files' identities
        app = self.app
        self.observed = now = time.time()
        app.prepare(started, now)
        if self.busy():
            return self
        self.written = True
        self.seq = app.dirty_seq
        self.snapshot = snapshot_app(app, [])
        journal = self.writer.journal
        if journal is not None:
            self.lines = journal.new_app_lines(self.snapshot, observed=now)
        failures = self.writer.write_here([app.record_job()], self.lines)
        if failures:
            self.failure = failures[0][1]
        return self

    def adopt(self) -> None:
        """In the loop, once the app is supervised: the record is on disk, or
        the writer is told to write it."""
        if not self.written:
            self.app.record_changed()
            return
        journal = self.writer.journal
        if journal is not None and self.snapshot is not None:
            journal.remember(self.snapshot, observed=self.observed)
        self.writer.wrote([(self.app, self.seq)], bool(self.lines))
        if self.failure is not None:
            self.app.record_failed(self.failure)

    def undo(self) -> None:
        """The submit is undone (blocking): no pointer leads to the app, and
        journal readers that saw it submitted see it forgotten."""
        app = self.app
        if app.state_dir is not None:
            remove_pointer(app.state_dir, app.session, app.app_id)
        journal = self.writer.journal
        if journal is None or not self.lines or self.snapshot is None:
            return
        differ = SnapshotDiffer()
        differ.update(self.snapshot, observed=self.observed)
        gone = differ.forget(app.app_id, observed=time.time())
        if gone is not None:
            journal.write([event_line(gone)])


@contextlib.contextmanager
def _exit_foreseen(app: LocalApp, replica: Replica, now: float) -> Iterator[None]:
    """Inside the ``with``: ``app`` as a plain exit 0 of ``replica`` (its
    last one) at ``now`` leaves it; put back after. No await inside: nobody
    else sees these fields."""
    saved = (
        replica.state,
        replica.exit_code,
        replica.attempts[-1],
        app.state,
        app.last_updated,
    )
    replica.attempts[-1] = {**saved[2], "exit_code": 0, "finished": now}
    replica.state = AppState.SUCCEEDED
    replica.exit_code = 0
    app.state = rollup_state((r.state for r in app.replicas), app.decided())
    app.last_updated = now
    try:
        yield
    finally:
        (
            replica.state,
            replica.exit_code,
            replica.attempts[-1],
            app.state,
            app.last_updated,
        ) = saved


class FinalRecords:
    """Makes :class:`FinalRecord`\\ s: what a :class:`LocalApp` calls as its
    ``final(app, replica, now)``."""

    __slots__ = ("writer",)

    def __init__(self, writer: RecordWriter) -> None:
        self.writer = writer

    def __call__(self, app: LocalApp, replica: Replica, now: float) -> FinalRecord:
        with _exit_foreseen(app, replica, now):
            record = app_record(app)
            success = success_file(app)
            snapshot = snapshot_app(app, [])
        record["finished"] = True
        journal = self.writer.journal
        lines = journal.preview(snapshot, observed=now) if journal is not None else []
        job = (app.record_path, record, app.app_dir, success, None)
        return FinalRecord(app, self.writer, job, lines)


class FinalRecord:
    """The final record, ``SUCCESS`` and journal lines of an app whose last
    replica exited 0, made in the loop for the plain outcome: an
    ``ExitWrite`` the exit-facts hop writes when the facts are plain."""

    __slots__ = ("app", "failure", "job", "lines", "writer", "written")

    def __init__(
        self,
        app: LocalApp,
        writer: RecordWriter,
        job: RecordJob,
        lines: list[dict[str, Any]],
    ) -> None:
        self.app = app
        self.writer = writer
        self.job = job
        self.lines = lines
        self.written = False
        self.failure: Exception | None = None

    def adopt(self) -> bool:
        """In the loop, once the exit was handled: True (the writer and the
        journal told) when the app's record is the one written."""
        app = self.app
        if not app.finished.is_set() or app_record(app) != self.job[1]:
            return False
        self.writer.wrote([(app, app.dirty_seq)], bool(self.lines))
        journal = self.writer.journal
        if journal is not None:
            journal.forget(app.app_id)  # over: nothing more to journal
        if self.failure is not None:
            app.record_failed(self.failure)
        return True
