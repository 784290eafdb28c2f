"""The one place aiodocker/aiohttp errors become asyncsched errors.

* daemon unreachable, socket missing or not permitted ->
  :class:`~asyncsched.errors.SchedulerUnavailableError` with a hint;
* an API error while submitting -> :class:`~asyncsched.errors.SubmitError`;
* any other API error -> :class:`~asyncsched.errors.SchedulerError`.

The original exception is chained (``__cause__``). Cancellation is never
caught.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import aiohttp
from aiodocker.exceptions import DockerError

from asyncsched.errors import (
    AsyncschedError,
    SchedulerError,
    SchedulerUnavailableError,
    SubmitError,
)

__all__ = [
    "BACKEND",
    "DOCKER_ERRORS",
    "docker_errors",
    "is_conflict",
    "is_not_found",
    "map_error",
]

BACKEND = "local_docker"

#: What the Docker client can raise besides asyncsched's own errors.
DOCKER_ERRORS: tuple[type[Exception], ...] = (DockerError, aiohttp.ClientError, OSError)

_HINT_START = (
    "start the daemon (e.g. `sudo systemctl start docker` or `dockerd &`) "
    "or point DOCKER_HOST at one"
)
_HINT_PERMISSION = (
    "add the user to the 'docker' group (then log in again), run as root, "
    "or point DOCKER_HOST at a daemon you may use"
)


def is_not_found(exc: BaseException | None) -> bool:
    """True for a Docker 404 (no such container, image, network...)."""
    return isinstance(exc, DockerError) and exc.status == 404


def is_conflict(exc: BaseException | None) -> bool:
    """True for a Docker 409 (name in use, already exists...)."""
    return isinstance(exc, DockerError) and exc.status == 409


def map_error(
    exc: Exception, action: str, host: str, *, submit: bool = False
) -> AsyncschedError:
    """Translate ``exc`` raised while doing ``action`` against ``host``."""
    if isinstance(exc, AsyncschedError):
        return exc
    text = str(getattr(exc, "message", "") or exc)
    if isinstance(exc, TimeoutError):  # aiohttp's connect/read timeouts included
        return SchedulerUnavailableError(
            BACKEND,
            f"the Docker daemon at {host} did not answer in time while trying to"
            f" {action}",
            "is dockerd hung or overloaded? (connect_timeout/read_timeout of"
            " DockerScheduler set the bounds)",
        )
    unreachable = isinstance(exc, DockerError) and exc.status == 900
    if unreachable or isinstance(exc, aiohttp.ClientConnectionError | OSError):
        if "Permission denied" in text or isinstance(exc, PermissionError):
            return SchedulerUnavailableError(
                BACKEND,
                f"permission denied on the Docker socket {host} while trying to {action}",
                _HINT_PERMISSION,
            )
        return SchedulerUnavailableError(
            BACKEND,
            f"cannot connect to the Docker daemon at {host} while trying to {action}"
            f" ({text})",
            _HINT_START,
        )
    cls = SubmitError if submit else SchedulerError
    if isinstance(exc, DockerError):
        return cls(f"failed to {action}: Docker says [{exc.status}] {exc.message}")
    return cls(f"failed to {action}: {type(exc).__name__}: {text}")


@contextmanager
def docker_errors(action: str, host: str, *, submit: bool = False) -> Iterator[None]:
    """Map Docker, aiohttp and socket errors raised inside the block."""
    try:
        yield
    except DOCKER_ERRORS as exc:
        raise map_error(exc, action, host, submit=submit) from exc
