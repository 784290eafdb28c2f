"""The apps a local scheduler knows: those it supervises, and those on record.

In memory it keeps at most about ``cache_size`` apps: beyond it the oldest
terminal app leaves memory (its record stays on disk, where describe, wait,
log_iter and list read it back). An evicted app whose replicas are still in
their SIGTERM grace is kept aside as *draining* until it has finished, so that
closing the scheduler still stops it. Apps of other processes (and evicted
ones) are read from the state dir, off the event loop.

An app that has finished and whose final record is on disk is kept compact
(:data:`~asyncsched.schedulers.local._snapshot.FinishedApp`: its record as
text, which the garbage collector does not track) instead of as a
:class:`LocalApp`: describe, wait, list and log_iter read it without a disk
read, and a sweep of thousands of apps leaves full collections little to walk.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio

from asyncsched.schedulers.kit import AppSnapshot
from asyncsched.schedulers.local import _records as records, _remote as remote
from asyncsched.schedulers.local._local_app import LocalApp
from asyncsched.schedulers.local._snapshot import (
    FinishedApp,
    compact,
    snapshot_finished,
)
from asyncsched.schedulers.shared.coalesce import Coalescer
from asyncsched.schedulers.shared.state_dir import check_state_dir
from asyncsched.specs import AppDef, Role

__all__ = ("AppTable",)

logger = logging.getLogger(__name__)


class AppTable:
    """The apps of one scheduler's session, in memory and on record."""

    def __init__(self, cache_size: int, state_dir: str, session: str) -> None:
        #: how many apps stay in memory (terminal ones beyond it are evicted)
        self.cache_size = cache_size
        self.state_dir = state_dir
        self.session = session
        #: the apps supervised here and kept in memory, by id, until they
        #: have finished and their final record is on disk
        self.apps: dict[str, LocalApp] = {}
        #: then kept compact, oldest first (at most about ``cache_size`` in all)
        self.finished: dict[str, FinishedApp] = {}
        #: submits holding a place (validated, not yet supervised)
        self.reserved = 0
        # ids of the apps that became terminal, oldest first (eviction order)
        self._done_order: dict[str, None] = {}
        self._app_defs: dict[str, AppDef | None] = {}
        # evicted apps whose replicas are still in their SIGTERM grace
        self._draining: list[LocalApp] = []
        self._state_dir_checked = False
        self._record_reader = Coalescer(self._fetch_records)

    # -- in memory -------------------------------------------------------------------

    def add(self, app: LocalApp, app_def: AppDef | None) -> None:
        """Keep ``app`` (just supervised) and the AppDef it was submitted as."""
        self.apps[app.app_id] = app
        self._app_defs[app.app_id] = app_def

    def knows(self, app_id: str) -> bool:
        """True when ``app_id`` is in memory (supervised, or finished and compact)."""
        return app_id in self.apps or app_id in self.finished

    def known(self) -> set[str]:
        """The ids of the apps in memory."""
        return set(self.apps).union(self.finished)

    def settle(self, app: LocalApp) -> None:
        """Keep ``app`` compact if it has finished and its record is on disk."""
        if (
            app.finished.is_set()
            and not app.record_stale
            and self.apps.get(app.app_id) is app
        ):
            del self.apps[app.app_id]
            self._done_order.pop(app.app_id, None)
            self.finished[app.app_id] = compact(app)

    def settle_all(self) -> None:
        """:meth:`settle` every terminal app in memory (few: the others are
        compact already)."""
        for app_id in list(self._done_order):
            app = self.apps.get(app_id)
            if app is None:
                del self._done_order[app_id]
            else:
                self.settle(app)

    def snapshot_finished(self, app_id: str) -> AppSnapshot | None:
        """The compact app ``app_id`` described, or None when it is not one."""
        finished = self.finished.get(app_id)
        if finished is None:
            return None
        return snapshot_finished(finished, self.roles(app_id))

    def roles(self, app_id: str) -> list[Role]:
        """The roles ``app_id`` was submitted with (empty when unknown)."""
        app_def = self._app_defs.get(app_id)
        return list(app_def.roles) if app_def is not None else []

    def app_done(self, app_id: str) -> None:
        """``app_id`` became terminal: it may now be evicted."""
        self._done_order[app_id] = None

    def evict_if_needed(self) -> None:
        """Make room for one more app: evict terminal apps, oldest first."""
        self.settle_all()
        # reserved places count too, so concurrent submits cannot overfill
        while len(self.apps) + len(self.finished) + self.reserved >= self.cache_size:
            # Only memory is given up: the app's pointer and record stay, so
            # describe/wait/log_iter/list read it back from the state dir.
            if self.finished:  # the oldest compact app: finished, on disk
                app_id = next(iter(self.finished))
                del self.finished[app_id]
                self._app_defs.pop(app_id, None)
                continue
            oldest = self._oldest_evictable()
            if oldest is None:
                # running apps stay: their number is bounded by the replica
                # slots (max_running_replicas), never refused here
                return
            del self.apps[oldest.app_id]
            self._done_order.pop(oldest.app_id, None)
            if not oldest.finished.is_set() or oldest.record_stale:
                # survivors may still be in their grace: the app keeps reaping
                # them and writing its record until finished; aclose still
                # stops them and writes a record the writer still owes
                self._draining = [
                    a
                    for a in self._draining
                    if not a.finished.is_set() or a.record_stale
                ]
                self._draining.append(oldest)
            self._app_defs.pop(oldest.app_id, None)

    def _oldest_evictable(self) -> LocalApp | None:
        """The app to give up memory for: the oldest finished one whose record
        is on disk, else the oldest finished, else the oldest done one; None
        if all run. Only terminal apps are looked at (at most about
        ``cache_size`` of them, usually one), never the running ones."""
        gone = []
        finished = done = None
        for app_id in self._done_order:
            app = self.apps.get(app_id)
            if app is None:
                gone.append(app_id)
                continue
            done = done or app
            if app.finished.is_set():
                finished = finished or app
                if not app.record_stale:
                    finished = app
                    break
        for app_id in gone:
            del self._done_order[app_id]
        return finished or done

    def take_for_close(self) -> tuple[list[LocalApp], list[LocalApp]]:
        """For closing: the apps to stop (in memory, or still draining), and
        the finished evicted ones whose record may still be owed."""
        apps = list(self.apps.values())
        apps.extend(a for a in self._draining if not a.finished.is_set())
        owed = [a for a in self._draining if a.finished.is_set()]
        self._draining.clear()
        return apps, owed

    # -- on record (other processes, evicted apps) -----------------------------------

    def check_state_dir(self) -> None:
        """(worker thread) Refuse a state dir others own or may write to
        (:func:`check_state_dir`); once it passed, not checked again."""
        if not self._state_dir_checked:
            self._state_dir_checked = check_state_dir(self.state_dir)

    async def record_of(self, app_id: str) -> dict[str, Any] | None:
        """The usable record of ``app_id``, or None when there is none.

        Raises:
            SchedulerError: the record exists but this version cannot use it.
        """
        # concurrent reads (a fan-out checking thousands of finished apps)
        # share one worker-thread hop: the hop costs more than the read
        record = (await self._record_reader.get([app_id]))[app_id]
        if record is None or record.get("app_id") != app_id:
            return None
        remote.check_record(record)  # a record this version cannot use: say so
        return record

    def listed(self, known: set[str]) -> list[tuple[str, dict[str, Any]]]:
        """(worker thread) The session's usable records not in ``known``.

        A record that cannot be read or used (truncated, a newer version's,
        edited) is skipped with a warning; dead pointers are pruned.
        """
        self.check_state_dir()
        found = []
        for pointer in records.list_pointers(self.state_dir, self.session, prune=True):
            app_id = str(pointer.get("app_id"))
            if app_id in known:
                continue
            record = remote.load_record(str(pointer["app_dir"]))
            if record is None:  # being written for the first time, or damaged
                logger.warning("skipping app %s: its record cannot be read", app_id)
                continue
            problem = remote.record_problem(record)
            if problem is not None:  # a newer version's, or edited: never fatal
                logger.warning(
                    "skipping app %s: its record %s cannot be used: %s",
                    app_id,
                    remote.record_path(record),
                    problem,
                )
                continue
            found.append((app_id, record))
        return found

    async def _fetch_records(
        self, app_ids: frozenset[str]
    ) -> dict[str, dict[str, Any]]:
        return await anyio.to_thread.run_sync(self._read_records, app_ids)

    def _read_records(self, app_ids: frozenset[str]) -> dict[str, dict[str, Any]]:
        """(worker thread) The records of ``app_ids`` that exist."""
        self.check_state_dir()
        found = {}
        for app_id in app_ids:
            record = self._read_record(app_id)
            if record is not None:
                found[app_id] = record
        return found

    def _read_record(self, app_id: str) -> dict[str, Any] | None:
        """(worker thread) The app's pointer, then its record."""
        pointer = records.find_pointer(self.state_dir, self.session, app_id)
        if pointer is None:
            return None
        return remote.load_record(str(pointer["app_dir"]))
