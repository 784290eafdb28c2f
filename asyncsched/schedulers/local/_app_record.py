"""What an app's files on disk hold: its record and TorchX's SUCCESS file.

Pure functions of an app's state (JSON-ready dicts): a
:class:`~asyncsched.schedulers.local._local_app.LocalApp`, as far as
:class:`RecordedApp` reads it. Writing them is the record writer's job.

Example:
    >>> first_error([])
    '<NONE>'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from asyncsched.schedulers.local._records import RECORD_VERSION
from asyncsched.schedulers.local._replica import (
    Replica,
    RoleInfo,
    by_role,
    record_entry,
    success_entry,
)
from asyncsched.specs import NONE, AppState

__all__ = ("RecordedApp", "app_record", "first_error", "success_file")


class _Flag(Protocol):
    def is_set(self) -> bool: ...


class RecordedApp(Protocol):
    """What the record and the SUCCESS file are made of (a ``LocalApp`` has it)."""

    app_id: str
    name: str
    session: str
    app_dir: str
    state: AppState
    msg: str
    num_restarts: int
    created: float
    last_updated: float
    fail_fast: bool
    supervisor: dict[str, Any]

    @property
    def replicas(self) -> Sequence[Replica]: ...
    @property
    def roles(self) -> Mapping[str, RoleInfo]: ...
    @property
    def finished(self) -> _Flag: ...


def first_error(replicas: Sequence[Replica]) -> str:
    """The reply file of the replica that failed first, or ``NONE``."""
    failed = [r for r in replicas if r.error_mtime is not None]
    if not failed:
        return NONE
    return min(failed, key=lambda r: r.error_mtime or 0.0).structured_error


def app_record(app: RecordedApp) -> dict[str, Any]:
    """The app record (JSON-ready)."""
    return {
        "version": RECORD_VERSION,
        "scheduler": "local",
        "app_id": app.app_id,
        "name": app.name,
        "session": app.session,
        "app_dir": app.app_dir,
        "state": app.state.name,
        "msg": app.msg,
        "num_restarts": app.num_restarts,
        "structured_error_msg": first_error(app.replicas),
        "created": app.created,
        "last_updated": app.last_updated,
        "fail_fast": app.fail_fast,
        "finished": app.finished.is_set(),
        "supervisor": dict(app.supervisor),
        "roles": by_role(app.replicas, record_entry),
        "role_specs": {name: info.spec for name, info in app.roles.items()},
    }


def success_file(app: RecordedApp) -> dict[str, Any]:
    """TorchX's SUCCESS file content."""
    return {
        "app_id": app.app_id,
        "log_dir": app.app_dir,
        "final_state": app.state.name,
        "last_updated": app.last_updated,
        "roles": by_role(app.replicas, success_entry),
    }
