"""The CLI's JSON shapes: one format everywhere, states always as names.

``status --json``::

    {"handle": "...", "state": "FAILED", "reason": "OOM_KILLED",
     "num_restarts": 0, "msg": "", "structured_error_msg": "<NONE>", "url": null,
     "roles": [{"role": "trainer", "replicas": [
         {"id": 0, "role": "trainer", "state": "FAILED", "hostname": "localhost",
          "exit_code": 137, "reason": "OOM_KILLED", "message": "...",
          "pid": 1234, "num_restarts": 0, "structured_error_msg": "<NONE>"}]}]}

``reason`` is a :class:`~asyncsched.specs.StatusReason` name or null.

``list --json``: ``[{"app_handle": ..., "app_id": ..., "name": ..., "state": "SUCCEEDED"}]``.

Example:
    >>> from asyncsched.specs import AppState, AppStatus
    >>> status_json("local_cwd://s/a", AppStatus(AppState.RUNNING))["state"]
    'RUNNING'
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from asyncsched.schedulers.api import ListAppResponse
from asyncsched.specs import AppStatus, ReplicaStatus

__all__ = ["list_json", "replica_json", "status_json"]


def replica_json(replica: ReplicaStatus) -> dict[str, Any]:
    """One replica, its state by name."""
    return {
        "id": replica.id,
        "role": replica.role,
        "state": replica.state.name,
        "hostname": replica.hostname,
        "exit_code": replica.exit_code,
        "reason": replica.reason.value if replica.reason else None,
        "message": replica.message,
        "pid": replica.pid,
        "num_restarts": replica.num_restarts,
        "structured_error_msg": replica.structured_error_msg,
    }


def status_json(
    handle: str, status: AppStatus, roles: list[str] | None = None
) -> dict[str, Any]:
    """An app's status; ``roles`` keeps only the named roles."""
    kept = [r for r in status.roles if roles is None or r.role in roles]
    return {
        "handle": handle,
        "state": status.state.name,
        "reason": status.reason.value if status.reason else None,
        "num_restarts": status.num_restarts,
        "msg": status.msg,
        "structured_error_msg": status.structured_error_msg,
        "url": status.ui_url,
        "roles": [
            {"role": r.role, "replicas": [replica_json(x) for x in r.replicas]}
            for r in kept
        ],
    }


def list_json(apps: Iterable[ListAppResponse]) -> list[dict[str, Any]]:
    """Rows of ``list``."""
    return [
        {
            "app_handle": a.app_handle,
            "app_id": a.app_id,
            "name": a.name,
            "state": a.state.name,
        }
        for a in apps
    ]
