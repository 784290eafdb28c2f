"""The ``kubernetes`` extra's import gate and the backend's error type.

A leaf: it imports nothing else of this package, so every other module may
import it. ``kubernetes_asyncio`` (and the aiohttp it runs on) are loaded
here, by name, the first time a scheduler talks to a server: importing the
package, and ``run_opts()``, work without the extra.

Example:
    >>> str(KubernetesApiError("GET", "/x", 404, "NotFound", "x not found"))
    'GET /x: 404 NotFound: x not found'
    >>> EXTRA_HINT
    "pip install 'asyncsched[kubernetes]'"
"""

from __future__ import annotations

import importlib
from typing import Any

import anyio

from asyncsched.errors import SchedulerError, SchedulerUnavailableError

__all__ = (
    "BACKEND",
    "EXTRA_HINT",
    "KubernetesApiError",
    "aiohttp_module",
    "forbidden_cause",
    "import_client",
    "import_client_off_loop",
)

BACKEND = "kubernetes"
EXTRA_HINT = "pip install 'asyncsched[kubernetes]'"


class KubernetesApiError(SchedulerError):
    """The API server refused a request; ``status``, ``reason`` and its ``message``.

    Example:
        >>> str(KubernetesApiError("GET", "/x", 404, "NotFound", "x not found"))
        'GET /x: 404 NotFound: x not found'
    """

    def __init__(
        self,
        method: str,
        path: str,
        status: int,
        reason: str,
        message: str,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{method} {path}: {status} {reason}: {message}")
        self.method = method
        self.path = path
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        #: ``details.causes`` of the server's ``Status`` (``type``/``message``)
        self.causes: list[dict[str, Any]] = []
        #: how many times the request was sent (more than 1: it was retried)
        self.attempts = 1
        #: the ``details`` of the server's ``Status`` (``kind``, ``name``,
        #: ``causes``...), empty when it sent none
        self.details: dict[str, Any] = {}

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            type(self),
            (self.method, self.path, self.status, self.reason, self.message),
        )


def forbidden_cause(exc: KubernetesApiError) -> tuple[str, str]:
    """What a 403 means, read from its ``Status``, and what to do about it.

    A 403 is not always RBAC: a ResourceQuota, a namespace being deleted, an
    admission webhook or a Pod Security level answer it too.

    Example:
        >>> forbidden_cause(KubernetesApiError("POST", "/p", 403, "Forbidden",
        ...     'pods "a" is forbidden: exceeded quota: q'))[0]
        'quota exceeded'
    """
    message = exc.message.lower()
    causes = {str(c.get("type") or "") for c in exc.causes}
    if "namespaceterminating" in {c.lower() for c in causes} or (
        "being terminated" in message
    ):
        return (
            "the namespace is being terminated",
            "wait for it to be deleted and recreate it, or use another namespace",
        )
    if "exceeded quota" in message:
        return (
            "quota exceeded",
            "free resources in the namespace or ask for a larger ResourceQuota",
        )
    if "admission webhook" in message or "denied the request" in message:
        return (
            "refused by an admission webhook (a policy)",
            "change the manifest (or the role's pod overlay) to meet the policy",
        )
    if "podsecurity" in message:
        return (
            "refused by the namespace's Pod Security level",
            "meet the Pod Security Standard, or run in another namespace",
        )
    return ("RBAC", "grant the RBAC Role in docs/backends/kubernetes.md")


#: ``kubernetes_asyncio`` once fully imported (a module still being imported by
#: another thread is already in ``sys.modules``: that is no sign it is ready)
_client_module: Any = None


def import_client() -> Any:
    """Import ``kubernetes_asyncio`` or raise a clear error naming the extra."""
    global _client_module
    if _client_module is None:
        try:
            # __import__, as an import statement does: it raises the
            # ``import`` audit event, which tools that watch imports rely on
            module = __import__("kubernetes_asyncio")
        except ImportError as exc:
            raise SchedulerUnavailableError(
                BACKEND,
                f"{exc.name or 'kubernetes_asyncio'} is not installed",
                EXTRA_HINT,
            ) from exc
        _client_module = module
    return _client_module


async def import_client_off_loop() -> Any:
    """:func:`import_client` for async code: the first import runs in a worker thread.

    Importing ``kubernetes_asyncio`` takes about 0.6 s of CPU (its thousands
    of model classes); in the event loop's thread that is a 0.6 s stall of
    every other task the first time a Kubernetes scheduler is used.
    Concurrent first callers each wait in a worker thread (Python's import
    lock makes them share the one import); later calls return at once.
    """
    if _client_module is not None:
        return _client_module
    return await anyio.to_thread.run_sync(import_client)


def aiohttp_module() -> Any:
    """aiohttp, which ``kubernetes_asyncio`` runs on (imported with it).

    Called once a client exists, so the import is a dictionary look-up.
    """
    import_client()
    return importlib.import_module("aiohttp")
