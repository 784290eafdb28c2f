"""The exceptions and warnings asyncsched raises.

Every exception derives from :class:`AsyncschedError`, and also from the builtin
that describes it best, so ``except ValueError`` and friends keep working::

    AsyncschedError(Exception)                        root of everything we raise
    ├── SpecError(ValueError)                         invalid AppDef/Role/Resource; .field
    │   ├── AppFileError                              invalid AppDef file/dict; .path, .field
    │   └── InvalidMountError(KeyError)               a mount string parse_mounts cannot read
    ├── InvalidRunConfigException(ValueError)         bad scheduler run config; .cfg_key
    ├── InvalidArgumentError(ValueError)              a call got an argument it cannot use
    │   ├── ArgumentTypeError(TypeError)              an argument of the wrong type
    │   └── UnknownReplicaError(LookupError)          log_iter etc. on a role/replica the app lacks
    ├── MalformedAppHandleException(ValueError)       not "scheduler://session/app_id"
    ├── UnknownSchedulerException(KeyError)           no scheduler registered by that name
    ├── UnknownAppException(LookupError)              the scheduler does not know the app
    ├── UnknownNamedResourceError(KeyError)           no named resource by that name
    ├── AppStatusError(RuntimeError)                  raise_for_status() on a non-SUCCEEDED app
    ├── SchedulerUnavailableError(RuntimeError)       missing extra, daemon unreachable; .hint
    ├── UnsafeStateDirError(RuntimeError)             state dir not private to the user; .path
    ├── UnsupportedOperationError(NotImplementedError)  the backend cannot do that (logs, workspaces)
    ├── SchedulerError(RuntimeError)                  the backend failed to do what was asked
    │   └── SubmitError                               an app could not be (fully) submitted
    │       ├── AppCacheFullError(IndexError)         (compatibility; no longer raised by local)
    │       └── RunManyError(ExceptionGroup)          run_many: some apps failed; .handles
    ├── SchedulerClosedError(RuntimeError)            scheduler used after aclose()
    └── WaitTimeoutError(TimeoutError)                wait(timeout=...) ran out; .app_id, .timeout

    AsyncschedWarning(UserWarning)
    ├── BlockingCallWarning                           sync facade called inside a running loop
└── ServerWarning                                 the cluster warned about a request (Kubernetes)

The names ending in ``Exception`` are TorchX's, kept so that code written for
TorchX can catch the same names.

Example:
    >>> from asyncsched.errors import AsyncschedError, SpecError
    >>> try:
    ...     raise SpecError("num_replicas", "must be >= 1, got 0")
    ... except ValueError as exc:
    ...     print(exc)
    num_replicas: must be >= 1, got 0
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Self

if TYPE_CHECKING:
    from collections.abc import Sequence

    from asyncsched.specs import AppStatus

__all__ = [
    "AppCacheFullError",
    "AppFileError",
    "AppStatusError",
    "ArgumentTypeError",
    "AsyncschedError",
    "AsyncschedWarning",
    "BlockingCallWarning",
    "InvalidArgumentError",
    "InvalidMountError",
    "InvalidRunConfigException",
    "MalformedAppHandleException",
    "RunManyError",
    "SchedulerClosedError",
    "SchedulerError",
    "SchedulerUnavailableError",
    "ServerWarning",
    "SpecError",
    "SubmitError",
    "UnknownAppException",
    "UnknownNamedResourceError",
    "UnknownReplicaError",
    "UnknownSchedulerException",
    "UnsafeStateDirError",
    "UnsupportedOperationError",
    "WaitTimeoutError",
]


class AsyncschedError(Exception):
    """Root of every exception raised by asyncsched."""

    _init_args: ClassVar[tuple[str, ...]] = ()
    """The attributes that rebuild the error as ``type(e)(*values)`` when it is
    unpickled (in another process); empty: the exception's own ``args``."""

    def __reduce__(self) -> str | tuple[Any, ...]:
        if not self._init_args:
            return super().__reduce__()
        return (type(self), tuple(getattr(self, name) for name in self._init_args))


