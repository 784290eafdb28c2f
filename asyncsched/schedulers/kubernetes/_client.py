"""The one connection to the API server: config loading, rate limit, retries, errors.

Every request goes through :class:`KubeApi` over one long-lived
``kubernetes_asyncio`` ``ApiClient`` (its auth, TLS and connection pool),
asking for raw JSON: no model objects are built, so thousands of pods stay
cheap. Requests are paced by an :class:`AdaptivePacer` (:mod:`._pacing`):
the rate starts at ``qps``, rises while the server accepts, up to the
``max_qps`` safety net, and halves when it throttles. A throttled request
(a 429, from API Priority and Fairness or the max-in-flight filter, or a
503 naming a ``Retry-After``) is sent again after its ``Retry-After``;
a 5xx or a connection error with jittered exponential backoff. Errors
become asyncsched errors carrying the server's message; ``Warning``
headers become ``ServerWarning`` warnings.

``kubernetes_asyncio`` and aiohttp are loaded through :mod:`._gate` only
when a scheduler first talks to a server; the connection itself is made by
:mod:`._config`.

Example:
    >>> async def main() -> None:
    ...     api = KubeApi((await connect(context="kind-kind")).client)
    ...     pods = await api.request("GET", "/api/v1/namespaces/default/pods")
    ...     await api.aclose()
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from asyncsched.errors import SchedulerUnavailableError
from asyncsched.schedulers.kubernetes._credentials import Credentials
from asyncsched.schedulers.kubernetes._gate import (
    BACKEND,
    KubernetesApiError,
    aiohttp_module,
    forbidden_cause,
)
from asyncsched.schedulers.kubernetes._names import check_path
from asyncsched.schedulers.kubernetes._pacing import (
    DEFAULT_MAX_HOLD,
    DEFAULT_MAX_QPS,
    MAX_THROTTLED,
    is_throttle,
    make_pacer,
    throttled_error,
)
from asyncsched.schedulers.kubernetes._streams import stream_client
from asyncsched.schedulers.kubernetes._warnings import report_warnings

if TYPE_CHECKING:
    import aiohttp

__all__ = (
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_REQUEST_TIMEOUT",
    "JSON_CT",
    "KubeApi",
    "KubernetesApiError",
    "MERGE_PATCH_CT",
    "RequestLimits",
    "denied_error",
)

logger = logging.getLogger(__name__)

_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
JSON_CT = "application/json"
#: seconds to open a connection to the API server
DEFAULT_CONNECT_TIMEOUT = 10.0
#: seconds a non-streaming request may take in all (retries included)
DEFAULT_REQUEST_TIMEOUT = 60.0
MERGE_PATCH_CT = "application/merge-patch+json"


@dataclass(frozen=True)
class RequestLimits:
    """How fast, how often again and how long a :class:`KubeApi` asks.

    (The scheduler's :class:`~._connector.ConnectionSettings` extends it.)

    Attributes:
        qps: Requests per second at first; the rate then follows the server
            (``<= 0``: no client-side pacing at all).
        burst: Requests allowed at once above the rate.
        max_qps: The client-side ceiling the rate never passes (the safety
            net; ``max_qps=qps`` keeps a fixed ``qps`` that only drops when
            the server throttles).
        max_hold: Longest ``Retry-After`` that holds every request.
        max_retries: Retries of a 5xx or a connection error.
        connect_timeout: Seconds to open a connection (every request).
        request_timeout: Seconds a non-streaming request may take in all,
            retries of timeouts and connection errors included.

    Example:
        >>> RequestLimits(qps=5, max_qps=5).burst
        100
    """

    qps: float = 50.0
    burst: int = 100
    max_qps: float = DEFAULT_MAX_QPS
    max_hold: float = DEFAULT_MAX_HOLD
    max_retries: int = 5
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT


class KubeApi:
    """JSON requests to the API server through one ``ApiClient``.

    Args:
        api_client: A ``kubernetes_asyncio.client.ApiClient``.
        limits: Pacing, retries and timeouts (:class:`RequestLimits`).
        max_throttled: Times one request may be throttled (429, or 503 with a
            ``Retry-After``) and sent again; then
            :class:`~asyncsched.errors.SchedulerUnavailableError`.
        backoff: First retry delay in seconds (doubles, jittered, capped at 10 s).
        owns_client: Close ``api_client`` in :meth:`aclose`.
        credentials: Refreshes the token; a 401 refreshes it once and the
            request is sent again.
    """

    def __init__(
        self,
        api_client: Any,
        limits: RequestLimits | None = None,
        *,
        max_throttled: int = MAX_THROTTLED,
        backoff: float = 0.2,
        owns_client: bool = True,
        credentials: Credentials | None = None,
    ) -> None:
        limits = limits or RequestLimits()
        self.client = api_client
        self.credentials = credentials
        self.connect_timeout = limits.connect_timeout
        self.request_timeout = limits.request_timeout
        #: the adaptive rate (None: ``qps <= 0``, unpaced)
        self.pacer = make_pacer(
            limits.qps, limits.burst, limits.max_qps, limits.max_hold
        )
        self.max_retries = limits.max_retries
        self.max_throttled = max_throttled
        self.backoff = backoff
        self.owns_client = owns_client
        #: streams (watches, followed logs) use a pool of their own (_streams.py)
        self.stream_client: Any = None
        self._stream_lock = anyio.Lock()

    @property
    def host(self) -> str:
        """The API server URL."""
        return str(self.client.configuration.host)

    async def aclose(self) -> None:
        """Close the client if this object owns it (and the stream client)."""
        streams, self.stream_client = self.stream_client, None
        if streams is not None:
            await streams.close()
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
            SchedulerUnavailableError: the server cannot be reached or did not
                answer within ``request_timeout``, or it denied access
                (401/403).
            InvalidArgumentError: ``path`` is not plain segments (``..``, a
                ``?``, a ``%``...); nothing is sent.
        """
        http = aiohttp_module()
        check_path(method, path)
        attempt = throttles = 0
        refreshed = False
        started: float | None = None
        paused = 0.0  # seconds queued by the pacer or told to wait by a throttle
        while True:
            asked = time.monotonic()
            sent_at = await self._acquire()
            now = time.monotonic()
            if started is None:
                started = now
            else:
                paused += now - asked
            deadline = started + self.request_timeout + paused
            left = max(deadline - now, 0.001)
            timeout = http.ClientTimeout(
                total=left, connect=min(self.connect_timeout, left)
            )
            try:
                resp = await self._send(
                    method, path, query, body, content_type, timeout
                )
                try:
                    if resp.status >= 400:
                        raise await _error(resp, method, path)
                    data = await resp.read()
                    report_warnings(resp.headers.getall("Warning", []), method, path)
                finally:
                    resp.release()
                self._accepted()
                return json.loads(data) if data else None
            except KubernetesApiError as exc:
                exc.attempts = attempt + throttles + 1
                if is_throttle(exc.status, exc.retry_after):
                    if self.pacer is not None:
                        self.pacer.throttled(exc.retry_after, sent_at=sent_at)
                    if not retry:
                        raise
                    if throttles >= self.max_throttled:
                        raise throttled_error(exc, self.host) from exc
                    throttles += 1
                    delay = exc.retry_after
                    if delay is None:
                        delay = self._delay(min(throttles - 1, 5))
                    paused += delay
                    logger.debug("throttled: %s %s again in %.2fs", method, path, delay)
                    await anyio.sleep(delay)
                    continue
                if exc.status < 500:
                    self._accepted()
                if exc.status == 401 and not refreshed and await self._refresh():
                    refreshed = True
                    continue
                if not retry or exc.status not in _RETRY_STATUSES:
                    raise (denied_error(exc) if map_denied else exc) from None
                if attempt >= self.max_retries:
                    raise
                delay = exc.retry_after
                if delay is None:
                    delay = self._delay(attempt)
            except _connection_errors() as exc:
                delay = self._delay(attempt)
                late = time.monotonic() + delay >= deadline
                if not retry or attempt >= self.max_retries or late:
                    what = (
                        f"no answer from the API server at {self.host} within"
                        f" {self.request_timeout:g}s ({method} {path})"
                        if isinstance(exc, TimeoutError)
                        else f"cannot reach the API server at {self.host}: {exc!r}"
                    )
                    raise SchedulerUnavailableError(
                        BACKEND,
                        what,
                        "check the kubeconfig/context and that the server is up",
                    ) from exc
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
            InvalidArgumentError: ``path`` is not plain segments; nothing is sent.
        """
        check_path("GET", path)
        timeout = aiohttp_module().ClientTimeout(
            total=None, connect=self.connect_timeout, sock_read=read_timeout
        )
        client = await self._streams()
        await self._acquire()
        resp = await self._send("GET", path, query, None, JSON_CT, timeout, client)
        if resp.status == 401 and await self._refresh():
            resp.release()
            await self._acquire()
            resp = await self._send("GET", path, query, None, JSON_CT, timeout, client)
        try:
            if resp.status >= 400:
                error = await _error(resp, "GET", path)
                if self.pacer is not None and is_throttle(
                    error.status, error.retry_after
                ):
                    self.pacer.throttled(error.retry_after)
                raise denied_error(error)
            yield resp
        finally:
            resp.release()
            resp.close()

    async def _streams(self) -> Any:
        """The client of long streams: same configuration, a pool of its own."""
        if self.stream_client is None:
            async with self._stream_lock:
                if self.stream_client is None:
                    self.stream_client = await stream_client(self.client)
        return self.stream_client

    async def _refresh(self) -> bool:
        """Refresh the credentials after a 401; False if there is nothing to do."""
        if self.credentials is None:
            return False
        try:
            return await self.credentials.refresh(force=True)
        except Exception as exc:  # noqa: BLE001 -- the 401 is reported instead
            logger.warning("refreshing the Kubernetes credentials failed: %r", exc)
            return False

    async def _acquire(self) -> float:
        """Wait for the pacer; answers its clock at the grant (0 when unpaced)."""
        return 0.0 if self.pacer is None else await self.pacer.acquire()

    def _accepted(self) -> None:
        if self.pacer is not None:
            self.pacer.accepted()

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
        client: Any = None,
    ) -> aiohttp.ClientResponse:
        params = [
            (k, _query_value(v)) for k, v in (query or {}).items() if v is not None
        ]
        resp: aiohttp.ClientResponse = await (client or self.client).call_api(
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
    http = aiohttp_module()
    return (http.ClientConnectionError, http.ClientPayloadError, TimeoutError)


async def _error(
    resp: aiohttp.ClientResponse, method: str, path: str
) -> KubernetesApiError:
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
    error = KubernetesApiError(method, path, resp.status, reason, message, retry_after)
    if isinstance(status, dict) and isinstance(status.get("details"), dict):
        error.details = status["details"]
        causes = error.details.get("causes")
        if isinstance(causes, list):
            error.causes = [c for c in causes if isinstance(c, dict)]
    return error


def denied_error(exc: Exception) -> Exception:
    """A 401 or 403 as the :class:`SchedulerUnavailableError` saying what to do."""
    if isinstance(exc, KubernetesApiError) and exc.status == 401:
        return SchedulerUnavailableError(
            BACKEND,
            f"credentials expired or invalid: the API server answered 401 to"
            f" {exc.method} {exc.path}: {exc.message}",
            "log in again or check the kubeconfig user (token, exec plugin)",
        )
    if isinstance(exc, KubernetesApiError) and exc.status == 403:
        what, hint = forbidden_cause(exc)
        return SchedulerUnavailableError(
            BACKEND,
            f"the API server denied {exc.method} {exc.path} ({what}): {exc.message}",
            hint,
        )
    return exc
