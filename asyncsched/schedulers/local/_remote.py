"""Apps supervised by another process, seen through their on-disk records.

A replica the record shows as running whose process is gone (or whose pid now
belongs to a process with another start time) while the supervisor is dead is
reported FAILED: its supervisor died before it could record an exit code.

A record this version cannot use (an unknown state, a replica id that is not
an integer: written by a newer asyncsched, or edited by hand) is found by
:func:`record_problem`: ``list`` skips it, and the app's own ``describe``,
``log_iter`` and ``cancel`` raise a :class:`~asyncsched.errors.SchedulerError`
that says what is wrong and where.

Example:
    >>> replica_gone({"pid": None, "start_time": None})
    True
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import anyio

from asyncsched.errors import SchedulerError
from asyncsched.schedulers.kit import AppSnapshot, ReplicaSnapshot
from asyncsched.schedulers.local._process import (
    own_groups,
    pid_alive,
    signal_recorded_group,
)
from asyncsched.schedulers.local._reasons import replica_outcome
from asyncsched.schedulers.local._records import (
    CANCEL_MARKER,
    RECORD_NAME,
    read_json,
    write_json_atomic,
)
from asyncsched.specs import (
    NONE,
    AppState,
    Role,
    StatusReason,
    is_terminal,
    role_from_dict,
)

__all__ = [
    "cancel_remote",
    "check_record",
    "load_record",
    "record_done",
    "record_problem",
    "record_state",
    "replica_gone",
    "snapshot_record",
    "supervisor_alive",
]

_STATES = frozenset(AppState.__members__)
#: why a recorded pid <= 1 is refused rather than signalled
_PID_TRAP = "(<= 1: signalling it would reach every process, or the caller's own group)"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _replica_problem(where: str, r: object) -> str | None:
    if not isinstance(r, dict):
        return f"{where} is not an object"
    if not _is_int(r.get("replica_id")):
        return f"{where}.replica_id is not an integer: {r.get('replica_id')!r}"
    if r.get("state") not in _STATES:
        return f"{where}.state is not a known state: {r.get('state')!r}"
    for key in ("pid", "exit_code", "start_time", "num_restarts"):
        value = r.get(key)
        if value is not None and not _is_int(value):
            return f"{where}.{key} is not an integer: {value!r}"
    if r.get("pid") is not None and r["pid"] <= 1:
        return f"{where}.pid is not a process id: {r['pid']} {_PID_TRAP}"
    if not isinstance(r.get("log_dir"), str):
        return f"{where}.log_dir is not a path: {r.get('log_dir')!r}"
    return None


def record_problem(record: dict[str, Any]) -> str | None:
    """What makes ``record`` unusable by this version, or None when it is fine."""
    if not isinstance(record.get("app_id"), str):
        return f"app_id is not a string: {record.get('app_id')!r}"
    if not isinstance(record.get("app_dir"), str):
        return f"app_dir is not a path: {record.get('app_dir')!r}"
    state = record.get("state", "UNKNOWN")
    if state not in _STATES:
        return f"state is not a known state: {state!r}"
    if not _is_int(record.get("num_restarts", 0)):
        return f"num_restarts is not an integer: {record.get('num_restarts')!r}"
    for key in ("supervisor", "role_specs"):
        if not isinstance(record.get(key) or {}, dict):
            return f"{key} is not an object: {record.get(key)!r}"
    sup_pid = (record.get("supervisor") or {}).get("pid")
    if sup_pid is not None and not _is_int(sup_pid):
        return f"supervisor.pid is not an integer: {sup_pid!r}"
    if sup_pid is not None and sup_pid <= 1:
        return f"supervisor.pid is not a process id: {sup_pid} {_PID_TRAP}"
    roles = record.get("roles") or {}
    if not isinstance(roles, dict):
        return f"roles is not an object: {roles!r}"
    for name, reps in roles.items():
        if not isinstance(reps, list):
            return f"roles.{name} is not a list: {reps!r}"
        for i, r in enumerate(reps):
            problem = _replica_problem(f"roles.{name}[{i}]", r)
            if problem is not None:
                return problem
    return None


def check_record(record: dict[str, Any]) -> None:
    """Raise unless this version can use ``record``.

    Raises:
        SchedulerError: names the record file and the field that is wrong.
    """
    problem = record_problem(record)
    if problem is not None:
        raise SchedulerError(
            f"the record {record_path(record)} of app"
            f" {record.get('app_id', '?')} cannot be read by this asyncsched"
            f" version: {problem} (written by a newer version, or edited?)"
        )


def load_record(app_dir: str) -> dict[str, Any] | None:
    """Read ``<app_dir>/app.json`` (blocking)."""
    return read_json(os.path.join(app_dir, RECORD_NAME))


def supervisor_alive(record: dict[str, Any]) -> bool:
    """True while the process that supervises the app runs."""
    sup = record.get("supervisor") or {}
    pid = sup.get("pid")
    return isinstance(pid, int) and pid_alive(pid, sup.get("start_time"))


def replica_gone(replica: dict[str, Any]) -> bool:
    """True when the replica's recorded process no longer runs."""
    pid = replica.get("pid")
    return not isinstance(pid, int) or not pid_alive(pid, replica.get("start_time"))


