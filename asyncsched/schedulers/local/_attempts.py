"""The attempts of a local app's replicas: started, watched, exited, reaped.

A mixin of :class:`~asyncsched.schedulers.local._local_app.LocalApp` (which
owns every attribute named below): an attempt is noted and handed to the
reaper; when its leader exits, a short task reaps it, lets its pipes drain
(bounded), reads its exit facts off the loop -- writing the app's final
record in the same hop when this exit ends the app as its code says -- and
hands the exit to the app's state machine (``_on_exit``). A crash of that
task fails the app without leaking the child.

Example:
    >>> REAP_TIMEOUT > DRAIN_TIMEOUT
    True
"""

from __future__ import annotations

import functools
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from asyncsched.schedulers.kit import TaskHost
from asyncsched.schedulers.local._exit_batch import ExitFactsReader, ExitWrite
from asyncsched.schedulers.local._exit_facts import ExitFacts
from asyncsched.schedulers.local._faults import LocalFaults
from asyncsched.schedulers.local._oom import out_of_memory
from asyncsched.schedulers.local._process import Child
from asyncsched.schedulers.local._reaper import Reaper, Watch
from asyncsched.schedulers.local._reasons import shell_exit_code
from asyncsched.schedulers.local._record_writer import RecordWriter
from asyncsched.schedulers.local._replica import Replica, limit_hit
from asyncsched.schedulers.local._spawn import SpawnConfig, Started, spawn_child
from asyncsched.specs import AppState, StatusReason, is_terminal

__all__ = ("DRAIN_TIMEOUT", "REAP_TIMEOUT", "AttemptEnd", "ReplicaAttempts")

#: after a replica's leader exits, how long its pipes may take to reach EOF
DRAIN_TIMEOUT = 2.0
#: how long a SIGKILLed leader may take to become a zombie and be reaped
REAP_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True)
class AttemptEnd:
    """How one attempt of ``replica`` ended, as its reaping task found it.

    ``rc`` is the leader's wait status code (None: not reaped in time),
    ``facts`` what its files say, ``now`` when it was handled, and ``plan``
    the final record written in the same hop, if this exit ended the app.
    """

    replica: Replica
    child: Child
    rc: int | None
    facts: ExitFacts
    now: float | None = None
    plan: ExitWrite | None = None


