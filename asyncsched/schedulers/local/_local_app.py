"""One running local app: its replicas, their attempts, state and record.

Everything here runs in the event-loop thread. The scheduler's reaper calls
back when a leader exits; a short task per exit reaps it, reads its exit facts
and lets its pipes drain (see ``_attempts``), then calls into the app
synchronously (``_on_exit``); the state machine, restarts and fail-fast
termination are plain method calls, so there is no polling and no queue.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import anyio

from asyncsched.schedulers.kit import (
    ChangeNotifier,
    TaskHost,
    describe_error,
    failed_replica_message,
)
from asyncsched.schedulers.local._app_record import (
    app_record,
    first_error,
    success_file,
)
from asyncsched.schedulers.local._attempts import AttemptEnd, ReplicaAttempts
from asyncsched.schedulers.local._exit_batch import ExitFactsReader, ExitWrite
from asyncsched.schedulers.local._exit_facts import ExitFacts
from asyncsched.schedulers.local._faults import LocalFaults
from asyncsched.schedulers.local._logs import ReplicaLog
from asyncsched.schedulers.local._process import Child
from asyncsched.schedulers.local._reaper import Reaper, Watch
from asyncsched.schedulers.local._reasons import shell_exit_code
from asyncsched.schedulers.local._record_writer import (
    RecordJob,
    RecordWriter,
    supervisor_info,
)
from asyncsched.schedulers.local._records import RECORD_NAME
from asyncsched.schedulers.local._replica import Replica, RoleInfo, limit_hit
from asyncsched.schedulers.local._spawn import SpawnConfig, Started
from asyncsched.schedulers.local._state import RetryAction, RetryCounters, decide_retry
from asyncsched.specs import (
    NONE,
    AppState,
    StatusReason,
    is_terminal,
    rollup_state,
)

__all__ = ("LocalApp",)

logger = logging.getLogger(__name__)


class LocalApp(ReplicaAttempts):
    """Supervise the replicas of one app (spawn, reap, retry, cancel, record)."""

    def __init__(
        self,
        *,
        app_id: str,
        name: str,
        session: str,
        app_dir: str,
        roles: list[RoleInfo],
        replicas: list[Replica],
        fail_fast: bool,
        cancel_grace: float,
        spawn: SpawnConfig,
        host: TaskHost,
        writer: RecordWriter,
        exits: ExitFactsReader | None = None,
        state_dir: str | None = None,
        supervisor: dict[str, Any] | None = None,
        changes: ChangeNotifier | None = None,
        on_finished: Callable[[], None] | None = None,
        on_done: Callable[[], None] | None = None,
        time_limit: int | None = None,
        faults: LocalFaults | None = None,
        final: Callable[[LocalApp, Replica, float], ExitWrite] | None = None,
    ) -> None:
        self.app_id = app_id
        self.name = name
        self.session = session
        self.app_dir = app_dir
        self.roles = {r.name: r for r in roles}
        self.replicas = replicas
        self.fail_fast = fail_fast
        self.cancel_grace = cancel_grace
        self._spawn_cfg = spawn
        assert spawn.reaper is not None, "the runtime starts the reaper first"
        self._reaper: Reaper = spawn.reaper
        self._host = host
        self._state_dir = state_dir
        self._pointer_written = False
        self.state = AppState.PENDING
        self.msg = NONE
        self.num_restarts = 0
        self.cancelled = False
        self.failed = False
        #: set when a supervising task of this app failed (the app is FAILED)
        self.internal_error: str | None = None
        self.closing = False
        self.created = time.time()
        self.last_updated = self.created
        self.done = anyio.Event()
        self.finished = anyio.Event()
        self._counters = RetryCounters()
        self._restart_batch: set[int] = set()  # indexes into self.replicas
        self._writer = writer
        self._exits = exits if exits is not None else ExitFactsReader()
        self._forgotten = False
        self._survivors_terminated = False
        self.dirty_seq = 0
        self.written_seq = 0
        #: who supervises the app (this process), as its record says
        self.supervisor = supervisor if supervisor is not None else supervisor_info()
        self._changes = changes if changes is not None else ChangeNotifier()
        #: called once, when every replica has exited and its logs are closed
        self._on_finished = on_finished
        #: called once, when the app becomes terminal
        self._on_done = on_done
        #: seconds the app may run (the ``time_limit`` run option), or None
        self.time_limit = time_limit
        #: set when the time limit stopped the app
        self.timed_out = False
        #: the time limit's scope, made only for an app that has one (few
        #: long-lived objects per app keep full garbage collections short)
        self._deadline: anyio.CancelScope | None = None
        self._faults = faults if faults is not None else LocalFaults()
        #: makes the final record of an exit that ends the app, for the plain
        #: outcome, to be written in the hop that reads the exit's facts
        self._final = final
        #: such a record is being written: the outcome is the exit's
        self._final_pending = False
        #: set once that exit is handled (see :meth:`exits_handled`)
        self._final_handled: anyio.Event | None = None
        #: the state being handled was written already: marks write nothing
        self._adopting = False

    # -- start -------------------------------------------------------------------

    def prepare(self, started: list[Started], now: float) -> None:
        """Note the first attempts (spawned by :func:`spawn_child`, in order):
        the app is RUNNING as of ``now``.

        Only data, no loop object: the spawn job runs it in the spawner
        thread, before anyone can see the app, and writes the record it makes
        (see ``_app_writes.FirstRecord``); :meth:`start` then supervises.
        """
        for replica, st in zip(self.replicas, started, strict=True):
            self._note_attempt(replica, st.child, now)
        self.state = AppState.RUNNING
        self.dirty_seq += 1

    def start(self, started: list[Started], logs: list[ReplicaLog]) -> None:
        """Supervise the first attempts noted by :meth:`prepare`, each replica
        writing its output to its log in ``logs`` (in order)."""
        for replica, st, log in zip(self.replicas, started, logs, strict=True):
            replica.log = log
            self._watch(replica, st)
        if self.time_limit is not None:
            self._host.spawn(self._enforce_time_limit, name=f"deadline:{self.app_id}")

    async def _enforce_time_limit(self) -> None:
        assert self.time_limit is not None
        if self.finished.is_set():
            return
        self._deadline = anyio.CancelScope()
        with self._deadline:
            await anyio.sleep(self.time_limit)
            self._time_is_up()

    def _time_is_up(self) -> None:
        """The time limit has passed: stop every replica; those stopped FAIL
        with reason TIME_LIMIT (a cancel, or an app already over, wins)."""
        if self.cancelled or self.closing or self._final_pending:
            return
        if is_terminal(self.state):
            return
        self.timed_out = True
        if not self.failed:
            self.msg = f"stopped at its time limit of {self.time_limit} s (time_limit)"
        self._restart_batch.clear()
        for r in self.replicas:
            r.restarting = False
            if r.child is None and not is_terminal(r.state):
                r.state = AppState.FAILED
                limit_hit(r, StatusReason.TIME_LIMIT, self.time_limit)
        self._terminate_all(self.cancel_grace)
        self._after_change()

    # -- supervision failures -----------------------------------------------------

    def _supervision_failed(self, replica: Replica, error: BaseException) -> None:
        launch = replica.launch
        logger.error(
            "%s: supervising replica %s/%s failed",
            self.app_id,
            launch.role,
            launch.replica_id,
            exc_info=error,
        )
        self.fail_internal(
            f"supervising replica {launch.role}/{launch.replica_id} failed", error
        )

    async def _fail_soon(self, replica: Replica, error: Exception) -> None:
        self._supervision_failed(replica, error)

    def _output_failed(self, replica: Replica, watch: Watch, error: Exception) -> None:
        """Saving the output of ``replica`` failed (that pipe is closed)."""
        self._supervision_failed(replica, error)

    def fail_internal(self, what: str, exc: BaseException) -> None:
        """A task supervising this app failed: the app is FAILED, ``msg`` says why.

        The other replicas are terminated (as by fail-fast); other apps are
        not affected. A finished app keeps its final state.
        """
        if self.finished.is_set() or self.internal_error is not None:
            return
        if self._final_pending:  # the last exit is being handled: it decides
            logger.error("%s: %s after its last exit: %s", self.app_id, what, exc)
            return
        text = f"{what}: {describe_error(exc)}"
        self.internal_error = text
        if not self.cancelled:
            self.failed = True
            self.msg = text
        self._restart_batch.clear()
        for r in self.replicas:
            r.restarting = False
            if r.child is None and not is_terminal(r.state):
                r.state = AppState.FAILED
        self._terminate_all(self.cancel_grace)
        self._update_state()

    def _on_exit(self, end: AttemptEnd) -> None:
        replica, plan = end.replica, end.plan
        if replica.child is not end.child:  # pragma: no cover - defensive
            return
        if plan is not None and plan.written:
            # the final record is on disk: the same change writes nothing more
            self._adopting = True
            try:
                self._exit_changes(replica, end.rc, end.facts, end.now)
            finally:
                self._adopting = False
            if not plan.adopt():  # pragma: no cover - defensive
                logger.warning("%s: its final record is written again", self.app_id)
                self._mark_dirty()
            return
        self._exit_changes(replica, end.rc, end.facts, end.now)

    def _exit_changes(
        self, replica: Replica, rc: int | None, facts: ExitFacts, now: float | None
    ) -> None:
        if self._faults.before_exit is not None:
            launch = replica.launch
            self._faults.before_exit(self.app_id, launch.role, launch.replica_id)
        replica.child = None
        # one convention in memory, records, messages: a death by signal N
        # is 128 + N, as shells and container engines report it
        replica.exit_code = shell_exit_code(rc)
        attempt = replica.attempts[-1]
        attempt["exit_code"] = replica.exit_code
        attempt["finished"] = time.time() if now is None else now
        if rc != 0 and facts.error_text is not None:
            replica.structured_error = facts.error_text
            replica.error_mtime = facts.error_mtime
        if self.cancelled or self.closing:
            replica.state = AppState.SUCCEEDED if rc == 0 else AppState.CANCELLED
        elif self.timed_out:
            replica.state = AppState.SUCCEEDED if rc == 0 else AppState.FAILED
            if rc != 0:
                limit_hit(replica, StatusReason.TIME_LIMIT, self.time_limit)
        elif replica.restarting:
            replica.state = AppState.PENDING
        elif self.failed and (self.fail_fast or self.internal_error is not None):
            replica.state = AppState.SUCCEEDED if rc == 0 else AppState.CANCELLED
        elif not is_terminal(self.state) and facts.cancel_requested:
            # cancelled by another process: checked before the exit code, since
            # a replica may well exit 0 on the SIGTERM of that cancel
            replica.state = AppState.SUCCEEDED if rc == 0 else AppState.CANCELLED
            self.cancel()
        elif rc == 0:
            replica.state = AppState.SUCCEEDED
        else:
            self._on_failure(replica)
        # the exit is a change of its own (its exit code is journaled even
        # when a restart replaces the attempt at once)
        self._mark_dirty()
        self._after_change(now)

    def _on_failure(self, replica: Replica) -> None:
        launch = replica.launch
        role = self.roles[launch.role]
        action = decide_retry(
            role.retry_policy,
            role.max_retries,
            self._counters,
            launch.role,
            launch.replica_id,
        )
        if action == RetryAction.FAIL:
            replica.state = AppState.FAILED
            if not self.failed and replica.limit_reason == StatusReason.OOM_KILLED:
                self.msg = (
                    f"replica {launch.role}/{launch.replica_id} ran out of memory"
                    f" under its limit of {launch.memory_mb} MB (resource.memMB)"
                )
            elif not self.failed:
                self.msg = failed_replica_message(
                    launch.role, launch.replica_id, replica.exit_code
                )
            self.failed = True
            if self.fail_fast:
                self._terminate_all(self.cancel_grace)
            return
        self.num_restarts += 1
        if action == RetryAction.RESTART_REPLICA:
            batch = [replica]
        elif action == RetryAction.RESTART_ROLE:
            batch = [r for r in self.replicas if r.launch.role == launch.role]
        else:
            batch = list(self.replicas)
        logger.info(
            "%s: restarting %d replica(s) (%s)", self.app_id, len(batch), action.value
        )
        for r in batch:
            self._restart_batch.add(self.replicas.index(r))
            r.state = AppState.PENDING
            if r.child is not None:
                r.restarting = True
                self._terminate(r, self.cancel_grace)

    def _after_change(self, now: float | None = None) -> None:
        if self._restart_batch and not (self.cancelled or self.closing or self.failed):
            batch = [self.replicas[i] for i in sorted(self._restart_batch)]
            if all(r.child is None for r in batch):
                self._restart_batch.clear()
                for r in batch:
                    r.restarting = False
                    r.num_restarts += 1
                    try:
                        self._spawn(r)
                    except OSError as exc:
                        r.state = AppState.FAILED
                        self.failed = True
                        self.msg = f"restarting {r.launch.role}/{r.launch.replica_id} failed: {exc}"
                        if self.fail_fast:
                            self._terminate_all(self.cancel_grace)
        elif self._restart_batch and all(
            self.replicas[i].child is None for i in self._restart_batch
        ):
            for i in self._restart_batch:
                r = self.replicas[i]
                r.restarting = False
                if not is_terminal(r.state):
                    r.state = AppState.CANCELLED
            self._restart_batch.clear()
        self._update_state(now)

    def decided(self) -> AppState | None:
        """The outcome settled for the whole app: CANCELLED once cancelled,
        FAILED once a replica failed for good under fail-fast (or a
        supervising task failed); else None (the replicas decide)."""
        if self.cancelled:
            return AppState.CANCELLED
        if self.failed and (self.fail_fast or self.internal_error is not None):
            return AppState.FAILED
        return None

    def _update_state(self, now: float | None = None) -> None:
        self.state = rollup_state((r.state for r in self.replicas), self.decided())
        self.last_updated = time.time() if now is None else now
        self._changes.notify(self.app_id)
        if is_terminal(self.state):
            if not self.done.is_set():
                self.done.set()
                if self._on_done is not None:
                    self._on_done()
            if (
                all(r.child is None for r in self.replicas)
                and not self.finished.is_set()
            ):
                if self._deadline is not None:
                    self._deadline.cancel()
                for r in self.replicas:
                    r.log.close()
                    r.exited = None  # set, and nobody waits any more
                self.finished.set()
                # both set for good: one event serves both (fewer objects
                # per finished app for full collections to walk)
                self.done = self.finished
                on_finished = self._on_finished
                self._on_finished = self._on_done = None
                if on_finished is not None:
                    on_finished()
        self._mark_dirty()

    # -- stopping -------------------------------------------------------------------

    def _terminate(self, replica: Replica, grace: float) -> None:
        child, exited = replica.child, replica.exited
        if child is None or exited is None:
            return
        child.signal(signal.SIGTERM)
        self._host.spawn(
            self._escalate, child, exited, grace, name=f"escalate:{self.app_id}"
        )

    async def _escalate(self, child: Child, exited: anyio.Event, grace: float) -> None:
        with anyio.move_on_after(grace):
            await exited.wait()
        child.signal(signal.SIGKILL)

    def _terminate_all(self, grace: float) -> None:
        for r in self.replicas:
            if r.child is not None:
                self._terminate(r, grace)

    def cancel(self) -> None:
        """Cancel: CANCELLED now, SIGTERM every group, SIGKILL after the grace.

        A terminal state never changes: cancelling an app that already
        SUCCEEDED or FAILED (whose other replicas may still be in their
        SIGTERM grace) only makes sure those survivors are terminated.
        """
        if self.cancelled or self.finished.is_set() or self._final_pending:
            return
        if is_terminal(self.state):
            if not self._survivors_terminated:
                self._survivors_terminated = True
                self._terminate_all(self.cancel_grace)
            return
        self.cancelled = True
        if not is_terminal(self.state):
            self.msg = "cancelled"
        for r in self.replicas:
            if r.child is None and not is_terminal(r.state):
                r.state = AppState.CANCELLED
        self._terminate_all(self.cancel_grace)
        self._after_change()

    def begin_close(self) -> None:
        """The scheduler is closing: stop everything (SIGTERM now)."""
        if self._final_pending:  # its last exit is being handled: nothing runs
            return
        self.closing = True
        if self.finished.is_set() and all(is_terminal(r.state) for r in self.replicas):
            return  # nothing runs, nothing changes: keep the record as it is
        if not is_terminal(self.state):
            self.cancelled = True
            self.msg = "the scheduler was closed"
        for r in self.replicas:
            if r.child is None and not is_terminal(r.state):
                r.state = AppState.CANCELLED
            if r.child is not None:
                r.child.signal(signal.SIGTERM)
        self._after_change()

    def kill_all(self) -> None:
        """SIGKILL every group still alive."""
        for r in self.replicas:
            if r.child is not None:
                r.child.signal(signal.SIGKILL)

    # -- record ----------------------------------------------------------------------

    @property
    def state_dir(self) -> str | None:
        """The state dir the app's pointer is written in (None: none)."""
        return self._state_dir

    @property
    def record_path(self) -> str:
        return os.path.join(self.app_dir, RECORD_NAME)

    def record_changed(self) -> None:
        """The state changed outside the usual transitions (the first attempts
        noted by :meth:`prepare`, which counted the change): have the record
        written."""
        if not self._forgotten:
            self._writer.mark(self)

    def _mark_dirty(self) -> None:
        self.dirty_seq += 1
        if not self._forgotten and not self._adopting:
            self._writer.mark(self)

    async def settled(self) -> None:
        """Return once the record on disk reflects the state as of this call."""
        target = self.dirty_seq
        while self.written_seq < target and not (
            self._forgotten or self._writer.closed
        ):
            await self._writer.written().wait()

    @property
    def record_stale(self) -> bool:
        """True when the record on disk lags the state in memory."""
        return self.written_seq < self.dirty_seq

    def stop_flusher(self) -> None:
        """Stop writing the record (the app is forgotten)."""
        self._forgotten = True
        self._writer.discard(self)

    def structured_error(self) -> str:
        """The reply file of the replica that failed first, or ``NONE``."""
        return first_error(self.replicas)

    def record_job(self) -> RecordJob:
        pointer = None
        if not self._pointer_written and self._state_dir is not None:
            pointer = (self._state_dir, self.session, self.app_id)
            self._pointer_written = True
        success = success_file(self) if self.finished.is_set() else None
        return (self.record_path, app_record(self), self.app_dir, success, pointer)

    def record_failed(self, exc: Exception, *, closing: bool = False) -> None:
        """Writing this app's record failed: the app is FAILED (``msg`` says why).

        Other processes could no longer follow the app, so it is not left
        running half-visible. While closing (the temporary log dir may already
        be gone) or once finished, the error is only logged.
        """
        if closing or self.closing or self.finished.is_set():
            logger.debug("cannot write the record of %s: %s", self.app_id, exc)
            return
        logger.error("writing the record of %s failed", self.app_id, exc_info=exc)
        self.fail_internal(f"writing the app record {self.record_path!r} failed", exc)

    async def flush(self) -> None:
        """Write the record now (and SUCCESS once finished), off the loop."""
        await self._writer.write([self])