def _effective(
    record: dict[str, Any],
) -> tuple[AppState, str, dict[str, list[dict[str, Any]]]]:
    state = AppState[record.get("state", "UNKNOWN")]
    msg = str(record.get("msg", NONE))
    roles: dict[str, list[dict[str, Any]]] = {
        name: [dict(r) for r in reps]
        for name, reps in (record.get("roles") or {}).items()
    }
    if record.get("finished") or supervisor_alive(record):
        return state, msg, roles
    sup_pid = (record.get("supervisor") or {}).get("pid")
    lost = False
    # replicas of a cancelled app that went down with their supervisor were
    # being stopped anyway: they stay CANCELLED; the others FAILED
    ended = AppState.CANCELLED if state == AppState.CANCELLED else AppState.FAILED
    for reps in roles.values():
        for r in reps:
            running = r.get("exit_code") is None and not is_terminal(
                AppState[r["state"]]
            )
            if running and replica_gone(r):
                r["state"] = ended.name
                r["lost"] = True
                lost = True
    if lost and not is_terminal(state):
        state = AppState.FAILED
        msg = (
            f"the supervisor (pid {sup_pid}) died before the app finished;"
            " its replicas were stopped with it"
        )
    return state, msg, roles


def record_state(record: dict[str, Any]) -> AppState:
    """The app state a (checked) record stands for (see :func:`snapshot_record`)."""
    return _effective(record)[0]


def snapshot_record(
    record: dict[str, Any],
    *,
    hostname: str | None = None,
    roles: list[Role] | None = None,
    app_failed: bool | None = None,
) -> AppSnapshot:
    """The app a checked record (:func:`check_record`) describes (the recorded
    terminal state is decided).

    ``hostname``, ``roles`` and ``app_failed`` (whether a replica failed for
    good, which words a CANCELLED replica gets) replace what the record says
    when the caller knows better (an app this process supervised).
    """
    state, msg, replicas_by_role = _effective(record)
    if hostname is None:
        hostname = str((record.get("supervisor") or {}).get("hostname", "localhost"))
    if app_failed is None:
        app_failed = state == AppState.FAILED
    replicas = []
    for name, reps in replicas_by_role.items():
        for r in reps:
            replica_state = AppState[r["state"]]
            code, reason, message = replica_outcome(
                replica_state,
                r.get("exit_code"),
                app_failed=app_failed,
                app_msg=msg,
                limit=_limit_of(r),
                lost=replica_state == AppState.FAILED and bool(r.get("lost")),
            )
            replicas.append(
                ReplicaSnapshot(
                    name,
                    int(r["replica_id"]),
                    replica_state,
                    exit_code=code,
                    hostname=hostname,
                    num_restarts=int(r.get("num_restarts", 0)),
                    pid=r.get("pid"),
                    structured_error_msg=str(r.get("structured_error_msg", NONE)),
                    reason=reason,
                    message=message,
                )
            )
    return AppSnapshot(
        str(record["app_id"]),
        replicas,
        name=str(record.get("name", "")),
        decided=state if is_terminal(state) else None,
        msg=msg,
        num_restarts=int(record.get("num_restarts", 0)),
        structured_error_msg=str(record.get("structured_error_msg", NONE)),
        ui_url=f"file://{record.get('app_dir', '')}",
        roles=roles
        if roles is not None
        else [
            role_from_dict(spec, record_path(record), f"role_specs.{name}")
            for name, spec in (record.get("role_specs") or {}).items()
        ],
        native=record,
    )


