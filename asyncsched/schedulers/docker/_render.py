"""AppDef -> Docker Engine API ``POST /containers/create`` bodies, without I/O.

Everything here is pure: the same AppDef and run config always give the same
request (apart from the app id), so it is tested without a daemon.

Example:
    >>> from asyncsched.specs import AppDef, Role
    >>> app = AppDef("hello", roles=[Role("r", image="busybox", entrypoint="echo")])
    >>> job = render_job(app, "hello-abc", {}, session="s", version="1.0")
    >>> job.containers[0].name, job.containers[0].body["HostConfig"]["NetworkMode"]
    ('hello-abc-r-0', 'asyncsched')
"""

from __future__ import annotations

import copy
import fnmatch
import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import yaml

from asyncsched.errors import SpecError
from asyncsched.schedulers.devices import get_device_mounts
from asyncsched.schedulers.shared.identity import RANK0_ENV
from asyncsched.schedulers.shared.labels import (
    LABEL_REPLICA_ID,
    LABEL_ROLE_NAME,
    ReplicaLabels,
)
from asyncsched.schedulers.shared.mounts import checked_mounts
from asyncsched.schedulers.shared.replicas import expand_role
from asyncsched.specs import AppDef, CfgVal, MountType, Role
from asyncsched.specs.runopts import choice

from ._state import LABEL_FAIL_FAST, LABEL_MAX_RETRIES

__all__ = [
    "DEFAULT_NETWORK",
    "ENV_IMAGE",
    "PULL_POLICIES",
    "RANK0_ENV",
    "DockerContainer",
    "DockerJob",
    "check_container_name",
    "container_name",
    "default_env",
    "docker_py_kwargs",
    "render_job",
]

ENV_IMAGE = "TORCHX_IMAGE"

DEFAULT_NETWORK = "asyncsched"
PULL_POLICIES = ("if_not_present", "always", "never")

_LEADING_JUNK = re.compile(r"^[^a-zA-Z0-9]+")
# Docker's rule for container names (daemon/names), anchored
_DOCKER_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]+$")
_DOCKER_NAME_CHARS = re.compile(r"^[a-zA-Z0-9_.-]*$")
_APP_PART = 30  # trailing characters of the app id kept in a container name
_ROLE_PART = 30  # longest role name kept as is in a container name
_MAX_NAME = 63  # a name is also the hostname: one DNS label
_MiB = 1024 * 1024


@dataclass
class DockerContainer:
    """One container to create: its name and its Engine API create body.

    ``body`` is what is POSTed to ``/containers/create?name=<name>``; edit it in
    a dry-run result to pass settings asyncsched does not render.
    """

    name: str
    image: str
    command: list[str]
    body: dict[str, Any]

    @property
    def kwargs(self) -> Mapping[str, Any]:
        """:attr:`body` as TorchX 0.7's docker-py keywords; read-only, a fresh copy.

        For code written against TorchX's ``DockerContainer.kwargs`` (dry-run
        tests, tools inspecting a dry run): ``name``, ``environment``,
        ``labels``, ``hostname``, ``privileged``, ``network``, ``mounts``,
        ``devices`` and, when set, ``restart_policy``, ``mem_limit``,
        ``shm_size``, ``nano_cpus``, ``device_requests``. The body stays the
        request that is sent: edit :attr:`body`, never this view. Labels are
        asyncsched's (``asyncsched.io/*``).

        Example:
            >>> c = DockerContainer("a-r-0", "busybox", ["true"],
            ...     {"Env": ["A=1"], "HostConfig": {"Memory": 3000 * 1024 * 1024}})
            >>> c.kwargs["environment"], c.kwargs["mem_limit"]
            ({'A': '1'}, '3000m')
        """
        return MappingProxyType(docker_py_kwargs(self.name, self.body))

    @property
    def role(self) -> str:
        """The role this container is a replica of."""
        return str(self.body["Labels"][LABEL_ROLE_NAME])

    @property
    def replica_id(self) -> int:
        """The replica index within its role."""
        return int(self.body["Labels"][LABEL_REPLICA_ID])


@dataclass
class DockerJob:
    """Everything ``DockerScheduler.schedule`` creates for one app.

    Args:
        app_id: The app id, also the value of the ``asyncsched.io/app-id`` label.
        containers: The containers, role by role, replica by replica.
        network: Name of the bridge network the containers join.
        image_pull_policy: ``if_not_present``, ``always`` or ``never``.
    """

    app_id: str
    containers: list[DockerContainer] = field(default_factory=list)
    network: str = DEFAULT_NETWORK
    image_pull_policy: str = "if_not_present"

    @property
    def images(self) -> list[str]:
        """Distinct images, in first-use order."""
        return list(dict.fromkeys(c.image for c in self.containers))

    def __repr__(self) -> str:
        return format_job(self)


