"""The app model: :class:`AppDef`, :class:`Role`, :class:`Workspace`, validation."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import re
from collections.abc import Awaitable
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

from asyncsched.errors import InvalidArgumentError, SpecError

from ._copying import copy_instance
from .mounts import Mount
from .resources import NULL_RESOURCE, Resource

if TYPE_CHECKING:
    from .dryrun import AppDryRunInfo

__all__ = [
    "ALL",
    "AppDef",
    "MAX_NAME_LENGTH",
    "MISSING",
    "NONE",
    "RetryPolicy",
    "Role",
    "Workspace",
    "validate_app",
    "validate_session_name",
]

MISSING: str = "<MISSING>"
"""Placeholder for a string that must be set (e.g. ``Role.entrypoint``)."""
NONE: str = "<NONE>"
"""Placeholder for an optional string that is not set."""
ALL: str = "all"
"""Scheduler name meaning "any scheduler"."""

T = TypeVar("T")


class RetryPolicy(StrEnum):
    """What is restarted when a replica fails (and ``max_retries`` allows it).

    ``REPLICA`` replaces only the failed replica, ``ROLE`` restarts the failed
    role, ``APPLICATION`` restarts the whole app (every scheduler supports it).
    """

    REPLICA = "REPLICA"
    APPLICATION = "APPLICATION"
    ROLE = "ROLE"


@dataclass
class Workspace:
    """Local project directories to ship with a role.

    Args:
        projects: Local directory -> sub-directory in the image ("" for its root).
    """

    projects: dict[str, str]

    def is_unmapped_single_project(self) -> bool:
        """True for one project mapped to the image root."""
        return len(self.projects) == 1 and not next(iter(self.projects.values()))

    @staticmethod
    def from_str(workspace: str) -> Workspace:
        """Parse YAML: a plain path is one unmapped project, a mapping is many.

        Example:
            >>> Workspace.from_str("~/proj").projects
            {'~/proj': ''}
            >>> Workspace.from_str("{~/a: a, ~/b: }").projects
            {'~/a': 'a', '~/b': ''}
        """
        from asyncsched.specs._yaml import YamlAliasError, load_yaml

        try:
            loaded = load_yaml(workspace) if workspace else None
        except YamlAliasError as exc:
            raise SpecError("workspace", str(exc)) from None
        if loaded is None:
            return Workspace(projects={})
        if isinstance(loaded, dict):
            return Workspace(
                projects={
                    str(src): "" if dst is None else str(dst)
                    for src, dst in loaded.items()
                }
            )
        if isinstance(loaded, (str, int, float)):
            return Workspace(projects={workspace.strip(): ""})
        raise SpecError(
            "workspace",
            f"workspace must be a path or a mapping of paths, got: {workspace!r}",
        )


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


@dataclass(repr=False)
class Role:
    """One set of identical replicas within an app (e.g. trainers, a parameter server).

    Args:
        name: Role name; also used in paths, so letters, digits, ``_.-`` only
            (as app names).
        image: Scheduler-specific image (container image, directory...).
        min_replicas: Elastic lower bound on replicas, if supported.
        base_image: Deprecated; do not use.
        entrypoint: Command to run in the image (not macro-substituted).
        args: Arguments to the entrypoint (macro-substituted).
        env: Environment variables (values macro-substituted).
        num_replicas: Number of replicas to run.
        max_retries: How many times to retry on failure.
        retry_policy: What is restarted on a retry.
        resource: Resources per replica; the shared ``NULL_RESOURCE`` by default.
        port_map: Named ports to expose.
        metadata: Scheduler-specific settings, conventionally ``"<scheduler>.<key>"``.
        mounts: Bind, volume and device mounts.
        overrides: Attribute overrides resolved lazily on first access: a callable
            is called, a future's result is taken, and an awaitable needs
            ``await role.resolve_overrides()`` when an event loop is running.
        workspace: Local projects to build into this role's image.

    Example:
        >>> from asyncsched.specs import Role, resource
        >>> trainer = Role(
        ...     name="trainer",
        ...     image="python:3.11",
        ...     entrypoint="python",
        ...     args=["-m", "train", "--run-id", "${app_id}"],
        ...     num_replicas=2,
        ...     resource=resource(cpu=2, memMB=4096),
        ... )
        >>> trainer.num_replicas
        2
    """

    name: str
    image: str
    min_replicas: int | None = None
    base_image: str | None = None
    entrypoint: str = MISSING
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    num_replicas: int = 1
    max_retries: int = 0
    retry_policy: RetryPolicy = RetryPolicy.APPLICATION
    resource: Resource = field(default_factory=lambda: NULL_RESOURCE)
    port_map: dict[str, int] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    mounts: list[Mount] = field(default_factory=list)
    overrides: dict[str, Any] = field(default_factory=dict)
    workspace: Workspace | None = None

    def __post_init__(self) -> None:
        # Own the dict: resolving an override removes it, and that must not
        # change a dict the caller may share between roles.
        self.overrides = dict(self.overrides)

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("_") and name != "overrides":
            overrides = object.__getattribute__(self, "__dict__").get("overrides")
            if overrides and name in overrides:
                return object.__getattribute__(self, "_resolve_override")(name)
        return object.__getattribute__(self, name)

    def __deepcopy__(self, memo: dict[int, Any]) -> Role:
        # raw values (overrides unresolved), flat lists and dicts in one step
        return copy_instance(self, memo)

    def __repr__(self) -> str:
        # Read raw values: repr must not resolve (and so run) overrides.
        raw = vars(self)
        body = ", ".join(f"{f.name}={raw[f.name]!r}" for f in fields(self))
        return f"Role({body})"

    def _resolve_override(self, name: str) -> Any:
        overrides: dict[str, Any] = vars(self)["overrides"]
        value = overrides[name]
        if callable(value):
            value = value()
        if isinstance(value, concurrent.futures.Future):
            value = value.result()
        elif inspect.isawaitable(value):
            if _loop_running():
                # keep the awaitable (the callable already ran) for resolve_overrides()
                overrides[name] = value
                raise SpecError(
                    f"overrides[{name!r}]",
                    "is asynchronous and an event loop is running;"
                    " call `await app.resolve_overrides()` (or"
                    " `await role.resolve_overrides()`) before reading it",
                )
            value = asyncio.run(_await(value))
        setattr(self, name, value)
        del overrides[name]
        return value

    async def resolve_overrides(self) -> None:
        """Resolve every override now, awaiting asynchronous ones.

        Afterwards each overridden attribute holds its value and ``overrides`` is
        empty.
        """
        overrides: dict[str, Any] = vars(self)["overrides"]
        for name in list(overrides):
            value = overrides[name]
            if callable(value):
                value = value()
            if isinstance(value, concurrent.futures.Future):
                value = await asyncio.wrap_future(value)
            elif inspect.isawaitable(value):
                value = await value
            setattr(self, name, value)
            del overrides[name]

    def pre_proc(
        self, scheduler: str, dryrun_info: AppDryRunInfo[T]
    ) -> AppDryRunInfo[T]:
        """Hook to adjust the scheduler request for this role; returns it unchanged.

        ``Scheduler.submit_dryrun`` calls it once per role, in role order.
        """
        return dryrun_info


@dataclass
class AppDef:
    """An application: a name plus the roles that make it up.

    Args:
        name: App name; the scheduler uses it as the prefix of the app id,
            which names files and directories: letters, digits, ``_.-`` only,
            not starting with ``.`` or ``-``, at most :data:`MAX_NAME_LENGTH`
            characters.
        roles: The roles to run.
        metadata: Scheduler-specific metadata.

    Example:
        >>> from asyncsched.specs import AppDef, Role
        >>> app = AppDef(
        ...     name="echo",
        ...     roles=[Role("echo", image="/tmp", entrypoint="echo", args=["hi"])],
        ... )
        >>> [r.name for r in app.roles]
        ['echo']
    """

    name: str
    roles: list[Role] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)

    def __deepcopy__(self, memo: dict[int, Any]) -> AppDef:
        return copy_instance(self, memo)

    async def resolve_overrides(self) -> None:
        """Resolve the overrides of every role (see :meth:`Role.resolve_overrides`)."""
        for role in self.roles:
            await role.resolve_overrides()


# -- validation ---------------------------------------------------------------

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")

MAX_NAME_LENGTH = 128
"""Longest app, role or session name (characters; names are ASCII).