def _limit_of(replica: dict[str, Any]) -> tuple[StatusReason, str] | None:
    """The limit that ended a recorded replica (see ``Replica.limit_reason``)."""
    try:
        reason = StatusReason(str(replica.get("limit_reason")))
    except ValueError:  # None (no limit hit), or written by another version
        return None
    return reason, str(replica.get("limit_message") or "")


def record_path(record: dict[str, Any]) -> str:
    """The record file of ``record`` (for error messages)."""
    return os.path.join(str(record.get("app_dir", "")), RECORD_NAME)


def record_done(record: dict[str, Any] | None) -> bool:
    """True when no more log data will come for the app of ``record``."""
    if record is None or record.get("finished") or record_problem(record):
        return True
    if supervisor_alive(record):
        return False
    return all(
        r.get("exit_code") is not None or replica_gone(r)
        for reps in (record.get("roles") or {}).values()
        for r in reps
    )


def _live_replicas(record: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``(role, replica)`` of each replica of a checked record without an exit code."""
    return [
        (name, r)
        for name, reps in (record.get("roles") or {}).items()
        for r in reps
        if r.get("exit_code") is None and isinstance(r.get("pid"), int)
    ]


def _refuse_own_group(record: dict[str, Any]) -> None:
    """Raise when a replica the record names is this process or its group/session."""
    own = own_groups()
    for name, r in _live_replicas(record):
        if r["pid"] in own:
            raise SchedulerError(
                f"refusing to cancel {record.get('app_id')}: the record"
                f" {record_path(record)} names replica {name}/{r['replica_id']}"
                f" as pid {r['pid']}, the pid, process group or session of this"
                f" process (pid {os.getpid()}); nothing was signalled. Cancel the"
                " app from a process outside it."
            )


def _signal_replicas(record: dict[str, Any], sig: int) -> int:
    """Signal each replica group whose leader is verified (see ``leads_own_group``)."""
    sent = 0
    for _, r in _live_replicas(record):
        sent += signal_recorded_group(r["pid"], r.get("start_time"), sig)
    return sent


def cancel_remote(app_dir: str) -> dict[str, Any] | None:
    """Cancel an app another process supervises (blocking; no waiting).

    Writes the cancel marker (so the supervisor records CANCELLED), then
    SIGTERMs each live replica group after checking that its leader is the
    recorded process (same start time, leading its own session and group).
    With no live supervisor the groups get SIGKILL and the record is updated
    here. Returns the record read, or None.

    Raises:
        SchedulerError: a replica the record names is this process's pid,
            process group or session (nothing is signalled).
    """
    record = load_record(app_dir)
    if record is None or record_problem(record) is not None:
        return None
    if is_terminal(AppState[record.get("state", "UNKNOWN")]):
        return record
    _refuse_own_group(record)
    write_json_atomic(os.path.join(app_dir, CANCEL_MARKER), {"requested": time.time()})
    if supervisor_alive(record):
        _signal_replicas(record, signal.SIGTERM)
        return record
    _signal_replicas(record, signal.SIGKILL)
    record["state"] = AppState.CANCELLED.name
    record["msg"] = "cancelled (the supervisor was gone)"
    record["last_updated"] = time.time()
    for reps in (record.get("roles") or {}).values():
        for r in reps:
            if r.get("exit_code") is None:
                r["state"] = AppState.CANCELLED.name
    record["finished"] = True
    write_json_atomic(os.path.join(app_dir, RECORD_NAME), record)
    return record


def _remote_done(app_dir: str) -> bool:
    """True when the app's record is gone or says no more output will come (blocking)."""
    record = load_record(app_dir)
    return record_done(record)


def _kill_remote(app_dir: str) -> None:
    """SIGKILL every live replica group of the app's record (blocking)."""
    record = load_record(app_dir)
    if record is not None and record_problem(record) is None:
        _signal_replicas(record, signal.SIGKILL)


async def escalate_remote(app_dir: str, grace: float) -> None:
    """After ``grace`` seconds, SIGKILL the groups of a remotely cancelled app.

    The record reads and the ``/proc`` checks run in a worker thread.
    """
    deadline = anyio.current_time() + grace
    while anyio.current_time() < deadline:
        if await anyio.to_thread.run_sync(_remote_done, app_dir):
            return
        await anyio.sleep(min(0.1, max(0.0, deadline - anyio.current_time())))
    await anyio.to_thread.run_sync(_kill_remote, app_dir)
