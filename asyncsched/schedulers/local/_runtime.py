"""What a local scheduler runs beside its apps, and the order it stops in.

Started at the first submit (or remote cancel): the guardian process, the
spawner threads and its dispatcher, the record writer, the reaper, the state dir's own
folders and one pass of the retention policy. Closing stops the apps first
(SIGTERM, SIGKILL after the grace), then the writer (a record still owed is
written once more), the host's tasks, the spawner and the guardian.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Sequence

import anyio

from asyncsched.schedulers.kit import TaskHost
from asyncsched.schedulers.local import _remote as remote
from asyncsched.schedulers.local._app_writes import FinalRecords
from asyncsched.schedulers.local._capacity import LOG_FILES_KEPT_OPEN
from asyncsched.schedulers.local._exit_batch import ExitFactsReader
from asyncsched.schedulers.local._faults import LocalFaults
from asyncsched.schedulers.local._journal import journal_dir
from asyncsched.schedulers.local._journal_writer import EventJournal, JournalBounds
from asyncsched.schedulers.local._local_app import LocalApp
from asyncsched.schedulers.local._open_files import OpenFiles
from asyncsched.schedulers.local._process import (
    Guardian,
    PdeathsigMode,
    resolve_pdeathsig,
)
from asyncsched.schedulers.local._reaper import Reaper
from asyncsched.schedulers.local._record_writer import RecordWriter
from asyncsched.schedulers.local._retention import (
    Retention,
    automatic,
    prune as prune_apps,
)
from asyncsched.schedulers.local._snapshot import snapshot_app
from asyncsched.schedulers.local._spawn import SpawnConfig
from asyncsched.schedulers.local._spawner import Spawner
from asyncsched.schedulers.shared.state_dir import makedirs_private, tighten_dir

__all__ = ("LocalRuntime", "stop_apps")

logger = logging.getLogger(__name__)

#: how long SIGKILLed replicas may take to be reaped when closing
_KILL_WAIT = 10.0


class LocalRuntime:
    """The host tasks, processes and threads one local scheduler shares.

    Args:
        session_name: The scheduler's session (names the host and threads).
        state_dir: The state dir (its folders are created at start).
        pdeathsig: How replicas get the parent-death signal.
        retention: Applied once at start; None never prunes.
        faults: The fault seam (hooks for tests).
        journal_bounds: The session's event journal bounds.
    """

    def __init__(
        self,
        session_name: str,
        state_dir: str,
        *,
        pdeathsig: PdeathsigMode,
        retention: Retention | None,
        faults: LocalFaults,
        journal_bounds: JournalBounds | None = None,
    ) -> None:
        self.host = TaskHost(f"LocalScheduler({session_name!r})")
        #: the session's event journal (written with the records)
        self.journal = EventJournal(
            journal_dir(state_dir, session_name),
            journal_bounds,
            before_write=faults.before_journal,
        )
        self.writer = RecordWriter(
            before_write=faults.before_record,
            journal=self.journal,
            on_mark=self._journal_change,
        )
        #: reads the reply files and cancel markers of exits, a batch per hop
        self.exits = ExitFactsReader(write=self.writer.write_here)
        #: an app's final record, written by the hop of its last exit
        self.final = FinalRecords(self.writer)
        self.spawner = Spawner(
            f"asyncsched-spawner-{session_name}", before_dispatch=faults.before_dispatch
        )
        #: one task serving every replica's exit and output
        self.reaper = Reaper(faults.before_reaper_turn)
        #: the log files the replicas' writes keep open (bounded, shared)
        self.log_files = OpenFiles(LOG_FILES_KEPT_OPEN)
        #: set once started
        self.spawn_cfg: SpawnConfig | None = None
        self._state_dir = state_dir
        self._pdeathsig: PdeathsigMode = pdeathsig
        self._retention = retention
        self._faults = faults
        self._lock: anyio.Lock | None = None
        self._remote_cancels: list[anyio.Event] = []

    def _journal_change(self, app: LocalApp) -> None:
        journal = self.journal
        over = app.finished.is_set()
        if over and not journal.knows(app.app_id):
            return  # journaled to its end already
        journal.changed(snapshot_app(app, []), observed=time.time())
        if over:  # nothing changes any more: its last state is not kept
            journal.forget(app.app_id)

    async def start(self, check_state_dir: Callable[[], None]) -> SpawnConfig:
        """Start everything once (later calls return at once).

        ``check_state_dir`` (blocking, run in a worker thread) refuses an
        unsafe state dir before anything starts.
        """
        if self.spawn_cfg is not None:
            return self.spawn_cfg
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            await self.host.group()
            if self.spawn_cfg is None:
                await anyio.to_thread.run_sync(check_state_dir)
                setpriv, use_preexec = await resolve_pdeathsig(self._pdeathsig)
                guardian = Guardian()
                guardian.start()
                devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
                self.spawner.start()
                # host-level loops: restarted (and logged) should they raise
                await self.host.start_service(
                    self.spawner.dispatch, name="local:spawner"
                )
                await self.host.start_service(self.writer.run, name="local:records")
                self.reaper.set_spawner(self.host.spawn)
                await self.host.start_service(self.reaper.run, name="local:reaper")
                self.spawn_cfg = SpawnConfig(
                    setpriv,
                    use_preexec,
                    devnull,
                    guardian,
                    self.spawner,
                    self._faults.before_spawn,
                    self.reaper,
                )
                await anyio.to_thread.run_sync(_private_state_dirs, self._state_dir)
                if self._retention is not None:
                    await self._prune(self._retention)
        return self.spawn_cfg

    async def _prune(self, retention: Retention) -> None:
        """Apply the retention policy once; a failure is logged, never raised."""
        try:
            report = await anyio.to_thread.run_sync(
                prune_apps, self._state_dir, automatic(retention)
            )
        except OSError as exc:
            logger.warning("could not prune %s: %s", self._state_dir, exc)
            return
        if report.removed:
            logger.info("pruned %d finished apps", len(report.removed))
        for path in report.unreadable:
            logger.warning("skipped an unreadable app record: %s", path)

    def escalate_remote(self, app_dir: str, cancel_grace: float) -> None:
        """SIGKILL the replicas of a remotely cancelled app after the grace,
        should its supervisor not stop them (a host task; closing waits)."""
        done = anyio.Event()
        self._remote_cancels.append(done)
        self.host.spawn(
            self._escalate_remote, app_dir, cancel_grace, done, name="local:cancel"
        )

    async def _escalate_remote(
        self, app_dir: str, cancel_grace: float, done: anyio.Event
    ) -> None:
        try:
            await remote.escalate_remote(app_dir, cancel_grace)
        except Exception:
            logger.exception("escalating the cancel of %s failed", app_dir)
        finally:
            done.set()

    async def aclose(self, apps: Sequence[LocalApp], cancel_grace: float) -> None:
        """Stop everything, once ``apps`` (all this scheduler had) were stopped.

        A record of ``apps`` that the writer still owes is written once more.
        """
        if self._remote_cancels:
            with anyio.move_on_after(cancel_grace + 1):
                for done in self._remote_cancels:
                    await done.wait()
        await self.writer.aclose()
        with contextlib.suppress(Exception):
            await self.writer.write([a for a in apps if a.record_stale])
        await self.host.aclose()
        self.reaper.close()
        self.log_files.close()
        await self.spawner.aclose()
        if self.spawn_cfg is not None:
            await self.spawn_cfg.guardian.aclose()
            os.close(self.spawn_cfg.devnull)
        self.journal.close()


async def stop_apps(apps: Sequence[LocalApp], close_grace: float) -> None:
    """SIGTERM every replica of ``apps``, SIGKILL those left after the grace,
    and wait (bounded) until every app has finished."""
    for app in apps:
        app.begin_close()
    with anyio.move_on_after(close_grace):
        for app in apps:
            await app.finished.wait()
    for app in apps:
        app.kill_all()
    with anyio.move_on_after(_KILL_WAIT):
        for app in apps:
            await app.finished.wait()


def _private_state_dirs(state_dir: str) -> None:
    """Create (or, from older versions, tighten) the state dir's own folders
    ``0700`` (blocking; best effort: a failure shows at the first submit)."""
    try:
        makedirs_private(state_dir)
    except OSError as exc:
        logger.warning("cannot create the state dir %s: %s", state_dir, exc)
        return
    for sub in ("local", "logs", "events"):
        tighten_dir(os.path.join(state_dir, sub))
