"""The words every backend uses for a replica, or an app, that failed.

One shape on every backend:

* a failed replica's own message says how it ended, with no pod,
  container or job name in front: :func:`replica_exit_message`
  ("exited with code 3", "killed by SIGKILL (exit code 137)",
  "command not found (exit code 127)");
* the app's message names the replica that failed it and how:
  ``replica {role}/{k} {how}`` (:func:`failed_replica_message`; with the
  replica's own message, :func:`app_failure_message`, for the first failed
  replica in role and replica order).

Example:
    >>> failed_replica_message("trainer", 1, 3)
    'replica trainer/1 exited with code 3'
    >>> failed_replica_message("trainer", 0, None)
    'replica trainer/0 failed'
    >>> replica_exit_message(127)
    'command not found (exit code 127)'
"""

from __future__ import annotations

from collections.abc import Iterable

from asyncsched.schedulers.snapshot import ReplicaSnapshot
from asyncsched.specs import AppState, explain_exit_code

__all__ = ("app_failure_message", "failed_replica_message", "replica_exit_message")


def replica_exit_message(exit_code: int | None) -> str:
    """How a replica ended, from its exit code ("" for 0 or no code)."""
    return explain_exit_code(exit_code)[1] if exit_code is not None else ""


def failed_replica_message(role: str, replica_id: int, exit_code: int | None) -> str:
    """The app message naming the replica that failed it and its exit code."""
    return f"replica {role}/{replica_id} {replica_exit_message(exit_code) or 'failed'}"


def app_failure_message(replicas: Iterable[ReplicaSnapshot]) -> str:
    """The app message for the first FAILED replica ("" if none): its
    role and index, then its own message (how it ended: "ran out of
    memory...") or, without one, :func:`replica_exit_message`.

    Example:
        >>> app_failure_message([
        ...     ReplicaSnapshot("ok", 0, AppState.SUCCEEDED, exit_code=0),
        ...     ReplicaSnapshot("bad", 0, AppState.FAILED, exit_code=3),
        ... ])
        'replica bad/0 exited with code 3'
    """
    for r in replicas:
        if r.state == AppState.FAILED:
            how = r.message or replica_exit_message(r.exit_code) or "failed"
            return f"replica {r.role}/{r.id} {how}"
    return ""