class ReplicaAttempts:
    """Start, watch and finish the attempts of an app's replicas (a mixin)."""

    # what the app owns (set by its ``__init__``)
    app_id: str
    app_dir: str
    replicas: list[Replica]
    time_limit: int | None
    cancelled: bool
    closing: bool
    timed_out: bool
    failed: bool
    dirty_seq: int
    written_seq: int
    _spawn_cfg: SpawnConfig
    _reaper: Reaper
    _host: TaskHost
    _exits: ExitFactsReader
    _writer: RecordWriter
    _faults: LocalFaults
    _final: Callable[[Any, Replica, float], ExitWrite] | None
    _final_pending: bool
    _final_handled: anyio.Event | None
    _forgotten: bool
    _pointer_written: bool
    _state_dir: str | None
    _restart_batch: set[int]

    # what the app does (defined by it; declared for type checking only, so
    # an app that lacked one would fail loudly instead of doing nothing)
    if TYPE_CHECKING:

        def _on_exit(self, end: AttemptEnd) -> None: ...

        def _supervision_failed(
            self, replica: Replica, error: BaseException
        ) -> None: ...

        async def _fail_soon(self, replica: Replica, error: Exception) -> None: ...

        def _output_failed(
            self, replica: Replica, watch: Watch, error: Exception
        ) -> None: ...

        def fail_internal(self, what: str, exc: BaseException) -> None: ...

    # -- starting -----------------------------------------------------------------

    def _spawn(self, replica: Replica) -> None:
        self._attach(replica, spawn_child(replica.launch, self._spawn_cfg))

    def _attach(self, replica: Replica, started: Started) -> None:
        self._note_attempt(replica, started.child, time.time())
        self._watch(replica, started)

    def _note_attempt(self, replica: Replica, child: Child, now: float) -> None:
        """An attempt of ``replica`` started at ``now`` (data only: any thread)."""
        replica.child = child
        replica.pid = child.pid
        replica.start_time = child.start_time
        replica.exit_code = None
        replica.state = AppState.RUNNING
        replica.limit_reason = None
        replica.limit_message = ""
        replica.attempts.append(
            {
                "attempt": len(replica.attempts),
                "pid": child.pid,
                "start_time": child.start_time,
                "started": now,
                "finished": None,
                "exit_code": None,
                "offsets": replica.log.offsets(),
            }
        )

    def _watch(self, replica: Replica, started: Started) -> None:
        """Have the reaper serve the exit and output of the attempt (loop)."""
        replica.exited = anyio.Event()
        pipes = {"stdout": started.out_r, "stderr": started.err_r}
        failure = self._check_logs(replica, pipes)
        self._reaper.watch(
            started.child,
            replica.log,
            pipes,
            functools.partial(self._leader_exited, replica),
            functools.partial(self._output_failed, replica),
        )
        if failure is not None:  # failed after this transition, not inside it
            self._host.spawn(
                self._fail_soon, replica, failure, name=f"log:{self.app_id}"
            )

    def _check_logs(self, replica: Replica, pipes: dict[str, int]) -> Exception | None:
        """The fault seam's ``before_log``: a stream it fails is closed unread."""
        before_log = self._faults.before_log
        if before_log is None:
            return None
        failure: Exception | None = None
        for stream, fd in list(pipes.items()):
            try:
                before_log(replica.log.paths[stream])
            except Exception as exc:  # noqa: BLE001 - fails the app, see _fail_soon
                os.close(fd)
                del pipes[stream]
                failure = failure or exc
        return failure

    # -- reaping -----------------------------------------------------------------

    def _leader_exited(self, replica: Replica, watch: Watch) -> None:
        """The reaper saw the leader of ``replica`` exit: finish the attempt."""
        launch = replica.launch
        self._host.spawn(
            self._finish,
            replica,
            watch,
            name=f"replica:{self.app_id}/{launch.role}/{launch.replica_id}",
            on_error=lambda exc: self._watch_failed(replica, watch, exc),
        )

    async def _finish(self, replica: Replica, watch: Watch) -> None:
        """Reap the exited leader, let its pipes drain (bounded), read its exit
        facts, then hand the exit to the state machine."""
        child, exited = watch.child, replica.exited
        rc: int | None = None
        error: Exception | None = None
        facts = ExitFacts()
        now: float | None = None
        plan: ExitWrite | None = None
        try:
            try:
                # bounded and shielded: the exit must be handled
                with (
                    anyio.CancelScope(shield=True),
                    anyio.move_on_after(REAP_TIMEOUT),
                ):
                    # the leader is a zombie: its group id cannot be reused yet
                    child.signal(signal.SIGKILL)
                    rc = await child.reap()
                if rc is not None:
                    self._spawn_cfg.guardian.remove(child.pid)
                with anyio.move_on_after(DRAIN_TIMEOUT):
                    await watch.wait_drained()
            finally:
                self._reaper.close_streams(watch)
            now = time.time()
            plan = self._plan_final(replica, rc, now)
            with anyio.CancelScope(shield=True), anyio.move_on_after(REAP_TIMEOUT):
                # the files the exit depends on, read off the loop with the
                # other exits due now, in one hop; the final record too when
                # this exit ends the app as its code says
                facts = await self._exits.read(
                    (
                        replica.launch.error_file,
                        replica.launch.log_dir,
                        self.app_dir,
                        rc,
                        len(replica.attempts) - 1,
                        replica.attempts[-1]["started"],
                    ),
                    plan,
                )
            if rc and replica.launch.memory_mb is not None:
                # read once the pipes are drained: the last words are in the log
                with (
                    anyio.CancelScope(shield=True),
                    anyio.move_on_after(REAP_TIMEOUT),
                ):
                    if await anyio.to_thread.run_sync(
                        out_of_memory,
                        replica.log.paths["stderr"],
                        replica.attempts[-1]["offsets"]["stderr"],
                    ):
                        limit_hit(replica, StatusReason.OOM_KILLED, self.time_limit)
        except Exception as exc:  # noqa: BLE001 - e.g. an unwritable log: fail the app
            error = exc
        finally:
            if exited is not None:
                exited.set()
            self._final_pending = False
            handled, self._final_handled = self._final_handled, None
            try:
                self._on_exit(AttemptEnd(replica, child, rc, facts, now, plan))
            finally:
                if handled is not None:
                    handled.set()
        if error is not None:
            self._supervision_failed(replica, error)

    def _plan_final(
        self, replica: Replica, rc: int | None, now: float
    ) -> ExitWrite | None:
        """The final record of this exit for the plain outcome, when the exit
        of ``replica`` with ``rc`` ends the app (its last replica, exit 0,
        nothing else going on) and the record on disk is current; else None.

        From here until the exit is handled the outcome is the exit's: a
        cancel, close, time limit or failure meanwhile finds the app over.
        """
        if (
            self._final is None
            or rc != 0
            or self._faults.before_exit is not None
            or self.cancelled
            or self.closing
            or self.timed_out
            or self.failed
            or self._restart_batch
            or replica.restarting
            or self._forgotten
            or self._writer.closed
            or self.written_seq != self.dirty_seq
            or not (self._pointer_written or self._state_dir is None)
            or any(
                r is not replica and (r.child is not None or not is_terminal(r.state))
                for r in self.replicas
            )
        ):
            return None
        self._final_pending = True
        self._final_handled = anyio.Event()
        return self._final(self, replica, now)

    async def exits_handled(self) -> None:
        """Return once an exit being handled now that ends the app is handled.

        Such an exit's final record and journal lines are written with its
        facts, in a worker thread, before the loop takes the new state: an
        event reader may see the app's end first. ``describe`` waits here, so
        what it says is never older than an event already delivered.
        """
        handled = self._final_handled
        if handled is not None:
            await handled.wait()

    def _watch_failed(self, replica: Replica, watch: Watch, exc: Exception) -> None:
        """Finishing ``replica``'s exit crashed: fail the app, never leak its child."""
        child = watch.child
        self._reaper.forget(watch)
        if replica.child is child:
            replica.child = None
            replica.exit_code = shell_exit_code(child.returncode)
            stopping = self.cancelled or self.closing
            replica.state = AppState.CANCELLED if stopping else AppState.FAILED
        if replica.exited is not None:
            replica.exited.set()
        if child.returncode is None:  # not reaped yet: kill and reap it aside
            child.signal(signal.SIGKILL)
            self._host.spawn(self._reap_lost, child, name=f"reap:{self.app_id}")
        launch = replica.launch
        self.fail_internal(
            f"supervising replica {launch.role}/{launch.replica_id} failed", exc
        )

    async def _reap_lost(self, child: Child) -> None:
        with anyio.move_on_after(REAP_TIMEOUT):
            await child.wait_exit()
        with anyio.move_on_after(REAP_TIMEOUT):
            await child.reap()
            self._spawn_cfg.guardian.remove(child.pid)
