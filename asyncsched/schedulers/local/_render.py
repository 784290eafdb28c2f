"""The pure half of the local backend: (AppDef, cfg, host facts) -> PopenRequest.

Nothing here starts a process or probes the host: host facts (the GPU count,
extra PATH entries) are gathered once per scheduler and passed in as
:class:`HostFacts`. Image providers only resolve a role's image to a directory.

Example:
    >>> from asyncsched.specs import AppDef, Role
    >>> app = AppDef("hi", roles=[Role("hi", image="", entrypoint="echo", args=["${replica_id}"])])
    >>> req = render_request(app, "hi-1", {}, session_name="s", base_log_dir="/tmp/l",
    ...                      provider=CWDImageProvider(), host=HostFacts())
    >>> req.role_params["hi"][0].args
    ['echo', '0']
"""

from __future__ import annotations

import abc
import logging
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pprint import pformat
from typing import Any

from asyncsched.errors import InvalidRunConfigException, SpecError
from asyncsched.schedulers.local._env import replica_env, role_PATH
from asyncsched.schedulers.local._gpus import assign_cuda_devices
from asyncsched.schedulers.local._logs import log_paths
from asyncsched.schedulers.shared.identity import RANK0_ENV
from asyncsched.schedulers.shared.replicas import expand_role
from asyncsched.specs import AppDef, CfgVal, Role, role_to_dict

__all__ = [
    "CWDImageProvider",
    "HostFacts",
    "ImageProvider",
    "LocalDirectoryImageProvider",
    "PopenRequest",
    "ReplicaParam",
    "format_request",
    "gpus_requested",
    "render_request",
]

logger = logging.getLogger(__name__)


# -- image providers -------------------------------------------------------------


@dataclass
class ReplicaParam:
    """How one replica process is started (the dry-run shows these)."""

    args: list[str]
    env: dict[str, str]
    stdout: str | None = None
    stderr: str | None = None
    combined: str | None = None
    cwd: str | None = None


class ImageProvider(abc.ABC):
    """Turns a role's ``image`` into a local directory the replicas run from."""

    def __init__(self, cfg: Mapping[str, CfgVal] | None = None) -> None:
        self.cfg = dict(cfg or {})

    @abc.abstractmethod
    def fetch(self, image: str) -> str:
        """Make ``image`` available locally; return its root (``${img_root}``)."""

    def fetch_role(self, role: Role) -> str:
        """Fetch the image of ``role`` (may prepare more for the role)."""
        return self.fetch(role.image)

    def get_cwd(self, image: str) -> str | None:
        """The working directory of replicas; None keeps the scheduler's."""
        return None

    def get_entrypoint(self, img_root: str, role: Role) -> str:
        """The command to execute (not joined to ``img_root``)."""
        return role.entrypoint

    def get_replica_param(
        self,
        img_root: str,
        role: Role,
        stdout: str | None = None,
        stderr: str | None = None,
        combined: str | None = None,
    ) -> ReplicaParam:
        """The replica parameters of ``role`` (``args = [entrypoint, *role.args]``)."""
        return ReplicaParam(
            args=[self.get_entrypoint(img_root, role), *role.args],
            env=dict(role.env),
            stdout=stdout,
            stderr=stderr,
            combined=combined,
            cwd=self.get_cwd(role.image),
        )


class CWDImageProvider(ImageProvider):
    """``local_cwd``: the image is ignored; replicas run in the current directory."""

    def fetch(self, image: str) -> str:
        return os.getcwd()

    def get_cwd(self, image: str) -> str | None:
        return os.getcwd()


class LocalDirectoryImageProvider(ImageProvider):
    """``local_dir``: the image is an existing directory, used as root and cwd."""

    def fetch(self, image: str) -> str:
        """Return ``image`` if it is an existing directory.

        Raises:
            SpecError: (a ValueError) ``image`` is relative or not an existing
                directory.
        """
        if not os.path.isabs(image):
            raise SpecError(
                "image",
                f"local_dir image {image!r} must be an absolute path to a directory",
            )
        if not os.path.isdir(image):
            raise SpecError(
                "image", f"local_dir image {image!r} is not an existing directory"
            )
        return image

    def get_cwd(self, image: str) -> str | None:
        return image


# -- the request -------------------------------------------------------------------


@dataclass
class PopenRequest:
    """What ``schedule`` launches: per role, one :class:`ReplicaParam` per replica.

    ``log_dir`` is the app's log dir ``<base>/<session>/<app_id>``.
    ``memory_mb`` holds the memory limit of each role that has one (its
    ``resource.memMB``, unless the ``enforce_memory`` run option is off);
    ``time_limit`` is the ``time_limit`` run option (seconds, or None);
    ``detach`` the ``detach`` run option (a supervisor process of its own).
    """

    app_id: str
    log_dir: str
    role_params: dict[str, list[ReplicaParam]]
    role_log_dirs: dict[str, list[str]]
    app_name: str = ""
    fail_fast: bool = True
    roles: dict[str, dict[str, Any]] = field(default_factory=dict)
    memory_mb: dict[str, int] = field(default_factory=dict)
    time_limit: int | None = None
    detach: bool = False


