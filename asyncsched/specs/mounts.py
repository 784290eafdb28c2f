"""Bind, volume and device mounts, and the parser for ``key=value`` mount tokens.

Example:
    >>> from asyncsched.specs import parse_mounts
    >>> parse_mounts(["type=volume", "src=data", "dst=/data", "readonly"])
    [VolumeMount(src='data', dst_path='/data', read_only=True)]
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import StrEnum

from asyncsched.errors import InvalidMountError

__all__ = [
    "BindMount",
    "DeviceMount",
    "Mount",
    "MountType",
    "VolumeMount",
    "parse_mounts",
]


class MountType(StrEnum):
    """The kinds of mount a role can ask for."""

    BIND = "bind"
    VOLUME = "volume"
    DEVICE = "device"


@dataclass
class BindMount:
    """Mount a host path into the container.

    Args:
        src_path: Path on the host.
        dst_path: Path inside the container.
        read_only: Whether the mount is read-only.
    """

    src_path: str
    dst_path: str
    read_only: bool = False


@dataclass
class VolumeMount:
    """Mount a named, scheduler-managed volume (e.g. a PVC) into the container.

    Args:
        src: Name of the volume.
        dst_path: Path inside the container.
        read_only: Whether the mount is read-only.
    """

    src: str
    dst_path: str
    read_only: bool = False


@dataclass
class DeviceMount:
    """Expose a host device (e.g. ``/dev/fuse``) inside the container.

    Args:
        src_path: Device path on the host.
        dst_path: Device path inside the container.
        permissions: Any of ``r``, ``w`` and ``m`` (mknod).
    """

    src_path: str
    dst_path: str
    permissions: str = "rwm"


Mount = BindMount | VolumeMount | DeviceMount

# accepted spelling -> canonical key
_KEYS: dict[str, str] = {
    "type": "type",
    "src": "src",
    "source": "src",
    "dst": "dst",
    "destination": "dst",
    "target": "dst",
    "readonly": "readonly",
    "read_only": "readonly",
    "perm": "perm",
}
_MOUNT_TYPES = [t.value for t in MountType]
#: the expected form of each mount type, for error messages
_FORMS: dict[str, str] = {
    "bind": "type=bind,src=HOST_PATH,dst=CONTAINER_PATH[,readonly]",
    "volume": "type=volume,src=VOLUME_NAME,dst=CONTAINER_PATH[,readonly]",
    "device": "type=device,src=HOST_DEVICE[,dst=CONTAINER_PATH][,perm=rwm]",
}
_DEVICE_PERMISSIONS = frozenset("rwm")


def parse_mounts(opts: list[str]) -> list[Mount]:
    """Parse pre-split ``key=value`` tokens into mounts.

    Every mount starts with a ``type=<bind|volume|device>`` token; the tokens after
    it, up to the next ``type=``, describe that mount. Accepted keys (aliases in
    brackets): ``type``, ``src`` (``source``), ``dst`` (``destination``,
    ``target``), ``readonly`` (``read_only``) and ``perm``. A token without ``=``
    has the empty value; ``readonly`` makes the mount read-only whatever its value.

    Raises:
        InvalidMountError: (a SpecError and a KeyError, field ``mounts``) an
            unknown key, a key before the first ``type=``, a required key
            (``src``, ``dst``) missing, an unknown mount type or invalid
            device permissions.
    """
    groups: list[dict[str, str]] = []
    for opt in opts:
        key, _, value = opt.partition("=")
        canonical = _KEYS.get(key)
        if canonical is None:
            raise InvalidMountError(
                f"unknown mount option {key}, must be one of {list(_KEYS)}"
            )
        if canonical == "type":
            groups.append({})
        elif not groups:
            raise InvalidMountError("type must be specified first")
        groups[-1][canonical] = value
    return [_build_mount(group) for group in groups]


def _build_mount(group: dict[str, str]) -> Mount:
    mount_type = group["type"]
    required = ("src",) if mount_type == MountType.DEVICE else ("src", "dst")
    missing = [key for key in required if key not in group]
    if mount_type in _MOUNT_TYPES and missing:
        needs = " and ".join(f"{key}=" for key in missing)
        raise InvalidMountError(
            f"{mount_type} mount needs {needs} (expected {_FORMS[mount_type]})",
            missing[0],
        )
    read_only = "readonly" in group
    if mount_type == MountType.BIND:
        return BindMount(
            src_path=os.path.expanduser(group["src"]),
            dst_path=group["dst"],
            read_only=read_only,
        )
    if mount_type == MountType.VOLUME:
        return VolumeMount(src=group["src"], dst_path=group["dst"], read_only=read_only)
    if mount_type == MountType.DEVICE:
        src = group["src"]
        perm = group.get("perm", "rwm")
        invalid = set(perm) - _DEVICE_PERMISSIONS
        if invalid:
            raise InvalidMountError(
                f"invalid device permissions {perm!r}: {sorted(invalid)} not in 'rwm'",
            )
        return DeviceMount(
            src_path=src, dst_path=group.get("dst", src), permissions=perm
        )
    raise InvalidMountError(
        f"invalid mount type {mount_type!r}, must be one of {_MOUNT_TYPES}"
    )
