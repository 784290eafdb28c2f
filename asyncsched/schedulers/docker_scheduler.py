"""TorchX's module path for the Docker backend (``local_docker``).

The implementation lives in :mod:`asyncsched.schedulers.docker`; this module
re-exports it so code written for ``torchx.schedulers.docker_scheduler`` keeps
its imports. :func:`has_docker` works without the ``docker`` extra (it then
returns False); every other name needs aiodocker and is imported on first use,
so importing them without the extra raises :class:`ImportError`.

Example:
    >>> from asyncsched.schedulers.docker_scheduler import has_docker
    >>> if has_docker():
    ...     from asyncsched.schedulers.docker_scheduler import DockerScheduler
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from asyncsched.schedulers.docker._probe import has_docker

if TYPE_CHECKING:
    from asyncsched.schedulers.docker._scheduler import (
        DockerContainer,
        DockerJob,
        DockerOpts,
        DockerScheduler,
        create_scheduler,
    )

__all__ = [
    "DockerContainer",
    "DockerJob",
    "DockerOpts",
    "DockerScheduler",
    "create_scheduler",
    "has_docker",
]

_LAZY = frozenset(__all__) - {"has_docker"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module = importlib.import_module("asyncsched.schedulers.docker._scheduler")
        value = getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
