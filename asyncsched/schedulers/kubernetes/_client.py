"""The one connection to the API server: config loading, rate limit, retries, errors.

Every request goes through :class:`KubeApi` over one long-lived
``kubernetes_asyncio`` ``ApiClient`` (its auth, TLS and connection pool),
asking for raw JSON: no model objects are built, so thousands of pods stay
cheap. Requests pass a client-side token bucket (``qps``/``burst``); a 429
is retried after its ``Retry-After``, a 5xx or a connection error with
jittered exponential backoff. Errors become asyncsched errors carrying the
server's message.

``kubernetes_asyncio`` is imported here (and by the other I/O modules) only
when a scheduler first talks to a server.

Example:
    >>> async def main() -> None:
    ...     api = KubeApi(await load_api_client(context="kind-kind"))
    ...     pods = await api.request("GET", "/api/v1/namespaces/default/pods")
    ...     await api.aclose()
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio

from asyncsched.errors import SchedulerError, SchedulerUnavailableError

if TYPE_CHECKING:
    import aiohttp

__all__ = [
    "BACKEND",
    "EXTRA_HINT",
    "KubeApi",
    "KubernetesApiError",
    "RateLimiter",
    "import_client",
    "load_api_client",
]

logger = logging.getLogger(__name__)

BACKEND = "kubernetes"
EXTRA_HINT = "pip install 'asyncsched[kubernetes]'"
_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
JSON_CT = "application/json"
MERGE_PATCH_CT = "application/merge-patch+json"


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


def import_client() -> Any:
    """Import ``kubernetes_asyncio`` or raise a clear error naming the extra."""
    try:
        import kubernetes_asyncio
    except ImportError as exc:
        raise SchedulerUnavailableError(
            BACKEND, f"{exc.name or 'kubernetes_asyncio'} is not installed", EXTRA_HINT
        ) from exc
    return kubernetes_asyncio


async def load_api_client(
    *, kubeconfig: str | None = None, context: str | None = None
) -> Any:
    """A new ``ApiClient``: in-cluster config first, then the kubeconfig.

    An explicit ``kubeconfig`` or ``context`` skips the in-cluster attempt.
    The kubeconfig is ``kubeconfig``, else ``$KUBECONFIG``, else
    ``~/.kube/config``.

    Raises:
        SchedulerUnavailableError: the extra is missing or no config is usable.
    """
    k8s = import_client()
    from kubernetes_asyncio.config import ConfigException

    configuration = k8s.client.Configuration()
    if kubeconfig is None and context is None:
        try:
            # sync, reads two small files: keep it off the event loop
            await anyio.to_thread.run_sync(
                lambda: k8s.config.load_incluster_config(
                    client_configuration=configuration
                )
            )
            return k8s.client.ApiClient(configuration=configuration)
        except ConfigException:
            pass
    path = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
    try:
        await k8s.config.load_kube_config(
            config_file=path,
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
    except (ConfigException, OSError) as exc:
        raise SchedulerUnavailableError(
            BACKEND,
            f"no usable Kubernetes config (not in a cluster; kubeconfig {path!r}"
            f"{f', context {context!r}' if context else ''}): {exc}",
            "set KUBECONFIG or the 'context' option",
        ) from exc
    return k8s.client.ApiClient(configuration=configuration)


class RateLimiter:
    """A token bucket: ``qps`` tokens per second, at most ``burst`` saved up.

    ``qps <= 0`` disables it.

    Example:
        >>> limiter = RateLimiter(qps=50, burst=100)
    """

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = max(burst, 1)
        self._tokens = float(self.burst)
        self._stamp = time.monotonic()
        self._lock = anyio.Lock()

    async def acquire(self) -> None:
        """Take one token, sleeping until one is available."""
        if self.qps <= 0:
            return
        async with self._lock:
            now = time.monotonic()
            self._tokens = min(
                self.burst, self._tokens + (now - self._stamp) * self.qps
            )
            self._stamp = now
            if self._tokens < 1:
                await anyio.sleep((1 - self._tokens) / self.qps)
                self._tokens = 1.0
                self._stamp = time.monotonic()
            self._tokens -= 1


class KubeApi:
    """JSON requests to the API server through one ``ApiClient``.

    Args:
        api_client: A ``kubernetes_asyncio.client.ApiClient``.
        qps: Client-side requests per second (``<= 0``: unlimited).
        burst: Requests allowed at once above ``qps``.
        max_retries: Retries of a 429, a 5xx or a connection error.
        backoff: First retry delay in seconds (doubles, jittered, capped at 10 s).
        owns_client: Close ``api_client`` in :meth:`aclose`.
    """

    def __init__(
        self,
        api_client: Any,
        *,
        qps: float = 50.0,
        burst: int = 100,
        max_retries: int = 5,
        backoff: float = 0.2,
        owns_client: bool = True,
    ) -> None:
        self.client = api_client
        self.limiter = RateLimiter(qps, burst)
        self.max_retries = max_retries
        self.backoff = backoff
        self.owns_client = owns_client

    @property
    def host(self) -> str:
        """The API server URL."""
        return str(self.client.configuration.host)

    async def aclose(self) -> None:
        """Close the client if this object owns it."""
        if self.owns_client:
            await self.client.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, object] | None = None,
        body: object = None,
        content_type: str = JSON_CT,
        retry: bool = True,
        map_denied: bool = True,
    ) -> Any:
        """Send one request and return the decoded JSON answer.

        Raises:
            KubernetesApiError: the server refused it (after retries); also a
                401/403 when not ``map_denied``.
            SchedulerUnavailableError: the server cannot be reached, or it
                denied access (401/403).
        """
        attempt = 0
        while True:
            try:
                resp = await self._send(method, path, query, body, content_type, None)
                try:
                    if resp.status >= 400:
                        raise await _error(resp, method, path)
                    data = await resp.read()
                finally:
                    resp.release()
                return json.loads(data) if data else None
            except KubernetesApiError as exc:
                exc.attempts = attempt + 1
                if not retry or exc.status not in _RETRY_STATUSES:
                    raise (_map_denied(exc) if map_denied else exc) from None
                if attempt >= self.max_retries:
                    raise
                delay = exc.retry_after
                if delay is None:
                    delay = self._delay(attempt)
            except _connection_errors() as exc:
                if not retry or attempt >= self.max_retries:
                    raise SchedulerUnavailableError(
                        BACKEND,
                        f"cannot reach the API server at {self.host}: {exc!r}",
                        "check the kubeconfig/context and that the server is up",
                    ) from exc
                delay = self._delay(attempt)
            attempt += 1
            logger.debug("retrying %s %s in %.2fs", method, path, delay)
            await anyio.sleep(delay)

    @asynccontextmanager
    async def stream(
        self,
        path: str,
        *,
        query: Mapping[str, object] | None = None,
        read_timeout: float | None = None,
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """Open a streaming GET (watch, followed log); released on exit.

        Not retried: the caller resumes from its own position.

        Raises:
            KubernetesApiError: the server answered with an error status.
        """
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=None, sock_read=read_timeout)
        resp = await self._send("GET", path, query, None, JSON_CT, timeout)
        try:
            if resp.status >= 400:
                raise _map_denied(await _error(resp, "GET", path))
            yield resp
        finally:
            resp.release()
            resp.close()

    def _delay(self, attempt: int) -> float:
        delay: float = min(self.backoff * 2**attempt, 10.0)
        return delay * random.uniform(0.5, 1.0)

    async def _send(
        self,
        method: str,
        path: str,
        query: Mapping[str, object] | None,
        body: object,
        content_type: str,
        request_timeout: object,
    ) -> aiohttp.ClientResponse:
        await self.limiter.acquire()
        params = [
            (k, _query_value(v)) for k, v in (query or {}).items() if v is not None
        ]
        resp: aiohttp.ClientResponse = await self.client.call_api(
            path,
            method,
            query_params=params,
            header_params={"Accept": JSON_CT, "Content-Type": content_type},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
            _request_timeout=request_timeout,
        )
        return resp


def _query_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(math.ceil(value))
    return str(value)


def _connection_errors() -> tuple[type[BaseException], ...]:
    import aiohttp

    return (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, TimeoutError)


async def _error(resp: aiohttp.ClientResponse, method: str, path: str) -> Exception:
    raw = await resp.read()
    reason, message = resp.reason or "", raw.decode("utf-8", "replace").strip()
    try:
        status = json.loads(raw)
    except ValueError:
        status = None
    if isinstance(status, dict):
        reason = str(status.get("reason") or reason)
        message = str(status.get("message") or message)
    retry_after = None
    header = resp.headers.get("Retry-After")
    if header is not None:
        try:
            retry_after = max(float(header), 0.0)
        except ValueError:
            retry_after = None
    exc = KubernetesApiError(method, path, resp.status, reason, message, retry_after)
    if isinstance(status, dict) and isinstance(status.get("details"), dict):
        exc.details = status["details"]
    return exc


def _map_denied(exc: Exception) -> Exception:
    if isinstance(exc, KubernetesApiError) and exc.status in (401, 403):
        return SchedulerUnavailableError(
            BACKEND,
            f"the API server denied {exc.method} {exc.path}: {exc.message}",
            "grant the RBAC Role in docs/backends/kubernetes.md",
        )
    return exc
