"""The Docker backend (``local_docker``) on aiodocker.

This package is the backend's public face; :mod:`asyncsched.schedulers.docker_scheduler`
(TorchX's module path) re-exports it. :func:`has_docker` works without the
``docker`` extra (it then returns False); every other name needs aiodocker and
is imported on first use, so importing one without the extra raises
:class:`ImportError`. Private modules: ``_scheduler`` (the ``Scheduler``
class: hook wiring), ``_opts`` (run options), ``_render`` (AppDef into
container bodies, pure), ``_state`` (containers into app states, pure),
``_connection`` (the client and its API slots), ``_submit`` (create and
start, all or nothing; removal), ``_lookup`` (describe/list from the index or
the daemon), ``_control`` (cancel, fail-fast), ``_stop`` (stops whose grace
the daemon runs), ``_images`` (workspace images), ``_client``, ``_events``,
``_event_source``, ``_event_cursor`` and ``_logs`` (daemon calls, the index's
event stream, ``events()``, its cursors, log streams), ``_reasons`` and
``_probe`` (``has_docker``).
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
    from asyncsched.schedulers.docker._opts import DockerOpts
    from asyncsched.schedulers.docker._render import DockerContainer, DockerJob
    from asyncsched.schedulers.docker._scheduler import (
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

#: where each name needing aiodocker lives
_LAZY = {
    "DockerContainer": "_render",
    "DockerJob": "_render",
    "DockerOpts": "_opts",
    "DockerScheduler": "_scheduler",
    "create_scheduler": "_scheduler",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module = importlib.import_module(f"{__name__}.{_LAZY[name]}")
        value = getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