class SpecError(AsyncschedError, ValueError):
    """An AppDef, Role or Resource is invalid; raised before any I/O.

    ``field`` names the offending field, e.g. ``"roles[0].num_replicas"``.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message

    _init_args: ClassVar[tuple[str, ...]] = ("field", "message")


class AppFileError(SpecError):
    """An AppDef file (or its dict form) is unreadable or invalid.

    ``path`` names the file (``"<app>"`` for a dict), ``field`` the bad field.
    """

    def __init__(self, path: str, field: str, message: str) -> None:
        where = f"{path}: {field}" if field else path
        Exception.__init__(self, f"{where}: {message}")
        self.path = path
        self.field = field
        self.message = message

    _init_args = ("path", "field", "message")


class InvalidMountError(SpecError, KeyError):
    """``parse_mounts`` cannot read a mount option (field ``mounts``).

    Also a ``KeyError``, which TorchX raises for these inputs; when a
    required key is missing, ``args`` is ``(key,)`` as TorchX's KeyError.
    """

    def __init__(self, message: str, missing_key: str | None = None) -> None:
        super().__init__("mounts", message)
        self.missing_key = missing_key
        if missing_key is not None:
            self.args = (missing_key,)

    def __str__(self) -> str:  # KeyError would quote the message
        return f"{self.field}: {self.message}"

    _init_args = ("message", "missing_key")


class InvalidRunConfigException(AsyncschedError, ValueError):
    """A scheduler run config is missing a required option or has a wrong type."""

    def __init__(self, invalid_reason: str, cfg_key: str, cfg: object = None) -> None:
        given = cfg if cfg else "<EMPTY>"
        super().__init__(f"{invalid_reason}. Given: {given}")
        self.cfg_key = cfg_key
        self._reason = invalid_reason
        self._cfg = cfg

    _init_args = ("_reason", "cfg_key", "_cfg")


class InvalidArgumentError(AsyncschedError, ValueError):
    """A call got an argument it cannot use: an invalid ``regex``, an unknown
    log stream, a non-positive limit, a dry-run info without a scheduler..."""


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument has the wrong type (also a ``TypeError``)."""


class UnknownReplicaError(InvalidArgumentError, LookupError):
    """The app exists but has no such role, or no replica with that index."""

    def __init__(self, app_id: str, role_name: str, k: int, roles: list[str]) -> None:
        super().__init__(
            f"app {app_id} has no replica {k} of role {role_name!r}"
            f" (roles: {sorted(roles)})"
        )
        self.app_id = app_id
        self.role_name = role_name
        self.k = k
        self.roles = sorted(roles)

    _init_args = ("app_id", "role_name", "k", "roles")


class MalformedAppHandleException(AsyncschedError, ValueError):
    """An app handle is not of the form ``scheduler://session/app_id``."""

    def __init__(self, app_handle: str) -> None:
        super().__init__(
            f"{app_handle!r} is not of the form: <scheduler_backend>://<session_name>/<app_id>"
        )
        self.app_handle = app_handle

    _init_args = ("app_handle",)


class UnknownSchedulerException(AsyncschedError, KeyError):
    """No scheduler is registered under the requested name."""

    def __init__(self, scheduler: str, available: list[str] | None = None) -> None:
        self.scheduler = scheduler
        self.available = sorted(available or [])
        msg = f"Undefined scheduler backend: {scheduler}."
        if self.available:
            msg += f" Use one of: {self.available}"
        super().__init__(msg)

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])

    _init_args = ("scheduler", "available")


class UnknownAppException(AsyncschedError, LookupError):
    """The scheduler does not know the app (never existed, or purged)."""

    def __init__(self, app_handle: str) -> None:
        super().__init__(
            f"Unknown app = {app_handle}. Did you misspell it or was it purged?"
        )
        self.app_handle = app_handle

    _init_args = ("app_handle",)