Each names a directory or file (``<session>/<app>-<suffix>/<role>``): 128
leaves room under the usual 255-byte file-name limit for the app id's
random suffix and the temporary names records are written through.
"""


def _name_problem(name: object) -> str | None:
    """Why ``name`` cannot be an app, role or session name; None when it can."""
    if not isinstance(name, str) or not name:
        return f"must be a non-empty string, got {name!r}"
    if len(name) > MAX_NAME_LENGTH:
        return (
            f"must be at most {MAX_NAME_LENGTH} characters, got {len(name)}"
            f" ({name[:40]!r}...)"
        )
    if not _NAME.fullmatch(name):
        return (
            f"must match {_NAME.pattern} (letters, digits, '_', '.', '-'; it"
            f" names files and directories), got {name!r}"
        )
    return None


def validate_session_name(session_name: object) -> None:
    """Check a scheduler's (or runner's) session name before it names anything.

    A session names a directory of the local backend's state and log dirs and
    appears in app handles, so it follows the rules of app and role names
    (letters, digits, ``_.-``, not starting with ``.`` or ``-``, at most
    :data:`MAX_NAME_LENGTH` characters). The empty session is allowed (it gives
    ``scheduler:///app_id`` handles, as in TorchX).

    Example:
        >>> validate_session_name("nightly-2024.05")
        >>> validate_session_name("../x")
        Traceback (most recent call last):
        ...
        asyncsched.errors.InvalidArgumentError: session_name: must match ...

    Raises:
        InvalidArgumentError: the name is not a string, too long, or has a
            character outside that set (``/``, ``..``, a control character...).
    """
    if session_name == "":
        return
    problem = _name_problem(session_name)
    if problem is not None:
        raise InvalidArgumentError(f"session_name: {problem}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate_app(app: AppDef) -> None:
    """Check ``app`` for mistakes a scheduler would only find later (or never).

    Overridden attributes that are not resolved yet are skipped; nothing is
    resolved or modified. What ``exec`` would reject is rejected here, before
    anything starts: a NUL byte in an image, an entrypoint, an argument or the
    environment, and an empty environment name or one with ``=``. App and role
    names name files and directories: letters, digits, ``_.-`` only, not
    starting with ``.`` or ``-``, at most :data:`MAX_NAME_LENGTH` characters
    (so ``../x``, ``/abs``, ``..`` and control characters are rejected).
    ``port_map`` maps names to ports (0-65535), ``metadata`` is a dict with
    string keys and ``mounts`` a list.

    Raises:
        SpecError: The first problem found; ``.field`` names it, e.g.
            ``"roles[0].num_replicas"``.
    """
    name: object = app.name
    roles: object = app.roles
    problem = _name_problem(name)
    if problem is not None:
        raise SpecError("name", problem)
    _check_metadata(app.metadata, "metadata")
    if not isinstance(roles, list) or not roles:
        raise SpecError("roles", "an app needs at least one role")
    seen: set[str] = set()
    for i, role in enumerate(roles):
        if not isinstance(role, Role):
            raise SpecError(f"roles[{i}]", f"must be a Role, got {type(role).__name__}")
        _validate_role(role, f"roles[{i}]", seen)


def _validate_role(role: Role, where: str, seen: set[str]) -> None:
    raw = vars(role)
    pending = raw["overrides"]

    def check(name: str) -> bool:
        return name not in pending

    name = raw["name"]
    if check("name"):
        problem = _name_problem(name)
        if problem is not None:
            raise SpecError(f"{where}.name", problem)
        if name in seen:
            raise SpecError(f"{where}.name", f"duplicate role name {name!r}")
        seen.add(name)

    entrypoint = raw["entrypoint"]
    if check("entrypoint") and (
        not isinstance(entrypoint, str) or not entrypoint or entrypoint == MISSING
    ):
        raise SpecError(
            f"{where}.entrypoint", f"must be a non-empty string, got {entrypoint!r}"
        )
    if check("entrypoint"):
        _check_exec_safe(entrypoint, f"{where}.entrypoint")
    # An empty image is fine here: local_cwd ignores images; backends that
    # need one (docker, local_dir) reject it themselves.
    image = raw["image"]
    if check("image") and (not isinstance(image, str) or image == MISSING):
        raise SpecError(f"{where}.image", f"must be a string, got {image!r}")
    if check("image"):
        _check_exec_safe(image, f"{where}.image")

    num_replicas = raw["num_replicas"]
    if check("num_replicas") and (not _is_int(num_replicas) or num_replicas < 1):
        raise SpecError(
            f"{where}.num_replicas", f"must be an int >= 1, got {num_replicas!r}"
        )
    min_replicas = raw["min_replicas"]
    if check("min_replicas") and min_replicas is not None:
        upper = num_replicas if _is_int(num_replicas) else None
        if (
            not _is_int(min_replicas)
            or min_replicas < 1
            or (upper is not None and min_replicas > upper)
        ):
            raise SpecError(
                f"{where}.min_replicas",
                f"must be None or an int in [1, num_replicas={num_replicas!r}],"
                f" got {min_replicas!r}",
            )
    max_retries = raw["max_retries"]
    if check("max_retries") and (not _is_int(max_retries) or max_retries < 0):
        raise SpecError(
            f"{where}.max_retries", f"must be an int >= 0, got {max_retries!r}"
        )
    if check("retry_policy"):
        try:
            RetryPolicy(raw["retry_policy"])
        except ValueError:
            raise SpecError(
                f"{where}.retry_policy",
                f"must be one of {[p.value for p in RetryPolicy]},"
                f" got {raw['retry_policy']!r}",
            ) from None

    if check("resource"):
        _validate_resource(raw["resource"], f"{where}.resource")
    if check("port_map"):
        _check_port_map(raw["port_map"], f"{where}.port_map")
    if check("metadata"):
        _check_metadata(raw["metadata"], f"{where}.metadata")
    if check("mounts") and not isinstance(raw["mounts"], list):
        raise SpecError(
            f"{where}.mounts",
            f"must be a list of mounts, got {type(raw['mounts']).__name__}",
        )

    args = raw["args"]
    if check("args") and (
        not isinstance(args, list) or not all(isinstance(a, str) for a in args)
    ):
        raise SpecError(f"{where}.args", f"must be a list of str, got {args!r}")
    if check("args"):
        for i, arg in enumerate(args):
            _check_exec_safe(arg, f"{where}.args[{i}]")
    env = raw["env"]
    if check("env") and (
        not isinstance(env, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    ):
        raise SpecError(f"{where}.env", f"must be a dict of str to str, got {env!r}")
    if check("env"):
        for key, value in env.items():
            _check_env_key(key, f"{where}.env")
            _check_exec_safe(value, f"{where}.env[{key!r}]")


def _as_dict(value: object, where: str, shape: str) -> dict[Any, Any]:
    """``value``, which must be a dict (``shape`` follows "must be a dict" in
    the error)."""
    if not isinstance(value, dict):
        raise SpecError(
            where, f"must be a dict{shape}, got {type(value).__name__}: {value!r}"
        )
    return value


def _check_port_map(port_map: object, where: str) -> None:
    """Port names map to port numbers (0-65535)."""
    port_map = _as_dict(
        port_map, where, " of port name to port number, e.g. {'http': 8080}"
    )
    for name, port in port_map.items():
        if not isinstance(name, str) or not name:
            raise SpecError(where, f"a port name must be a non-empty string: {name!r}")
        if not _is_int(port) or not 0 <= port <= 65535:
            raise SpecError(
                f"{where}[{name!r}]", f"must be an int in [0, 65535], got {port!r}"
            )


def _check_metadata(metadata: object, where: str) -> None:
    """Metadata is a dict with string keys (values are the scheduler's business)."""
    metadata = _as_dict(metadata, where, ", e.g. {'<scheduler>.<key>': value}")
    for key in metadata:
        if not isinstance(key, str):
            raise SpecError(where, f"keys must be strings, got {key!r}")


def _check_exec_safe(value: str, where: str) -> None:
    """exec() rejects a NUL byte in a path, an argument or the environment."""
    if "\0" in value:
        raise SpecError(where, f"contains a NUL byte (\\0): {value!r}")


def _check_env_key(key: str, where: str) -> None:
    """An environment name must be non-empty, without '=' or a NUL byte."""
    if not key:
        raise SpecError(where, "an environment variable name must not be empty")
    if "=" in key:
        raise SpecError(
            f"{where}[{key!r}]",
            f"an environment variable name must not contain '=': {key!r}",
        )
    _check_exec_safe(key, f"{where}[{key!r}]")


def _validate_resource(res: object, where: str) -> None:
    if not isinstance(res, Resource):
        raise SpecError(where, f"must be a Resource, got {type(res).__name__}")
    if res.cpu == res.gpu == res.memMB == -1:  # NULL_RESOURCE: "scheduler decides"
        return
    for attr in ("cpu", "gpu", "memMB"):
        value = getattr(res, attr)
        if not _is_int(value) or value < 0:
            raise SpecError(f"{where}.{attr}", f"must be an int >= 0, got {value!r}")
