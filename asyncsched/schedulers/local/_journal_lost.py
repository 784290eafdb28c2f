"""Apps whose supervisor died: their end goes into the journal once.

An app whose supervising process was killed never journals its end: its
replicas went down with it (the guardian), and other processes read it as
FAILED (``NODE_FAILURE``) from its record. The first reader that starts after
that finds the record (not finished, its supervisor gone) and journals the
app's end itself, once: a ``LOST_JOURNALED`` marker file in the app dir
(created ``O_EXCL``) settles which process does.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import replace
from typing import Any

from asyncsched.schedulers.kit import EventKind, SnapshotDiffer
from asyncsched.schedulers.local import _remote as remote
from asyncsched.schedulers.local._journal import JournalFile
from asyncsched.schedulers.local._journal_writer import event_line
from asyncsched.schedulers.shared.state_dir import PRIVATE_FILE_MODE
from asyncsched.specs import is_terminal

__all__ = ("LOST_MARKER", "journal_lost")

LOST_MARKER = "LOST_JOURNALED"


def _claim(app_dir: str) -> bool:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        os.close(os.open(os.path.join(app_dir, LOST_MARKER), flags, PRIVATE_FILE_MODE))
    except OSError:  # claimed already (or the dir is gone): not ours to journal
        return False
    return True


def journal_lost(journal: JournalFile, found: list[tuple[str, dict[str, Any]]]) -> int:
    """Journal the end of each app in ``found`` (records of other processes)
    whose supervisor died before it finished (blocking); how many."""
    lines = []
    now = time.time()
    for _, record in found:
        if record.get("finished") or remote.supervisor_alive(record):
            continue
        snapshot = remote.snapshot_record(record)
        if not is_terminal(snapshot.state) or not _claim(str(record["app_dir"])):
            continue
        [draft] = SnapshotDiffer().update(snapshot, observed=now)
        lines.append(event_line(replace(draft, kind=EventKind.APP)))
    if lines:
        with contextlib.suppress(OSError):  # the append marks its own gap
            journal.append(lines)
    return len(lines)
