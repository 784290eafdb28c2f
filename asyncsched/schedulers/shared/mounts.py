"""A role's mounts, checked the same way for every container backend.

:func:`checked_mounts` turns the bind, volume and device mounts of a role
into one uniform shape (:class:`CheckedMount`) after checking each: host and
container paths absolute, a volume named. A backend then only maps that
shape onto its own API (Docker's ``Mounts``/``Devices``, a pod's volumes),
so a bad mount reads the same whichever backend refuses it.

Example:
    >>> from asyncsched.specs import BindMount, DeviceMount
    >>> bind, dev = checked_mounts(
    ...     [BindMount("/data", "/in"), DeviceMount("/dev/fuse", "/dev/fuse", "r")],
    ...     "roles[0]",
    ...     volume="a volume name",
    ... )
    >>> bind.kind.value, bind.read_only, dev.kind.value, dev.read_only
    ('bind', False, 'device', True)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from asyncsched.errors import SpecError
from asyncsched.specs import BindMount, DeviceMount, MountType, VolumeMount

__all__ = ("CheckedMount", "checked_mounts")


@dataclass(frozen=True)
class CheckedMount:
    """One mount of a role, checked.

    Attributes:
        kind: ``bind``, ``volume`` or ``device``.
        src: The host path, the volume's name or the host device.
        dst: The absolute path inside the container.
        read_only: The mount's ``read_only``; for a device, True when its
            permissions grant neither ``w`` nor ``m``.
        permissions: A device's permissions (``""`` for the other kinds).
        field: Where the mount stands in the app, e.g. ``roles[0].mounts[1]``.
    """

    kind: MountType
    src: str
    dst: str
    read_only: bool
    permissions: str
    field: str


def checked_mounts(
    mounts: Iterable[object], where: str, *, volume: str
) -> list[CheckedMount]:
    """Check each of ``mounts`` (of the role at ``where``, e.g. ``roles[0]``).

    ``volume`` names what a volume mount's ``src`` must give, e.g. ``"a PVC
    name"``.

    Raises:
        SpecError: a path is not absolute, a volume has no name or an object
            is no mount; its field names the mount (``roles[0].mounts[1].src``).
    """
    checked: list[CheckedMount] = []
    for i, mount in enumerate(mounts):
        field = f"{where}.mounts[{i}]"
        if isinstance(mount, BindMount | DeviceMount):
            _check_path(mount.src_path, f"{field}.src_path")
        elif isinstance(mount, VolumeMount):
            if not mount.src:
                raise SpecError(f"{field}.src", f"a volume mount needs {volume}")
        else:
            raise SpecError(field, f"unknown mount type {type(mount).__name__}")
        _check_path(mount.dst_path, f"{field}.dst_path")
        checked.append(_checked(mount, field))
    return checked


def _checked(mount: BindMount | VolumeMount | DeviceMount, field: str) -> CheckedMount:
    if isinstance(mount, DeviceMount):
        perms = mount.permissions
        read_only = "w" not in perms and "m" not in perms
        return CheckedMount(
            MountType.DEVICE, mount.src_path, mount.dst_path, read_only, perms, field
        )
    if isinstance(mount, VolumeMount):
        kind, src = MountType.VOLUME, mount.src
    else:
        kind, src = MountType.BIND, mount.src_path
    return CheckedMount(kind, src, mount.dst_path, mount.read_only, "", field)


def _check_path(path: object, field: str) -> None:
    if not isinstance(path, str) or not path.startswith("/"):
        raise SpecError(field, f"must be an absolute path, got {path!r}")
