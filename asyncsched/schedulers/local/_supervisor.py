"""One running local app: its replicas, their attempts, state and record.

Everything here runs in the event-loop thread. Reaper tasks call back into the
app synchronously (``_on_exit``); the state machine, restarts and fail-fast
termination are plain method calls, so there is no polling and no queue.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from asyncsched.schedulers.kit import (
    ChangeNotifier,
    ChangeSignal,
    TaskHost,
    describe_error,
    failed_replica_message,
)
from asyncsched.schedulers.local._logs import ReplicaLog, pump
from asyncsched.schedulers.local._oom import out_of_memory
from asyncsched.schedulers.local._open_files import open_regular_file
from asyncsched.schedulers.local._process import (
    Child,
    Guardian,
    Spawner,
    pid_start_time,
)
from asyncsched.schedulers.local._reasons import shell_exit_code
from asyncsched.schedulers.local._records import (
    CANCEL_MARKER,
    RECORD_NAME,
    RECORD_VERSION,
    write_json_atomic,
    write_pointer,
)
from asyncsched.schedulers.local._state import (
    RetryAction,
    RetryCounters,
    decide_retry,
)
from asyncsched.schedulers.shared.state_dir import PRIVATE_FILE_MODE
from asyncsched.specs import (
    NONE,
    AppState,
    RetryPolicy,
    StatusReason,
    is_terminal,
    rollup_state,
)

__all__ = [
    "LocalApp",
    "RecordWriter",
    "Replica",
    "ReplicaLaunch",
    "RoleInfo",
    "SpawnConfig",
    "Started",
    "spawn_child",
    "supervisor_info",
]

logger = logging.getLogger(__name__)

#: after a replica's leader exits, how long its pipes may take to reach EOF
DRAIN_TIMEOUT = 2.0
#: how long a SIGKILLed leader may take to become a zombie and be reaped
REAP_TIMEOUT = 5.0
#: how long closing the record writer waits for the batch in flight
WRITER_CLOSE_TIMEOUT = 30.0


@dataclass
class SpawnConfig:
    """How replicas are spawned (shared by every app of a scheduler)."""

    setpriv: str | None
    use_preexec: bool
    devnull: int
    guardian: Guardian
    spawner: Spawner | None = None
    #: the scheduler's ``before_spawn`` hook: called with (role, replica id)
    #: before each replica process is started; what it raises fails that start
    before_spawn: Callable[[str, int], None] | None = None


@dataclass
class Started:
    """A replica process just spawned, with the read ends of its pipes."""

    child: Child
    out_r: int
    err_r: int


def spawn_child(launch: ReplicaLaunch, cfg: SpawnConfig) -> Started:
    """Spawn one attempt of ``launch`` and register it with the guardian.

    Thread-safe: runs in the spawner thread at submit, in the loop on restarts.
    The guardian registration follows the spawn at once (microseconds), so an
    owner killed right after still takes the group down.
    """
    if cfg.before_spawn is not None:
        cfg.before_spawn(launch.role, launch.replica_id)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        child = Child.spawn(
            launch.args,
            env=launch.env,
            cwd=launch.cwd,
            stdin=cfg.devnull,
            stdout=out_w,
            stderr=err_w,
            setpriv=cfg.setpriv,
            use_preexec=cfg.use_preexec,
        )
    except BaseException:
        for fd in (out_r, err_r):
            os.close(fd)
        raise
    finally:
        os.close(out_w)
        os.close(err_w)
    cfg.guardian.add(child.pid)
    return Started(child, out_r, err_r)


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


_RecordJob = tuple[
    str, dict[str, Any], str, dict[str, Any] | None, tuple[str, str, str] | None
]


class RecordWriter:
    """Write the records of every app of a scheduler from one task.

    Apps mark themselves dirty; the writer snapshots every dirty app (in the
    loop) and writes them all in ONE worker-thread hop, atomically each (temp
    file + rename), pointers after their records. Changes made while a batch
    is being written are coalesced into the next batch.
    """

    def __init__(self) -> None:
        self._dirty: dict[LocalApp, None] = {}
        self._wake: anyio.Event | None = None
        self._written = ChangeSignal()
        self._scope: anyio.CancelScope | None = None
        self._stopped: anyio.Event | None = None
        self.closed = False

    def mark(self, app: LocalApp) -> None:
        """``app`` changed: write its record soon."""
        if self.closed:
            return
        self._dirty[app] = None
        if self._wake is not None:
            self._wake.set()

    def discard(self, app: LocalApp) -> None:
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
                    if not self._dirty:
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

    async def write(self, apps: list[LocalApp]) -> None:
        """Write the records of ``apps`` now, in one worker-thread hop."""
        if not apps:
            return
        seqs = [app._dirty_seq for app in apps]
        jobs = [app._record_job() for app in apps]
        # Not on cancellation: cancelled before the thread ran, nothing was
        # written and the records stay stale (aclose writes those once more).
        # An error is not retried (waiters must not wait for it forever).
        written = False
        failures: list[tuple[int, Exception]] = []
        try:
            failures = await anyio.to_thread.run_sync(_write_records, jobs)
            written = True
        except Exception:
            written = True
            raise
        finally:
            if written:
                for app, seq in zip(apps, seqs, strict=True):
                    app._written_seq = max(app._written_seq, seq)
            self._written.notify()
        for i, exc in failures:  # one app's record failing fails that app only
            apps[i].record_failed(exc, closing=self.closed)

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


@dataclass
class RoleInfo:
    """What the supervisor needs of a role."""

    name: str
    num_replicas: int
    max_retries: int
    retry_policy: RetryPolicy
    spec: dict[str, Any]


@dataclass
class ReplicaLaunch:
    """Everything needed to (re)start one replica."""

    role: str
    replica_id: int
    args: list[str]
    env: dict[str, str]
    cwd: str | None
    log_dir: str
    error_file: str
    #: the memory limit the replica runs under (``resource.memMB``), or None
    memory_mb: int | None = None


@dataclass
class Replica:
    """Supervisor-side state of one replica across its attempts."""

    launch: ReplicaLaunch
    log: ReplicaLog
    state: AppState = AppState.PENDING
    child: Child | None = None
    exited: anyio.Event | None = None
    exit_code: int | None = None
    pid: int | None = None
    start_time: int | None = None
    num_restarts: int = 0
    restarting: bool = False
    structured_error: str = NONE
    error_mtime: float | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)
    #: why a limit ended the last attempt (OOM_KILLED, TIME_LIMIT), and how
    limit_reason: StatusReason | None = None
    limit_message: str = ""


@dataclass(frozen=True)
class ExitFacts:
    """What a replica's exit depends on in its files, read in a worker thread."""

    error_text: str | None = None
    error_mtime: float | None = None
    cancel_requested: bool = False


