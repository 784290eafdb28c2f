"""The Kubernetes backend (``kubernetes``) on kubernetes_asyncio.

Public names are re-exported by :mod:`asyncsched.schedulers.kubernetes_scheduler`
(TorchX's module path). Pure modules (``_render``, ``_state``) import no
client; the I/O modules (``_client``, ``_informer``, ``_logs``) import
``kubernetes_asyncio`` and aiohttp only when a scheduler first talks to a
server, so importing this package (and ``run_opts()``) works without the extra.
"""

from __future__ import annotations

__all__: list[str] = []