class UnknownNamedResourceError(AsyncschedError, KeyError):
    """No named resource (``named_resources[name]``, ``resource(h=name)``) by that name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class UnsupportedOperationError(AsyncschedError, NotImplementedError):
    """The backend cannot do that at all (logs, tailing, workspaces...)."""


class AppStatusError(AsyncschedError, RuntimeError):
    """Raised by :meth:`AppStatus.raise_for_status` for an app that did not succeed."""

    def __init__(self, status: AppStatus, *args: object) -> None:
        super().__init__(*args)
        self.status = status

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.status, *self.args))


class SchedulerUnavailableError(AsyncschedError, RuntimeError):
    """A scheduler cannot be used here: missing extra, daemon down, no permission.

    ``hint`` says what fixes it, e.g. ``pip install 'asyncsched[docker]'``.
    """

    def __init__(self, scheduler: str, reason: str, hint: str = "") -> None:
        msg = f"scheduler {scheduler!r} is unavailable: {reason}"
        if hint:
            msg += f" ({hint})"
        super().__init__(msg)
        self.scheduler = scheduler
        self.reason = reason
        self.hint = hint

    _init_args = ("scheduler", "reason", "hint")


class UnsafeStateDirError(AsyncschedError, RuntimeError):
    """The state dir (or a folder asyncsched keeps in it) is owned by another
    user or writable by others, so its records cannot be trusted: refused
    before anything is read, written or started.

    ``reason`` names the owner and the mode, ``hint`` how to fix it.
    """

    def __init__(self, path: str, reason: str, hint: str) -> None:
        super().__init__(f"unsafe state dir {path}: {reason}; {hint}")
        self.path = path
        self.reason = reason
        self.hint = hint

    _init_args = ("path", "reason", "hint")


class SchedulerError(AsyncschedError, RuntimeError):
    """A backend failed to do what was asked (API error, spawn failure...)."""


class SubmitError(SchedulerError):
    """An app could not be submitted; nothing of it was left running."""


class AppCacheFullError(SubmitError, IndexError):
    """TorchX's "local app cache full of unfinished apps" (an ``IndexError``).

    Kept for compatibility: the local scheduler no longer raises it (a submit
    waits for room under ``max_running_replicas`` instead).
    """


class RunManyError(SubmitError, ExceptionGroup[Exception]):
    """``Runner.run_many``: some apps could not be submitted; no handle is lost.

    The group's ``exceptions`` are the submission errors (in the order of the
    apps). ``handles[i]`` is the handle of the i-th app, or None when it was
    not submitted; :attr:`started` lists the submitted ones. ``cancelled`` is
    True when those were cancelled (``cancel_on_error=True``).

    Example:
        >>> err = RunManyError("1 of 2 apps failed", [OSError("x")], ["h", None])
        >>> err.started, isinstance(err, ExceptionGroup)
        (['h'], True)
    """

    handles: list[str | None]
    cancelled: bool

    def __new__(
        cls,
        message: str,
        exceptions: Sequence[Exception],
        handles: Sequence[str | None] = (),
        cancelled: bool = False,
    ) -> Self:
        self = ExceptionGroup.__new__(cls, message, exceptions)
        self.handles = list(handles)
        self.cancelled = cancelled
        return self

    def __init__(
        self,
        message: str,
        exceptions: Sequence[Exception],
        handles: Sequence[str | None] = (),
        cancelled: bool = False,
    ) -> None:
        ExceptionGroup.__init__(self, message, exceptions)

    @property
    def started(self) -> list[str]:
        """The handles of the apps that were submitted."""
        return [h for h in self.handles if h is not None]

    def derive(self, excs: Sequence[Exception]) -> RunManyError:  # type: ignore[override]
        return RunManyError(self.message, excs, self.handles, self.cancelled)

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            type(self),
            (self.message, list(self.exceptions), self.handles, self.cancelled),
        )


class SchedulerClosedError(AsyncschedError, RuntimeError):
    """The scheduler (or facade) was used after it was closed."""


class WaitTimeoutError(AsyncschedError, TimeoutError):
    """``wait(app_id, timeout=...)`` ran out before the app was over.

    ``detail`` says more, e.g. that the app is cancelled but replicas still
    stop (``wait`` returns once they have).
    """

    def __init__(self, app_id: str, timeout: float, detail: str = "") -> None:
        text = f"app {app_id!r} did not reach a terminal state within {timeout}s"
        super().__init__(f"{text} ({detail})" if detail else text)
        self.app_id = app_id
        self.timeout = timeout
        self.detail = detail

    _init_args = ("app_id", "timeout", "detail")


class AsyncschedWarning(UserWarning):
    """Root of the warnings asyncsched emits."""


class BlockingCallWarning(AsyncschedWarning):
    """A blocking (sync facade) call was made from a thread running an event loop."""


class ServerWarning(AsyncschedWarning):
    """The scheduler's server warned about a request it carried out.

    Kubernetes sends ``Warning`` response headers: an unknown field it
    dropped from a manifest, a deprecated API, a Pod Security level the pod
    would violate. Turn them into errors with
    ``warnings.simplefilter("error", ServerWarning)``.
    """
