"""What ``describe`` and ``list`` say of an app supervised in this process.

A running app is described from its :class:`LocalApp`. Once it has finished
and its final record is on disk, the app table keeps it as a
:class:`FinishedApp` instead: its record as JSON text and one flag, objects
the garbage collector does not track, so that thousands of finished apps cost
full collections nothing (a ``LocalApp`` with its replica, log and attempt is
about 30 tracked objects). Both describe the app the same way.

Example:
    >>> import gc
    >>> finished: FinishedApp = ('{"app_id": "a1"}', False)
    >>> gc.collect() >= 0 and not gc.is_tracked(finished)
    True
"""

from __future__ import annotations

import json

from asyncsched.schedulers.kit import AppSnapshot, ReplicaSnapshot
from asyncsched.schedulers.local._app_record import app_record
from asyncsched.schedulers.local._local_app import LocalApp
from asyncsched.schedulers.local._reasons import replica_outcome
from asyncsched.schedulers.local._remote import snapshot_record
from asyncsched.specs import Role

__all__ = ("FinishedApp", "compact", "snapshot_app", "snapshot_finished")

#: a replica of an app supervised here runs on this host
_HOSTNAME = "localhost"


FinishedApp = tuple[str, bool]
"""A finished app, kept compact: its final record (JSON text, as on disk) and
whether a replica failed for good (``LocalApp.failed``, which the record does
not say: it words a CANCELLED replica's message). A plain tuple of a str and a
bool: the collector stops tracking it at its first collection (a subclass,
such as a NamedTuple, would stay tracked)."""


def compact(app: LocalApp) -> FinishedApp:
    """``app`` (finished) as a :class:`FinishedApp`."""
    # default=str as on disk: role metadata may hold values JSON cannot represent
    text = json.dumps(app_record(app), separators=(",", ":"), default=str)
    return (text, app.failed)


def snapshot_finished(app: FinishedApp, roles: list[Role]) -> AppSnapshot:
    """The app kept as ``app``, as :func:`snapshot_app` described it; its
    ``native`` is the record (a dict), as for an app of another process."""
    record, failed = app
    return snapshot_record(
        json.loads(record), hostname=_HOSTNAME, roles=roles, app_failed=failed
    )


def snapshot_app(app: LocalApp, roles: list[Role]) -> AppSnapshot:
    """``app`` as it stands now, with the ``roles`` it was submitted with.

    The snapshot's ``native`` is the app itself (control and logs use it).
    """
    replicas = []
    for r in app.replicas:
        code, reason, message = replica_outcome(
            r.state,
            r.exit_code,
            app_failed=app.failed,
            app_msg=app.msg,
            limit=(r.limit_reason, r.limit_message)
            if r.limit_reason is not None
            else None,
        )
        replicas.append(
            ReplicaSnapshot(
                r.launch.role,
                r.launch.replica_id,
                r.state,
                exit_code=code,
                hostname=_HOSTNAME,
                pid=r.pid,
                num_restarts=r.num_restarts,
                structured_error_msg=r.structured_error,
                reason=reason,
                message=message,
            )
        )
    return AppSnapshot(
        app.app_id,
        replicas,
        name=app.name,
        decided=app.decided(),
        msg=app.msg,
        num_restarts=app.num_restarts,
        structured_error_msg=app.structured_error(),
        ui_url=f"file://{app.app_dir}",
        roles=roles,
        native=app,
    )
