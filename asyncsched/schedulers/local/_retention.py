"""Retention of finished local apps: records and logs stay until pruned.

Without a ``log_dir`` run option, local apps write their logs and records under
``<state_dir>/logs`` (see :func:`managed_logs_dir`), so a finished app stays
inspectable (``status``, ``describe``, ``log``, ``list``) from any process
after the one that ran it exits. :func:`prune` forgets finished apps beyond a
:class:`Retention` policy (count and age). It is safe beside concurrent
writers and other prunes: it only touches apps whose record says they are
finished, removes the pointer before the files, and treats a file that is
already gone as removed. A record that cannot be read is reported, never
removed and never fatal.

Example:
    >>> Retention().max_apps, Retention().max_age_days
    (100, 14.0)
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import time
from dataclasses import dataclass, field, replace
from typing import Any

from asyncsched.errors import InvalidArgumentError
from asyncsched.schedulers.local._journal import JournalFile, journal_dir
from asyncsched.schedulers.local._records import RECORD_NAME, read_json
from asyncsched.schedulers.local._remote import supervisor_alive
from asyncsched.schedulers.shared.state_dir import check_state_dir

__all__ = [
    "AUTOMATIC_MIN_AGE_SECONDS",
    "PruneReport",
    "Retention",
    "automatic",
    "managed_logs_dir",
    "prune",
]

_DAY = 86400.0


#: Automatic retention never removes an app that finished less than this ago.
AUTOMATIC_MIN_AGE_SECONDS = 3600.0


@dataclass(frozen=True)
class Retention:
    """Which finished local apps are kept: the newest ``max_apps`` that are at
    most ``max_age_days`` old. ``None`` disables a bound.

    Whatever those bounds say, an app that finished less than
    ``min_age_seconds`` ago is kept, and with ``keep_live`` so is every app
    whose supervising process (an open scheduler, in any process) still runs.
    The retention a scheduler applies by itself always sets both
    (:func:`automatic`); an explicit ``asyncsched prune`` sets neither.

    Raises:
        InvalidArgumentError: a negative, non-finite (``nan``, ``inf``) or
            non-numeric bound.
    """

    max_apps: int | None = 100
    max_age_days: float | None = 14.0
    min_age_seconds: float = 0.0
    keep_live: bool = False

    def __post_init__(self) -> None:
        keep: object = self.max_apps  # any object: callers may pass anything
        if keep is not None and (
            not isinstance(keep, int) or isinstance(keep, bool) or keep < 0
        ):
            raise InvalidArgumentError(f"max_apps must be an int >= 0, got {keep!r}")
        days: object = self.max_age_days
        if days is not None and (
            not isinstance(days, int | float)
            or isinstance(days, bool)
            or not math.isfinite(days)
            or days < 0
        ):
            raise InvalidArgumentError(
                f"max_age_days must be a finite number >= 0 (None: no age limit),"
                f" got {days!r}"
            )
        if not 0 <= self.min_age_seconds < math.inf:
            raise InvalidArgumentError(
                f"min_age_seconds must be a number >= 0, got {self.min_age_seconds}"
            )


def automatic(retention: Retention) -> Retention:
    """``retention`` as a scheduler applies it by itself: recent and live apps stay.

    Example:
        >>> automatic(Retention(max_apps=1)).keep_live
        True
    """
    return replace(
        retention,
        min_age_seconds=max(retention.min_age_seconds, AUTOMATIC_MIN_AGE_SECONDS),
        keep_live=True,
    )


@dataclass
class PruneReport:
    """What :func:`prune` did (or, with ``dry_run``, would do)."""

    removed: list[str] = field(default_factory=list)
    kept: int = 0
    running: int = 0
    unreadable: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """Plain data (the CLI's ``--json``)."""
        return {
            "removed": self.removed,
            "kept": self.kept,
            "running": self.running,
            "unreadable": self.unreadable,
        }


def managed_logs_dir(state_dir: str) -> str:
    """Where local apps without a ``log_dir`` keep their logs and records."""
    return os.path.join(os.path.abspath(state_dir), "logs")


@dataclass
class _Entry:
    pointer: str
    app_id: str
    app_dir: str
    finished_at: float
    live: bool = False
    session: str = ""
    state: str = "UNKNOWN"


def prune(
    state_dir: str,
    retention: Retention,
    *,
    now: float | None = None,
    dry_run: bool = False,
) -> PruneReport:
    """Forget the finished apps of every session beyond ``retention`` (blocking).

    A pruned app loses its pointer (no process finds it any more); its app
    dir (logs and record) is deleted too when it lies in
    :func:`managed_logs_dir` -- a ``log_dir`` the user chose is never deleted.
    A pointer whose app dir is gone is removed as dangling.

    Raises:
        UnsafeStateDirError: the state dir is not private to this user
            (see :func:`~asyncsched.schedulers.shared.state_dir.check_state_dir`).
    """
    check_state_dir(state_dir)
    now = time.time() if now is None else now
    report = PruneReport()
    finished: list[_Entry] = []
    root = os.path.join(state_dir, "local")
    for session in _listdir(root):
        for name in _listdir(os.path.join(root, session)):
            if not name.endswith(".json") or name.startswith("."):
                continue
            path = os.path.join(root, session, name)
            entry = _entry(path, report)
            if entry is not None:
                finished.append(replace(entry, session=session))
    finished.sort(key=lambda e: e.finished_at, reverse=True)
    # real paths: a symlink planted in the logs dir never leads a delete out
    managed = os.path.realpath(managed_logs_dir(state_dir)) + os.sep
    forgotten: dict[str, list[dict[str, Any]]] = {}
    for rank, entry in enumerate(finished):
        too_many = retention.max_apps is not None and rank >= retention.max_apps
        too_old = (
            retention.max_age_days is not None
            and now - entry.finished_at > retention.max_age_days * _DAY
        )
        protected = now - entry.finished_at < retention.min_age_seconds or (
            retention.keep_live and entry.live
        )
        if protected or not (too_many or too_old):
            report.kept += 1
            continue
        report.removed.append(entry.app_id)
        if dry_run:
            continue
        with contextlib.suppress(FileNotFoundError):
            os.unlink(entry.pointer)
        if os.path.realpath(entry.app_dir).startswith(managed):
            shutil.rmtree(entry.app_dir, ignore_errors=True)
        forgotten.setdefault(entry.session, []).append(
            {"k": "forgotten", "a": entry.app_id, "st": entry.state, "t": now}
        )
    for session, lines in forgotten.items():
        _journal_forgotten(state_dir, session, lines)
    return report


def _journal_forgotten(
    state_dir: str, session: str, lines: list[dict[str, Any]]
) -> None:
    """Tell the session's event readers the pruned apps are gone (best effort:
    a failed append leaves a gap mark, so readers resync)."""
    with contextlib.suppress(OSError):
        JournalFile(journal_dir(state_dir, session)).append(lines)


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _entry(path: str, report: PruneReport) -> _Entry | None:
    """The pointer at ``path`` as a finished app; None (and noted) otherwise."""
    pointer = read_json(path)
    if pointer is None or not isinstance(pointer.get("app_dir"), str):
        if os.path.exists(path):  # not removed by a concurrent prune meanwhile
            report.unreadable.append(path)
        return None
    app_dir: str = pointer["app_dir"]
    app_id = str(pointer.get("app_id") or os.path.basename(path)[: -len(".json")])
    record_file = os.path.join(app_dir, RECORD_NAME)
    record = read_json(record_file)
    if record is None:
        if not os.path.exists(path):  # a concurrent prune removed the app
            return None
        if not os.path.exists(app_dir):  # the logs were deleted: dangling
            return _Entry(path, app_id, app_dir, finished_at=0.0)
        report.unreadable.append(record_file)
        return None
    if not record.get("finished"):
        report.running += 1
        return None
    last = record.get("last_updated")
    finished_at = float(last) if isinstance(last, int | float) else 0.0
    state = record.get("state")
    return _Entry(
        path,
        app_id,
        app_dir,
        finished_at,
        live=supervisor_alive(record),
        state=state if isinstance(state, str) else "UNKNOWN",
    )
