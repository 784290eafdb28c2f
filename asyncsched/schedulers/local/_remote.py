"""Apps supervised by another process, seen through their on-disk records.

A replica the record shows as running whose process is gone (or whose pid now
belongs to a process with another start time) while the supervisor is dead is
reported FAILED: its supervisor died before it could record an exit code.

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

from asyncsched.schedulers.local._process import pid_alive, signal_group
from asyncsched.schedulers.local._reasons import replica_outcome
from asyncsched.schedulers.local._records import (
    CANCEL_MARKER,
    RECORD_NAME,
    read_json,
    write_json_atomic,
)
from asyncsched.schedulers.snapshot import AppSnapshot, ReplicaSnapshot
from asyncsched.specs import (
    NONE,
    AppState,
    is_terminal,
    role_from_dict,
)

__all__ = [
    "cancel_remote",
    "load_record",
    "record_done",
    "replica_gone",
    "snapshot_record",
    "supervisor_alive",
]


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
    for reps in roles.values():
        for r in reps:
            running = r.get("exit_code") is None and not is_terminal(
                AppState[r["state"]]
            )
            if running and replica_gone(r):
                r["state"] = AppState.FAILED.name
                lost = True
    if lost and not is_terminal(state):
        state = AppState.FAILED
        msg = f"the supervisor (pid {sup_pid}) died before the app finished"
    return state, msg, roles


def snapshot_record(record: dict[str, Any]) -> AppSnapshot:
    """The app a record describes (the recorded terminal state is decided)."""
    state, msg, roles = _effective(record)
    hostname = str((record.get("supervisor") or {}).get("hostname", "localhost"))
    replicas = []
    for name, reps in roles.items():
        for r in reps:
            replica_state = AppState[r["state"]]
            code, reason, message = replica_outcome(
                replica_state,
                r.get("exit_code"),
                app_failed=state == AppState.FAILED,
                app_msg=msg,
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
        roles=[
            role_from_dict(spec, record_path(record), f"role_specs.{name}")
            for name, spec in (record.get("role_specs") or {}).items()
        ],
        native=record,
    )


def record_path(record: dict[str, Any]) -> str:
    """The record file of ``record`` (for error messages)."""
    return os.path.join(str(record.get("app_dir", "")), RECORD_NAME)


def record_done(record: dict[str, Any] | None) -> bool:
    """True when no more log data will come for the app of ``record``."""
    if record is None or record.get("finished"):
        return True
    if supervisor_alive(record):
        return False
    return all(
        r.get("exit_code") is not None or replica_gone(r)
        for reps in (record.get("roles") or {}).values()
        for r in reps
    )


def _signal_replicas(record: dict[str, Any], sig: int) -> int:
    sent = 0
    for reps in (record.get("roles") or {}).values():
        for r in reps:
            if r.get("exit_code") is None and not replica_gone(r):
                sent += signal_group(int(r["pid"]), sig)
    return sent


def cancel_remote(app_dir: str) -> dict[str, Any] | None:
    """Cancel an app another process supervises (blocking; no waiting).

    Writes the cancel marker (so the supervisor records CANCELLED), then
    SIGTERMs each live replica group after checking its pid's start time. With
    no live supervisor the groups get SIGKILL and the record is updated here.
    Returns the record read, or None.
    """
    record = load_record(app_dir)
    if record is None or is_terminal(AppState[record.get("state", "UNKNOWN")]):
        return record
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
    return record is None or record_done(record)


def _kill_remote(app_dir: str) -> None:
    """SIGKILL every live replica group of the app's record (blocking)."""
    record = load_record(app_dir)
    if record is not None:
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
