"""TorchX's module path for the Docker backend (``local_docker``).

The implementation lives in :mod:`asyncsched.schedulers.docker`; this module
re-exports it so code written for ``torchx.schedulers.docker_scheduler`` keeps
its imports. Importing it needs the ``docker`` extra (aiodocker).

Example:
    >>> from asyncsched.schedulers.docker_scheduler import DockerScheduler
"""

from __future__ import annotations

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
]