def docker_py_kwargs(name: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """The docker-py ``containers.run`` keywords that would send ``body``.

    TorchX 0.7's keys and value shapes: ``environment`` and ``labels`` are
    dicts, ``mounts`` docker-py ``Mount``-shaped dicts (equal to ``Mount``),
    ``devices`` ``"src:dst:permissions"`` strings, memory ``"<MiB>m"``
    (bytes when not a whole MiB), ``device_requests`` ``DeviceRequest``-shaped
    dicts. Nested values are copies.
    """
    host: Mapping[str, Any] = body.get("HostConfig") or {}
    kwargs: dict[str, Any] = {
        "name": name,
        "environment": dict(
            entry.partition("=")[::2] for entry in body.get("Env") or []
        ),
        "labels": dict(body.get("Labels") or {}),
        "hostname": body.get("Hostname"),
        "privileged": bool(host.get("Privileged", False)),
        "network": host.get("NetworkMode"),
        "mounts": copy.deepcopy(list(host.get("Mounts") or [])),
        "devices": [
            f"{d['PathOnHost']}:{d['PathInContainer']}:{d['CgroupPermissions']}"
            for d in host.get("Devices") or []
        ],
    }
    if "RestartPolicy" in host:
        kwargs["restart_policy"] = copy.deepcopy(host["RestartPolicy"])
    if "Memory" in host:
        kwargs["mem_limit"] = _docker_py_size(host["Memory"])
    if "ShmSize" in host:
        kwargs["shm_size"] = _docker_py_size(host["ShmSize"])
    if "NanoCpus" in host:
        kwargs["nano_cpus"] = host["NanoCpus"]
    if "DeviceRequests" in host:
        kwargs["device_requests"] = copy.deepcopy(host["DeviceRequests"])
    return kwargs


def _docker_py_size(size: Any) -> Any:
    if isinstance(size, int) and size % _MiB == 0:
        return f"{size // _MiB}m"
    return size


def format_job(job: DockerJob) -> str:
    """Render ``job`` as YAML: the create request of every container."""
    doc = {
        "app_id": job.app_id,
        "network": job.network,
        "image_pull_policy": job.image_pull_policy,
        "containers": [{"name": c.name, "body": c.body} for c in job.containers],
    }
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)


def container_name(app_id: str, role_name: str, replica_id: int) -> str:
    """``{app_id[-30:]}-{role}-{k}`` without leading non-alphanumerics.

    ``role`` is the role name when it has at most 30 characters (TorchX's
    format), otherwise its first 21 characters, ``-`` and 8 hex digits of
    its SHA-256: two roles sharing a 30-character prefix still get distinct
    names. The app id part is shortened further when needed to keep the
    name, which is also the container's hostname, within 63 characters.

    Example:
        >>> container_name("__.-_x-bq4f", "trainer", 0)
        'x-bq4f-trainer-0'
        >>> container_name("app-bq4f", "a" * 40, 0)
        'app-bq4f-aaaaaaaaaaaaaaaaaaaaa-e33cdf9c-0'
    """
    role = role_name
    if len(role) > _ROLE_PART:
        digest = hashlib.sha256(role.encode()).hexdigest()[:8]
        role = f"{role[: _ROLE_PART - 9]}-{digest}"
    tail = f"-{role}-{replica_id}"
    keep = max(1, min(_APP_PART, _MAX_NAME - len(tail)))
    return _LEADING_JUNK.sub("", f"{app_id[-keep:]}{tail}")


def check_container_name(name: str, app: AppDef, role_index: int) -> None:
    """Raise ``SpecError`` unless Docker accepts ``name`` as a container name.

    Raises:
        SpecError: on ``roles[i].name`` when the role name is at fault,
            otherwise on ``name`` (the app name, part of the app id).
    """
    if _DOCKER_NAME.match(name):
        return
    role = app.roles[role_index].name
    bad_role = not _DOCKER_NAME_CHARS.match(role)
    raise SpecError(
        f"roles[{role_index}].name" if bad_role else "name",
        f"role {role!r} of app {app.name!r} would run as container {name!r}, which"
        f" Docker rejects (names match {_DOCKER_NAME.pattern}): use letters,"
        " digits, '_', '.' and '-' only",
    )


def default_env(
    cfg: Mapping[str, CfgVal], environ: Mapping[str, str]
) -> dict[str, str]:
    """Host variables matched by ``copy_env`` globs, then ``env`` on top.

    Globs are anchored (``FOO_*`` does not match ``FOOBAR_1``).
    """
    env: dict[str, str] = {}
    for pattern in _str_list(cfg.get("copy_env")):
        for name in fnmatch.filter(environ.keys(), pattern):
            env[name] = environ[name]
    extra = cfg.get("env")
    if isinstance(extra, dict):
        env.update({str(k): str(v) for k, v in extra.items()})
    return env


