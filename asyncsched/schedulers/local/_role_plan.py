"""What the local backend reads from an app's roles: the supervisor's role
facts (replica count, retries, policy) and the mounts it cannot honour."""

from __future__ import annotations

import warnings
from typing import Any

from asyncsched.errors import AsyncschedWarning
from asyncsched.schedulers.local._render import PopenRequest
from asyncsched.schedulers.local._replica import RoleInfo
from asyncsched.specs import AppDef, BindMount, DeviceMount, RetryPolicy, VolumeMount

__all__ = ("role_infos", "warn_ignored_mounts")


def role_infos(request: PopenRequest) -> list[RoleInfo]:
    """Each role's facts for the supervisor, in the request's role order."""
    return [
        RoleInfo(
            name=name,
            num_replicas=int(spec.get("num_replicas", len(request.role_params[name]))),
            max_retries=int(spec.get("max_retries", 0)),
            retry_policy=RetryPolicy(spec.get("retry_policy", "APPLICATION")),
            spec=spec,
        )
        for name, spec in _role_specs(request).items()
    ]


def warn_ignored_mounts(app: AppDef, scheduler: str) -> None:
    """Replicas run on this host's file system, so bind, volume and device
    mounts cannot be honoured: each role with mounts gets an
    :class:`~asyncsched.errors.AsyncschedWarning` naming them."""
    for index, role in enumerate(app.roles):
        if role.mounts:
            warnings.warn(
                f"roles[{index}].mounts: the {scheduler} scheduler runs replicas"
                f" on this host and ignores {len(role.mounts)} mount(s):"
                f" {', '.join(_describe_mount(m) for m in role.mounts)}",
                AsyncschedWarning,
                stacklevel=3,
            )


def _role_specs(request: PopenRequest) -> dict[str, dict[str, Any]]:
    return {
        name: request.roles.get(name, {"name": name, "num_replicas": len(params)})
        for name, params in request.role_params.items()
    }


def _describe_mount(mount: BindMount | VolumeMount | DeviceMount) -> str:
    if isinstance(mount, BindMount):
        return f"bind {mount.src_path}:{mount.dst_path}"
    if isinstance(mount, VolumeMount):
        return f"volume {mount.src}:{mount.dst_path}"
    return f"device {mount.src_path}"
