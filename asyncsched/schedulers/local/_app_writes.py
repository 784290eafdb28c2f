"""An app's record written by the worker-thread job it is in anyway.

Starting an app already costs a spawner-thread job (dirs, log files,
``fork``/``exec``); handing its first record to the record writer would cost a
second hop, one after the other, before ``submit`` may return. Instead the
spawn job itself writes the first record, the state-dir pointer and the app's
SUBMITTED journal line (through the writer's :meth:`RecordWriter.write_here`),
and the loop then takes them as written (:meth:`FirstRecord.adopt`).

Example:
    >>> FirstRecord.__slots__[:2]
    ('app', 'failure')
"""

from __future__ import annotations

import time
from typing import Any

from asyncsched.schedulers.kit import AppSnapshot, SnapshotDiffer
from asyncsched.schedulers.local._journal_writer import event_line
from asyncsched.schedulers.local._local_app import LocalApp
from asyncsched.schedulers.local._logs import LogFiles
from asyncsched.schedulers.local._record_writer import RecordWriter
from asyncsched.schedulers.local._records import remove_pointer
from asyncsched.schedulers.local._snapshot import snapshot_app
from asyncsched.schedulers.local._spawn import Started

__all__ = ("FirstRecord",)


class FirstRecord:
    """The first record of an app, written in its spawn job.

    Called in the spawner thread once every replica started, before anyone
    else can see the app (it is in no table and no replica is watched yet):
    the app's first attempts are noted (:meth:`LocalApp.prepare`) and its
    record, pointer and journal line written. :meth:`adopt` (in the loop)
    tells the writer and the journal; :meth:`undo` (blocking) takes them back
    when the submit is undone.
    """

    __slots__ = ("app", "failure", "lines", "observed", "seq", "snapshot", "writer")

    def __init__(self, app: LocalApp, writer: RecordWriter) -> None:
        self.app = app
        self.writer = writer
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
        """In the loop, once the app is supervised: the record is on disk."""
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
