"""The Docker backend (``local_docker``) on aiodocker.

Public names are re-exported by :mod:`asyncsched.schedulers.docker_scheduler`
(TorchX's module path). Pure modules (``_render``, ``_state``, ``_workspace``
tar building) import no Docker client; the I/O modules (``_client``,
``_events``, ``_logs``, ``_errors``) and ``_scheduler`` import aiodocker.
"""

from __future__ import annotations

__all__: list[str] = []
