"""The Docker backend (``local_docker``) on aiodocker.

This package is the backend's public face; :mod:`asyncsched.schedulers.docker_scheduler`
(TorchX's module path) re-exports it. :func:`has_docker` works without the
``docker`` extra (it then returns False); every other name needs aiodocker and
is imported on first use, so importing one without the extra raises
:class:`ImportError`. Private modules: ``_scheduler`` (the ``Scheduler``
class), ``_render`` (AppDef into container bodies, pure), ``_state``
(containers into app states, pure), ``_client``, ``_events`` and ``_logs``
(daemon calls, event stream, log streams), ``_stop`` (stops whose grace the
daemon runs) and ``_probe`` (``has_docker``).
Image build/push and the error mapping are shared with other backends
(:mod:`asyncsched.schedulers.shared`).

Example:
    >>> from asyncsched.schedulers.docker import has_docker
    >>> if has_docker():
    ...     from asyncsched.schedulers.docker import DockerScheduler
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from asyncsched.schedulers.docker._probe import has_docker

if TYPE_CHECKING:
    from asyncsched.schedulers.docker._render import DockerContainer, DockerJob
    from asyncsched.schedulers.docker._scheduler import (
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
