"""What ``describe`` and ``list`` say of an app supervised in this process."""

from __future__ import annotations

from asyncsched.schedulers.kit import AppSnapshot, ReplicaSnapshot
from asyncsched.schedulers.local._local_app import LocalApp
from asyncsched.schedulers.local._reasons import replica_outcome
from asyncsched.specs import Role

__all__ = ("snapshot_app",)


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
                hostname="localhost",
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
