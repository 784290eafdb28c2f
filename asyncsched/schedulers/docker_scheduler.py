"""TorchX's module path for the Docker backend (``local_docker``).

The backend's public face is :mod:`asyncsched.schedulers.docker`; this module
re-exports it so code written for ``torchx.schedulers.docker_scheduler`` keeps
its imports. As there, :func:`has_docker` works without the ``docker`` extra
and every other name needs aiodocker, imported on first use; ``make_unique``
is an attribute of this module that tests may patch to pin app ids.

Example:
    >>> from asyncsched.schedulers.docker_scheduler import has_docker
    >>> if has_docker():
    ...     from asyncsched.schedulers.docker_scheduler import DockerScheduler
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from asyncsched.schedulers import docker as _backend
from asyncsched.schedulers.shared.ids import make_unique  # noqa: F401 - patchable

if TYPE_CHECKING:
    from asyncsched.schedulers.docker import *

__all__ = _backend.__all__


def __getattr__(name: str) -> Any:
    if name in __all__:
        value = getattr(_backend, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