#: the most of a reply file (``TORCHELASTIC_ERROR_FILE``) copied into the record
MAX_REPLY_BYTES = 64 * 1024
#: an error file outside the replica dir counts when written this close to
#: (or after) the attempt's start (file-system timestamps are coarse)
_MTIME_SLACK = 1.0


def _read_reply(path: str, *, private: bool) -> tuple[str, float] | None:
    """The first :data:`MAX_REPLY_BYTES` of a regular file and its mtime (blocking).

    None when ``path`` is missing, a symlink (never followed), not a regular
    file (a FIFO would block, a device never end) or unreadable. With
    ``private`` the file is made ``0600`` (it sits among the replica's logs),
    unless it has other names: a hardlink the replica made to another file
    keeps that file's mode.
    """
    opened = open_regular_file(path)
    if opened is None:
        return None
    fd, st = opened
    try:
        if private and st.st_nlink == 1:
            with contextlib.suppress(OSError):
                os.fchmod(fd, PRIVATE_FILE_MODE)
        chunks: list[bytes] = []
        got = 0
        while got <= MAX_REPLY_BYTES:
            chunk = os.read(fd, MAX_REPLY_BYTES + 1 - got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    text = data[:MAX_REPLY_BYTES].decode("utf-8", errors="replace")
    if len(data) > MAX_REPLY_BYTES:
        note = (
            f"[truncated: {path} holds {st.st_size} bytes, the first"
            f" {MAX_REPLY_BYTES} are kept]"
        )
        return f"{text}\n{note}", st.st_mtime
    with contextlib.suppress(ValueError):
        text = json.dumps(json.loads(text), separators=(",", ":"))
    return text, st.st_mtime


def _in_dir(path: str, directory: str) -> bool:
    """True when ``path``'s own directory is ``directory`` (same inode)."""
    try:
        return os.path.samestat(
            os.stat(os.path.dirname(os.path.abspath(path))), os.stat(directory)
        )
    except OSError:
        return False


def read_exit_facts(
    error_file: str,
    replica_dir: str,
    app_dir: str,
    rc: int | None,
    attempt: int,
    started: float = 0.0,
) -> ExitFacts:
    """Read the reply file of a failed exit and whether another process asked
    for a cancel (blocking).

    At most :data:`MAX_REPLY_BYTES` are read, a symlink is never followed and
    only a regular file is read. A reply file in the replica's own dir is kept
    as ``<file>.<attempt>`` (the next attempt may write its own); one the
    replica was pointed elsewhere with ``TORCHELASTIC_ERROR_FILE`` is never
    moved nor deleted, and is only taken when written since the attempt
    started.
    """
    cancel = os.path.exists(os.path.join(app_dir, CANCEL_MARKER))
    if rc == 0:
        return ExitFacts(cancel_requested=cancel)
    own = _in_dir(error_file, replica_dir)
    reply = _read_reply(error_file, private=own)
    if reply is None:
        return ExitFacts(cancel_requested=cancel)
    text, mtime = reply
    if own:
        with contextlib.suppress(OSError):
            os.replace(error_file, f"{error_file}.{attempt}")
    elif mtime < started - _MTIME_SLACK:  # left over from before this attempt
        return ExitFacts(cancel_requested=cancel)
    return ExitFacts(text, mtime, cancel)


class LocalApp:
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
        state_dir: str | None = None,
        supervisor: dict[str, Any] | None = None,
        changes: ChangeNotifier | None = None,
        on_finished: Callable[[], None] | None = None,
        on_done: Callable[[], None] | None = None,
        time_limit: int | None = None,
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
        self._forgotten = False
        self._survivors_terminated = False
        self._dirty_seq = 0
        self._written_seq = 0
        self._supervisor = supervisor if supervisor is not None else supervisor_info()
        self._changes = changes if changes is not None else ChangeNotifier()
        #: called once, when every replica has exited and its logs are closed
        self._on_finished = on_finished
        #: called once, when the app becomes terminal
        self._on_done = on_done
        #: seconds the app may run (the ``time_limit`` run option), or None
        self.time_limit = time_limit
        #: set when the time limit stopped the app
        self.timed_out = False
        self._deadline = anyio.CancelScope()

    # -- start -------------------------------------------------------------------

    def start(self, started: list[Started]) -> None:
        """Supervise the first attempts (spawned by :func:`spawn_child`, in order)."""
        for replica, st in zip(self.replicas, started, strict=True):
            self._attach(replica, st)
        self.state = AppState.RUNNING
        if self.time_limit is not None:
            self._host.spawn(self._enforce_time_limit, name=f"deadline:{self.app_id}")
        self._mark_dirty()

    async def _enforce_time_limit(self) -> None:
        assert self.time_limit is not None
        with self._deadline:
            await anyio.sleep(self.time_limit)
            self._time_is_up()

    def _time_is_up(self) -> None:
        """The time limit has passed: stop every replica; those stopped FAIL
        with reason TIME_LIMIT (a cancel, or an app already over, wins)."""
        if self.cancelled or self.closing or is_terminal(self.state):
            return
        self.timed_out = True
        if not self.failed:
            self.msg = f"stopped at its time limit of {self.time_limit} s (time_limit)"
        self._restart_batch.clear()
        for r in self.replicas:
            r.restarting = False
            if r.child is None and not is_terminal(r.state):
                r.state = AppState.FAILED
                self._limit_hit(r, StatusReason.TIME_LIMIT)
        self._terminate_all(self.cancel_grace)
        self._after_change()

    def _limit_hit(self, replica: Replica, reason: StatusReason) -> None:
        replica.limit_reason = reason
        if reason == StatusReason.TIME_LIMIT:
            replica.limit_message = (
                f"stopped at the app's time limit of {self.time_limit} s (time_limit)"
            )
        else:
            replica.limit_message = (
                "ran out of memory under its limit of"
                f" {replica.launch.memory_mb} MB (resource.memMB, enforced as"
                " RLIMIT_DATA)"
            )

    def _spawn(self, replica: Replica) -> None:
        self._attach(replica, spawn_child(replica.launch, self._spawn_cfg))

    def _attach(self, replica: Replica, started: Started) -> None:
        launch = replica.launch
        child = started.child
        replica.child = child
        replica.exited = anyio.Event()
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
                "started": time.time(),
                "finished": None,
                "exit_code": None,
                "offsets": replica.log.offsets(),
            }
        )
        self._host.spawn(
            self._watch,
            replica,
            child,
            replica.exited,
            started.out_r,
            started.err_r,
            name=f"replica:{self.app_id}/{launch.role}/{launch.replica_id}",
            on_error=lambda exc: self._watch_failed(replica, child, exc),
        )

    # -- reaping -------------------------------------------------------------------

    async def _watch(
        self,
        replica: Replica,
        child: Child,
        exited: anyio.Event,
        out_r: int,
        err_r: int,
    ) -> None:
        rc: int | None = None
        error: Exception | None = None
        facts = ExitFacts()
        try:
            async with anyio.create_task_group() as pumps:
                pumps.start_soon(pump, out_r, replica.log, "stdout")
                pumps.start_soon(pump, err_r, replica.log, "stderr")
                clean = False
                try:
                    await child.wait_exit()
                    clean = True
                finally:
                    # bounded: at most REAP_TIMEOUT for the exit, as much to reap
                    with (
                        anyio.CancelScope(shield=True),
                        anyio.move_on_after(2 * REAP_TIMEOUT),
                    ):
                        if not clean:  # cancelled: the scheduler is going away
                            child.signal(signal.SIGKILL)
                            with anyio.move_on_after(REAP_TIMEOUT):
                                await child.wait_exit()
                        # the leader is a zombie: its group id cannot be reused yet
                        child.signal(signal.SIGKILL)
                        with anyio.move_on_after(REAP_TIMEOUT):
                            rc = await child.reap()
                        if rc is not None:
                            self._spawn_cfg.guardian.remove(child.pid)
                        # the files the exit depends on, read off the loop
                        facts = await anyio.to_thread.run_sync(
                            read_exit_facts,
                            replica.launch.error_file,
                            replica.launch.log_dir,
                            self.app_dir,
                            rc,
                            len(replica.attempts) - 1,
                            replica.attempts[-1]["started"],
                        )
                pumps.cancel_scope.deadline = anyio.current_time() + DRAIN_TIMEOUT
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
                        self._limit_hit(replica, StatusReason.OOM_KILLED)
        except Exception as exc:  # noqa: BLE001 - e.g. an unwritable log: fail the app
            error = exc
        finally:
            exited.set()
            self._on_exit(replica, child, rc, facts)
        if error is not None:
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

    def _watch_failed(self, replica: Replica, child: Child, exc: Exception) -> None:
        """The watcher of ``replica`` crashed: fail the app, never leak ``child``."""
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

    def fail_internal(self, what: str, exc: BaseException) -> None:
        """A task supervising this app failed: the app is FAILED, ``msg`` says why.

        The other replicas are terminated (as by fail-fast); other apps are
        not affected. A finished app keeps its final state.
        """
        if self.finished.is_set() or self.internal_error is not None:
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

    def _on_exit(
        self, replica: Replica, child: Child, rc: int | None, facts: ExitFacts
    ) -> None:
        if replica.child is not child:  # pragma: no cover - defensive
            return
        replica.child = None
        # one convention in memory, records, messages: a death by signal N
        # is 128 + N, as shells and container engines report it
        replica.exit_code = shell_exit_code(rc)
        attempt = replica.attempts[-1]
        attempt["exit_code"] = replica.exit_code
        attempt["finished"] = time.time()
        if rc != 0 and facts.error_text is not None:
            replica.structured_error = facts.error_text
            replica.error_mtime = facts.error_mtime
        if self.cancelled or self.closing:
            replica.state = AppState.SUCCEEDED if rc == 0 else AppState.CANCELLED
        elif self.timed_out:
            replica.state = AppState.SUCCEEDED if rc == 0 else AppState.FAILED
            if rc != 0:
                self._limit_hit(replica, StatusReason.TIME_LIMIT)
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
        self._after_change()

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

    def _after_change(self) -> None:
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
        self._update_state()

    def decided(self) -> AppState | None:
        """The outcome settled for the whole app: CANCELLED once cancelled,
        FAILED once a replica failed for good under fail-fast (or a
        supervising task failed); else None (the replicas decide)."""
        if self.cancelled:
            return AppState.CANCELLED
        if self.failed and (self.fail_fast or self.internal_error is not None):
            return AppState.FAILED
        return None

    def _update_state(self) -> None:
        self.state = rollup_state((r.state for r in self.replicas), self.decided())
        self.last_updated = time.time()
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
                self._deadline.cancel()
                for r in self.replicas:
                    r.log.close()
                self.finished.set()
                if self._on_finished is not None:
                    self._on_finished()
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
        if self.cancelled or self.finished.is_set():
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
    def record_path(self) -> str:
        return os.path.join(self.app_dir, RECORD_NAME)

    def _mark_dirty(self) -> None:
        self._dirty_seq += 1
        if not self._forgotten:
            self._writer.mark(self)

    async def settled(self) -> None:
        """Return once the record on disk reflects the state as of this call."""
        target = self._dirty_seq
        while self._written_seq < target and not (
            self._forgotten or self._writer.closed
        ):
            await self._writer.written().wait()

    @property
    def record_stale(self) -> bool:
        """True when the record on disk lags the state in memory."""
        return self._written_seq < self._dirty_seq

    def stop_flusher(self) -> None:
        """Stop writing the record (the app is forgotten)."""
        self._forgotten = True
        self._writer.discard(self)

    def structured_error(self) -> str:
        """The reply file of the replica that failed first, or ``NONE``."""
        failed = [r for r in self.replicas if r.error_mtime is not None]
        if not failed:
            return NONE
        return min(failed, key=lambda r: r.error_mtime or 0.0).structured_error

    def snapshot(self) -> dict[str, Any]:
        """The app record (JSON-ready)."""
        roles: dict[str, list[dict[str, Any]]] = {}
        for r in self.replicas:
            roles.setdefault(r.launch.role, []).append(
                {
                    "replica_id": r.launch.replica_id,
                    "state": r.state.name,
                    "pid": r.pid,
                    "start_time": r.start_time,
                    "exit_code": r.exit_code,
                    "num_restarts": r.num_restarts,
                    "structured_error_msg": r.structured_error,
                    "log_dir": r.launch.log_dir,
                    "error_file": r.launch.error_file,
                    "attempts": [dict(a) for a in r.attempts],
                    "limit_reason": r.limit_reason,
                    "limit_message": r.limit_message,
                }
            )
        return {
            "version": RECORD_VERSION,
            "scheduler": "local",
            "app_id": self.app_id,
            "name": self.name,
            "session": self.session,
            "app_dir": self.app_dir,
            "state": self.state.name,
            "msg": self.msg,
            "num_restarts": self.num_restarts,
            "structured_error_msg": self.structured_error(),
            "created": self.created,
            "last_updated": self.last_updated,
            "fail_fast": self.fail_fast,
            "finished": self.finished.is_set(),
            "supervisor": dict(self._supervisor),
            "roles": roles,
            "role_specs": {name: info.spec for name, info in self.roles.items()},
        }

    def success_file(self) -> dict[str, Any]:
        """TorchX's SUCCESS file content."""
        roles: dict[str, list[dict[str, Any]]] = {}
        for r in self.replicas:
            roles.setdefault(r.launch.role, []).append(
                {
                    "replica_id": r.launch.replica_id,
                    "pid": r.pid,
                    "exitcode": r.exit_code,
                    "stdout": r.log.paths["stdout"],
                    "stderr": r.log.paths["stderr"],
                    "error_file": r.launch.error_file
                    if r.error_mtime is not None
                    else "<N/A>",
                }
            )
        return {
            "app_id": self.app_id,
            "log_dir": self.app_dir,
            "final_state": self.state.name,
            "last_updated": self.last_updated,
            "roles": roles,
        }

    def _record_job(self) -> _RecordJob:
        pointer = None
        if not self._pointer_written and self._state_dir is not None:
            pointer = (self._state_dir, self.session, self.app_id)
            self._pointer_written = True
        success = self.success_file() if self.finished.is_set() else None
        return (self.record_path, self.snapshot(), self.app_dir, success, pointer)

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


def _write_records(jobs: list[_RecordJob]) -> list[tuple[int, Exception]]:
    """Write each job; return the failures (index, error): one never stops the rest."""
    failures: list[tuple[int, Exception]] = []
    for i, job in enumerate(jobs):
        try:
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
