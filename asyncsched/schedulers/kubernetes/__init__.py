"""The Kubernetes backend (``kubernetes``) on kubernetes_asyncio.

This package is the backend's public face;
:mod:`asyncsched.schedulers.kubernetes_scheduler` (TorchX's module path)
re-exports it. Pure modules (``_render``, ``_state``) import no client; the
I/O modules load ``kubernetes_asyncio`` and aiohttp through ``_gate`` only
when a scheduler first talks to a server, so importing this package (and
``run_opts()``) works without the extra.

Example:
    >>> from asyncsched.schedulers.kubernetes import KubernetesScheduler
    >>> KubernetesScheduler("demo").run_opts().get("queue") is not None
    True
"""

from __future__ import annotations

from asyncsched.schedulers.kubernetes._gate import KubernetesApiError
from asyncsched.schedulers.kubernetes._job_names import (
    normalize_str,
    sanitize_label_value,
)
from asyncsched.schedulers.kubernetes._render import KubernetesJob
from asyncsched.schedulers.kubernetes._scheduler import (
    KubernetesOpts,
    KubernetesScheduler,
    create_scheduler,
)

__all__ = [
    "KubernetesApiError",
    "KubernetesJob",
    "KubernetesOpts",
    "KubernetesScheduler",
    "create_scheduler",
    "normalize_str",
    "sanitize_label_value",
]