def render_job(
    app: AppDef,
    app_id: str,
    cfg: Mapping[str, CfgVal],
    *,
    session: str,
    version: str,
    network: str = DEFAULT_NETWORK,
    environ: Mapping[str, str] | None = None,
) -> DockerJob:
    """Build the containers of ``app`` (the dry run of ``DockerScheduler``).

    ``app`` is not modified (device mounts derived from resources go to the
    request only).

    Raises:
        SpecError: a mount that Docker cannot express (relative path, empty
            src), or a container name Docker would reject (an app or role
            name with other characters than letters, digits, ``_.-``).
        InvalidRunConfigException: an unknown ``image_pull_policy``.
    """
    policy = choice(cfg, "image_pull_policy", PULL_POLICIES, "if_not_present")
    base_env = default_env(cfg, os.environ if environ is None else environ)
    privileged = bool(cfg.get("privileged") or False)
    fail_fast = bool(cfg.get("fail_fast", True))
    rank0_name = container_name(app_id, app.roles[0].name, 0)
    job = DockerJob(app_id=app_id, network=network, image_pull_policy=policy)
    names: set[str] = set()
    for role_index, role in enumerate(app.roles):
        if not role.image.strip():
            raise SpecError(
                f"roles[{role_index}].image", "the docker scheduler needs an image name"
            )
        mounts, devices = _render_mounts(role, f"roles[{role_index}]")
        for spec in expand_role(app_id, role, role_index=role_index):
            replica, replica_id = spec.role, spec.replica_id
            name = container_name(app_id, role.name, replica_id)
            check_container_name(name, app, role_index)
            if name in names:  # only a role named like another's shortened form
                raise SpecError(
                    f"roles[{role_index}].name",
                    f"role {role.name!r} would reuse container name {name!r}"
                    " of another role: rename one of them",
                )
            names.add(name)
            env = {
                **base_env,
                **replica.env,
                RANK0_ENV: rank0_name,
                ENV_IMAGE: role.image,
                **spec.identity,
            }
            ids = ReplicaLabels(
                app_id, app.name, role.name, role_index, replica_id, session
            )
            labels = ids.labels(version)
            labels[LABEL_FAIL_FAST] = "true" if fail_fast else "false"
            labels[LABEL_MAX_RETRIES] = str(max(role.max_retries, 0))
            command = [replica.entrypoint, *replica.args]
            body = {
                "Image": role.image,
                "Cmd": command,
                "Hostname": name,
                "Env": [f"{k}={v}" for k, v in env.items()],
                "Labels": labels,
                "HostConfig": _host_config(role, network, privileged, mounts, devices),
            }
            job.containers.append(DockerContainer(name, role.image, command, body))
    return job


def _host_config(
    role: Role,
    network: str,
    privileged: bool,
    mounts: list[dict[str, Any]],
    devices: list[dict[str, str]],
) -> dict[str, Any]:
    host: dict[str, Any] = {
        "NetworkMode": network,
        "Privileged": privileged,
        "Mounts": mounts,
        "Devices": devices,
    }
    if role.max_retries > 0:
        host["RestartPolicy"] = {
            "Name": "on-failure",
            "MaximumRetryCount": role.max_retries,
        }
    res = role.resource
    if res.memMB >= 0:
        # "m" in TorchX's docker-py kwargs means MiB; /dev/shm as large as memory
        host["Memory"] = host["ShmSize"] = int(res.memMB) * _MiB
    if res.cpu >= 0:
        host["NanoCpus"] = int(res.cpu * 1e9)
    if res.gpu > 0:
        host["DeviceRequests"] = [
            {
                "Driver": "",
                "Count": res.gpu,
                "DeviceIDs": [],
                "Capabilities": [["compute", "utility"]],
                "Options": {},
            }
        ]
    return host


def _render_mounts(
    role: Role, where: str
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    mounts: list[dict[str, Any]] = []
    devices: list[dict[str, str]] = []
    all_mounts: list[object] = list(role.mounts)
    all_mounts.extend(get_device_mounts(role.resource.devices))
    for mount in checked_mounts(all_mounts, where, volume="a volume name"):
        if mount.kind == MountType.DEVICE:
            bad = set(mount.permissions) - set("rwm")
            if not mount.permissions or bad:
                raise SpecError(
                    f"{mount.field}.permissions",
                    f"must be made of 'r', 'w' and 'm', got {mount.permissions!r}",
                )
            devices.append(
                {
                    "PathOnHost": mount.src,
                    "PathInContainer": mount.dst,
                    "CgroupPermissions": mount.permissions,
                }
            )
        else:
            mounts.append(
                {
                    "Target": mount.dst,
                    "Source": mount.src,
                    "Type": mount.kind.value,
                    "ReadOnly": mount.read_only,
                }
            )
    return mounts, devices


def _str_list(value: CfgVal) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v for v in re.split(r"[,;]", value) if v]
    if isinstance(value, list):
        return [str(v) for v in value]
    return []