def format_request(request: PopenRequest) -> str:
    """The dry-run text of a request (what ``--dryrun`` prints)."""
    return pformat(asdict(request), indent=2, width=100)


@dataclass(frozen=True)
class HostFacts:
    """What the render needs to know about this host, gathered once per scheduler.

    Attributes:
        gpu_count: GPUs on this host (only probed when a role asks for GPUs
            and ``auto_set_cuda_visible_devices`` is on; 0 otherwise).
        extra_paths: Directories put in front of each role's PATH.
    """

    gpu_count: int = 0
    extra_paths: tuple[str, ...] = ()


def gpus_requested(app: AppDef) -> int:
    """GPUs the app asks for in all (replicas x ``resource.gpu``)."""
    return sum(r.num_replicas * max(r.resource.gpu, 0) for r in app.roles)


def _cuda_split(
    app: AppDef, enabled: bool, gpu_count: int
) -> dict[tuple[str, int], str]:
    total = gpus_requested(app)
    if total <= 0:
        return {}
    if not enabled:
        logger.warning(
            "%d GPUs requested but auto_set_cuda_visible_devices is off: every"
            " replica sees every GPU",
            total,
        )
        return {}
    wanted = [(r.name, r.num_replicas, max(r.resource.gpu, 0)) for r in app.roles]
    return assign_cuda_devices(wanted, gpu_count)


def render_request(
    app: AppDef,
    app_id: str,
    cfg: Mapping[str, CfgVal],
    *,
    session_name: str,
    base_log_dir: str,
    provider: ImageProvider,
    host: HostFacts,
) -> PopenRequest:
    """The processes ``schedule`` would start for ``app``, as data.

    Replicas are expanded by :func:`asyncsched.schedulers.shared.replicas.expand_role`
    (macros and identity variables, as on every backend); this adds the local
    rules: PATH, the torchelastic variables, log files, ``CUDA_VISIBLE_DEVICES``.

    Raises:
        SpecError: a role's image cannot be used by ``provider``.
    """
    app_log_dir = os.path.join(base_log_dir, session_name, app_id)
    cuda = _cuda_split(
        app, bool(cfg.get("auto_set_cuda_visible_devices")), host.gpu_count
    )
    role_params: dict[str, list[ReplicaParam]] = {}
    role_log_dirs: dict[str, list[str]] = {}
    for idx, role in enumerate(app.roles):
        try:
            img_root = provider.fetch_role(role)
        except SpecError as exc:
            raise SpecError(f"roles[{idx}].image", exc.message) from None
        except ValueError as exc:  # a user-written provider
            raise SpecError(f"roles[{idx}].image", str(exc)) from None
        path = role_PATH(
            role.env.get("PATH"),
            list(host.extra_paths),
            provider.get_cwd(role.image),
            bool(cfg.get("prepend_cwd")),
        )
        params: list[ReplicaParam] = []
        dirs: list[str] = []
        for spec in expand_role(
            app_id, role, role_index=idx, img_root=img_root, rank0_env=RANK0_ENV
        ):
            i = spec.replica_id
            replica_role = spec.role
            replica_dir = os.path.join(app_log_dir, role.name, str(i))
            env = dict(replica_role.env)
            if path:
                env["PATH"] = spec.values.substitute(path)
            replica_role.env = replica_env(
                env,
                app_id=app_id,
                role_name=role.name,
                replica_id=i,
                num_replicas=role.num_replicas,
                replica_log_dir=replica_dir,
                app_log_dir=app_log_dir,
            )
            if (role.name, i) in cuda:
                replica_role.env["CUDA_VISIBLE_DEVICES"] = cuda[(role.name, i)]
            paths = log_paths(replica_dir)
            params.append(
                provider.get_replica_param(
                    img_root,
                    replica_role,
                    stdout=paths["stdout"],
                    stderr=paths["stderr"],
                    combined=paths["combined"],
                )
            )
            dirs.append(replica_dir)
        role_params[role.name] = params
        role_log_dirs[role.name] = dirs
    return PopenRequest(
        app_id=app_id,
        log_dir=app_log_dir,
        role_params=role_params,
        role_log_dirs=role_log_dirs,
        app_name=app.name,
        fail_fast=bool(cfg.get("fail_fast", True)),
        roles={role.name: role_to_dict(role) for role in app.roles},
        memory_mb={
            role.name: role.resource.memMB
            for role in app.roles
            if cfg.get("enforce_memory", True) and role.resource.memMB > 0
        },
        time_limit=_time_limit(cfg.get("time_limit")),
        detach=bool(cfg.get("detach", False)),
    )


def _time_limit(value: CfgVal) -> int | None:
    """The ``time_limit`` run option: None, or whole seconds greater than zero.

    Raises:
        InvalidRunConfigException: not an int greater than zero.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidRunConfigException(
            f"Run option: time_limit, must be a number of seconds greater than"
            f" zero, but was: {value!r}",
            "time_limit",
            {"time_limit": value},
        )
    return value
