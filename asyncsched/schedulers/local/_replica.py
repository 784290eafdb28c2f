"""One replica across its attempts, and how it reads in the app's files.

Example:
    >>> RoleInfo("worker", 2, 0, RetryPolicy.APPLICATION, {}).num_replicas
    2
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio

from asyncsched.schedulers.local._logs import ReplicaLog
from asyncsched.schedulers.local._process import Child
from asyncsched.schedulers.local._spawn import ReplicaLaunch
from asyncsched.specs import NONE, AppState, RetryPolicy, StatusReason

__all__ = (
    "Replica",
    "RoleInfo",
    "by_role",
    "limit_hit",
    "record_entry",
    "success_entry",
)


@dataclass
class RoleInfo:
    """What the supervisor needs of a role."""

    name: str
    num_replicas: int
    max_retries: int
    retry_policy: RetryPolicy
    spec: dict[str, Any]


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


def limit_hit(replica: Replica, reason: StatusReason, time_limit: int | None) -> None:
    """Note that a limit ended the replica's attempt: ``reason`` (TIME_LIMIT
    under the app's ``time_limit``, or OOM_KILLED) and a message saying which."""
    replica.limit_reason = reason
    if reason == StatusReason.TIME_LIMIT:
        replica.limit_message = (
            f"stopped at the app's time limit of {time_limit} s (time_limit)"
        )
    else:
        replica.limit_message = (
            "ran out of memory under its limit of"
            f" {replica.launch.memory_mb} MB (resource.memMB, enforced as"
            " RLIMIT_DATA)"
        )


def record_entry(r: Replica) -> dict[str, Any]:
    """The replica as the app record holds it (JSON-ready)."""
    return {
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


def success_entry(r: Replica) -> dict[str, Any]:
    """The replica as TorchX's SUCCESS file holds it."""
    return {
        "replica_id": r.launch.replica_id,
        "pid": r.pid,
        "exitcode": r.exit_code,
        "stdout": r.log.paths["stdout"],
        "stderr": r.log.paths["stderr"],
        "error_file": r.launch.error_file if r.error_mtime is not None else "<N/A>",
    }


def by_role(
    replicas: Iterable[Replica], entry: Callable[[Replica], dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """``entry`` of each replica, grouped by role name in replica order."""
    roles: dict[str, list[dict[str, Any]]] = {}
    for r in replicas:
        roles.setdefault(r.launch.role, []).append(entry(r))
    return roles
