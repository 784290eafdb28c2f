"""The words every backend uses for an app that failed.

An app that failed because a replica did says which replica and how, in one
shape on every backend: ``replica {role}/{k} {how}``, where ``how`` is the
replica's own message (:func:`~asyncsched.specs.explain_exit_code`: "exited
with code 3", "killed by SIGKILL (exit code 137)"), or "failed" without an
exit code.

Example:
    >>> failed_replica_message("trainer", 1, 3)
    'replica trainer/1 exited with code 3'
    >>> failed_replica_message("trainer", 0, None)
    'replica trainer/0 failed'
"""

from __future__ import annotations

from asyncsched.specs import explain_exit_code

__all__ = ("failed_replica_message",)


def failed_replica_message(role: str, replica_id: int, exit_code: int | None) -> str:
    """The app message naming the replica that failed it and its exit code."""
    how = explain_exit_code(exit_code)[1] if exit_code is not None else ""
    return f"replica {role}/{replica_id} {how or 'failed'}"
