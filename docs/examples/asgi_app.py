"""A small web service on asyncsched: a JSON API, a page, live states and logs over SSE.

Routes (JSON unless noted; every state is a name such as ``"RUNNING"``):

- ``GET /``: the HTML page (``asgi_app.html`` beside this file).
- ``POST /apps``: submit (``Content-Type: application/json``, else 415). Body
  ``{"cmd": ["sh", "-c", "echo hi"], "replicas": 2,
  "env": {}, "name": "web", "cfg": {}}`` (only ``cmd`` is required), or
  ``{"app": <AppDef in the file schema>, "cfg": {}}``. Answers 201 with the status.
- ``GET /apps``: ``{"apps": [{"app_id", "handle", "name", "state"}]}``.
- ``GET /apps/{app_id}``: the status, ``{"app_id", "handle", "state", "reason",
  "msg", "num_restarts", "replicas": [{"role", "id", "state", "exit_code",
  "reason", "message", "pid"}]}``; ``reason`` is a ``StatusReason`` name (why
  it failed or waits) or null.
- ``POST /apps/{app_id}/cancel`` or ``DELETE /apps/{app_id}``: cancel; answers the
  status once every replica has stopped (an app already over is left as it is).
- ``GET /apps/{app_id}/events``: SSE, an ``event: status`` on every change, then
  ``event: end`` with the final status (app and replicas final).
- ``GET /events``: SSE of every change of every app of the session
  (``Runner.events``): one message per event, ``event:`` its kind
  (``current``, ``submitted``, ``app``, ``replica``, ``forgotten``, ``resync``),
  ``data:`` its ``AppEvent.to_json()`` and ``id:`` its cursor. A reconnecting
  browser sends the last id as ``Last-Event-ID`` and the stream resumes after
  it (``?since=CURSOR`` does the same for other clients); a cursor that cannot
  be honoured gives ``resync`` then every app's ``current`` state.

Both status streams start with ``retry: 1000`` (how soon a browser
reconnects) and send a ``: keep-alive`` comment every 15 s of silence.
- ``GET /apps/{app_id}/logs``: SSE, one message ``{"role", "replica", "line"}``
  per line of every replica while the app runs (a line over 64 KiB comes in
  pieces marked ``"partial": true``), then ``event: end``.

A stream whose client reads nothing for 30 s while 1 MiB waits for it ends
with ``event: lagged`` (see :class:`EventStream`); past 256 open streams a new
one answers 503 with ``Retry-After``.

Errors answer ``{"error": message, "type": class name}`` with the status given by
:data:`ERROR_STATUS` (bad input 400, unknown app 404, ...); requests that
:class:`RequestGuard` refuses answer the same shape (403, 408, 413, 421).
Every response carries :data:`SECURITY_HEADERS` (no framing by other sites).

One :class:`~asyncsched.runner.Runner` lives as long as the app (the lifespan);
leaving it stops the local apps still running. Only the async API is used: the
server's event loop is never blocked.

Run it with ``pip install 'asyncsched[web]'`` and
``uvicorn docs.examples.asgi_app:app``, then open http://127.0.0.1:8000/ or::

    curl localhost:8000/apps -H 'Content-Type: application/json' \\
        -d '{"cmd": ["sh", "-c", "echo hi; sleep 1; echo bye"]}'
    curl -N localhost:8000/apps/<app_id>/logs

It runs whatever command it is given, for anyone who can reach it: keep it on a
loopback address. :class:`RequestGuard` stops other web pages from using it
through the user's browser (foreign ``Host`` or ``Origin``, non-JSON bodies,
oversized bodies); it does not authenticate anyone. Settings, read at import:

- ``ASYNCSCHED_WEB_ALLOWED_HOSTS``: comma-separated host names served (any
  port), default ``localhost,127.0.0.1,[::1]``; the address the server is
  bound to is always served.
- ``ASYNCSCHED_WEB_ALLOWED_ORIGINS``: comma-separated origins (such as
  ``http://localhost:3000``) that may POST/DELETE besides the page's own.
- ``ASYNCSCHED_WEB_MAX_BODY``: the largest request body in bytes, default 1 MiB.
- ``ASYNCSCHED_WEB_BODY_TIMEOUT``: seconds to receive a request body, default 10.
- ``ASYNCSCHED_WEB_MAX_STREAMS``: open SSE streams, default 256.
- ``ASYNCSCHED_WEB_SSE_BUFFER``: bytes queued per SSE stream, default 1 MiB.
- ``ASYNCSCHED_WEB_SSE_STALL_TIMEOUT``: seconds a stream's client may read
  nothing while its buffer is full, default 30.
- ``ASYNCSCHED_WEB_SSE_KEEPALIVE``: seconds of silence before a status
  stream sends a keep-alive comment, default 15.
"""

from __future__ import annotations

import base64
import gc
import hashlib
import json
import logging
import math
import os
import re
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from asyncsched import AppEvent, EventKind
from asyncsched.errors import (
    AppCacheFullError,
    AsyncschedError,
    InvalidArgumentError,
    InvalidRunConfigException,
    MalformedAppHandleException,
    SchedulerUnavailableError,
    SpecError,
    UnknownAppException,
    UnknownReplicaError,
    UnknownSchedulerException,
    UnsafeStateDirError,
    UnsupportedOperationError,
    WaitTimeoutError,
)
from asyncsched.runner import Runner
from asyncsched.schedulers.kit import burst_restart, stamp_burst
from asyncsched.schedulers.shared.state_dir import check_state_dir, default_state_dir
from asyncsched.specs import AppDef, AppStatus, is_terminal, make_app_handle
from asyncsched.specs.serialize import app_from_dict

SCHEDULER = "local_cwd"
SESSION = "web"
STATUS_POLL_S = 0.2  # replica states can change between app state changes
CANCEL_TIMEOUT_S = 30.0
CACHE_SIZE = 500  # finished apps the local scheduler keeps in memory
PAGE = Path(__file__).with_name("asgi_app.html")

logger = logging.getLogger("asyncsched.examples.asgi_app")

# -- errors: the one place that maps the asyncsched error tree to HTTP ---------

ERROR_STATUS: list[tuple[type[AsyncschedError], int]] = [
    (UnknownAppException, 404),
    (UnknownReplicaError, 404),
    (AppCacheFullError, 429),  # too many unfinished apps: retry later
    (SpecError, 400),  # the app (entrypoint, replicas, ...) is invalid
    (InvalidRunConfigException, 400),  # `cfg` does not fit the scheduler
    (InvalidArgumentError, 400),  # the request itself (body, fields)
    (MalformedAppHandleException, 400),
    (UnknownSchedulerException, 400),
    (SchedulerUnavailableError, 503),
    (UnsafeStateDirError, 503),  # the state dir became unsafe while serving
    (UnsupportedOperationError, 501),
    (WaitTimeoutError, 504),
    (AsyncschedError, 500),  # the backend failed (SchedulerError, ...)
]
"""Exception class -> HTTP status; the first class the error is an instance of wins."""


async def error_response(request: Request, exc: Exception) -> Response:
    if isinstance(exc, Refused):
        return exc.response()
    code = next(code for cls, code in ERROR_STATUS if isinstance(exc, cls))
    if code >= 500:
        logger.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return JSONResponse({"error": str(exc), "type": type(exc).__name__}, code)


# -- the request guard: what a web page in the user's browser cannot do ------

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
MAX_BODY_BYTES = 1024 * 1024
BODY_TIMEOUT_S = 10.0  # to receive a whole request body, from its headers on
CLOSE = {"Connection": "close"}  # uvicorn closes the connection after the answer
MAX_JSON_DEPTH = 32  # a submission needs 5 levels; deeper bodies answer 400
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
DEFAULT_PORTS = {"http": 80, "https": 443}
_HOST = re.compile(r"(\[[0-9a-f:.]+\]|[a-z0-9_.-]+)(?::([0-9]{1,5}))?")

Origin = tuple[str, str, int]  # (scheme, host, port): ("http", "localhost", 8000)


class Refused(Exception):
    """A request this service does not serve: ``{"error", "type"}`` with ``status``."""

    def __init__(
        self,
        status: int,
        kind: str,
        message: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.headers = headers or {}

    def response(self) -> Response:
        body = {"error": str(self), "type": self.kind}
        return JSONResponse(body, self.status, headers=self.headers)


def _parse_host(value: str) -> tuple[str, int | None] | None:
    """``"LocalHost:8000"`` -> ``("localhost", 8000)``; None if it is no host."""
    match = _HOST.fullmatch(value.strip().lower())
    return (match[1], int(match[2]) if match[2] else None) if match else None


def _parse_origin(value: str) -> Origin | None:
    """``"http://localhost"`` -> ``("http", "localhost", 80)``; None for ``null``."""
    try:
        url = urlsplit(value.strip().lower())
        port = url.port
    except ValueError:
        return None
    if url.scheme not in DEFAULT_PORTS or not url.hostname:
        return None
    host = f"[{url.hostname}]" if ":" in url.hostname else url.hostname
    return url.scheme, host, port or DEFAULT_PORTS[url.scheme]


class RequestGuard:
    """ASGI middleware: refuse the requests another web page could make a browser send.

    Binding to a loopback address does not stop a page on any site: the user's
    browser sends its requests. So, before any endpoint runs:

    - ``Host`` must name this server: one of ``allowed_hosts`` (any port;
      ``"*"`` allows any) or the address the request came in on. Else 421: a
      DNS-rebinding page (``evil.example`` resolving to 127.0.0.1) reads nothing.
    - POST, PUT, PATCH and DELETE with an ``Origin`` other than the server's
      own or one of ``allowed_origins``, or with ``Sec-Fetch-Site: cross-site``
      (or ``same-site``) and no allowed ``Origin``, answer 403: no cross-site
      form or ``fetch`` starts or cancels an app. Clients that send no
      ``Origin`` (curl, scripts) pass.
    - A body over ``max_body`` bytes answers 413, whether its Content-Length
      says so or it is sent chunked: the guard reads and counts the body, then
      hands it to the app. A body not received within ``body_timeout``
      seconds answers 408 and closes the connection (a client that sends part
      of a body and stalls is not waited for).

    It authenticates no one. Example::

        Starlette(routes=[...], middleware=[
            Middleware(RequestGuard, allowed_hosts=["localhost", "box.lan"]),
        ])
    """

    def __init__(
        self,
        app: ASGIApp,
        allowed_hosts: Iterable[str] = LOOPBACK_HOSTS,
        allowed_origins: Iterable[str] = (),
        max_body: int = MAX_BODY_BYTES,
        body_timeout: float = BODY_TIMEOUT_S,
    ) -> None:
        self.app = app
        self.allowed_hosts = {host.strip().lower() for host in allowed_hosts}
        self.allowed_origins: set[Origin] = set()
        for text in allowed_origins:
            if (origin := _parse_origin(text)) is None:
                raise ValueError(f"allowed origin {text!r}: give scheme://host[:port]")
            self.allowed_origins.add(origin)
        self.max_body = max_body
        self.body_timeout = body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # the lifespan (this app has no WebSocket)
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        try:
            own = self._own_origin(scope, headers)
            if scope["method"] in STATE_CHANGING:
                self._check_origin(headers, own)
            receive = await self._read_body(headers, receive)
        except Refused as refused:
            await refused.response()(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _own_origin(self, scope: Scope, headers: Headers) -> Origin:
        """The origin the request was sent to; Refused unless its Host is served."""
        values = headers.getlist("host")
        parsed = _parse_host(values[0]) if len(values) == 1 else None
        if parsed is None:
            raise Refused(400, "BadHost", "the request needs one valid Host header")
        host, port = parsed
        if "*" not in self.allowed_hosts and host not in self.allowed_hosts:
            server = scope.get("server") or ("", None)  # the address bound
            bound = f"[{server[0]}]" if ":" in server[0] else server[0]
            if host != bound:
                raise Refused(
                    421,
                    "HostNotServed",
                    f"Host {host!r} is not served here: only"
                    f" {', '.join(sorted(self.allowed_hosts))} and the server's"
                    " own address are (set ASYNCSCHED_WEB_ALLOWED_HOSTS to add"
                    " names)",
                )
        scheme = scope["scheme"]
        return scheme, host, port or DEFAULT_PORTS.get(scheme, 80)

    def _check_origin(self, headers: Headers, own: Origin) -> None:
        """Refused unless the request comes from this server's pages or no page."""
        origins = headers.getlist("origin")
        parsed = [_parse_origin(text) for text in origins]
        if origins and all(o in self.allowed_origins for o in parsed):
            return
        for text, origin in zip(origins, parsed, strict=True):
            if origin != own:
                raise Refused(
                    403,
                    "CrossOriginRequest",
                    f"a request from origin {text!r} may not change anything here"
                    " (set ASYNCSCHED_WEB_ALLOWED_ORIGINS to allow that origin)",
                )
        if (site := headers.get("sec-fetch-site")) in ("cross-site", "same-site"):
            raise Refused(
                403,
                "CrossOriginRequest",
                f"a {site} request may not change anything here",
            )

    async def _read_body(self, headers: Headers, receive: Receive) -> Receive:
        """A ``receive`` that replays the whole body; Refused past ``max_body``
        bytes or ``body_timeout`` seconds."""
        length = headers.get("content-length")
        if length is None and "transfer-encoding" not in headers:
            return receive  # no body
        if length is not None and length.isdigit() and int(length) > self.max_body:
            raise self._too_large()
        with anyio.move_on_after(self.body_timeout) as timer:
            pending = await self._receive_body(receive)
        if timer.cancelled_caught:
            raise Refused(
                408,
                "BodyTimeout",
                f"the request body did not arrive within {self.body_timeout:g} s"
                " (ASYNCSCHED_WEB_BODY_TIMEOUT)",
                CLOSE,
            )

        async def replay() -> Message:
            return pending.pop() if pending else await receive()

        return replay

    async def _receive_body(self, receive: Receive) -> list[Message]:
        """The body as one message (or the client's ``http.disconnect``)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left
                return [message]
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_body:
                raise self._too_large()
            if not message.get("more_body", False):
                body = b"".join(chunks)
                return [{"type": "http.request", "body": body, "more_body": False}]

    def _too_large(self) -> Refused:
        return Refused(
            413,
            "BodyTooLarge",
            f"the request body is larger than {self.max_body} bytes"
            " (ASYNCSCHED_WEB_MAX_BODY)",
        )


def _env_list(name: str, default: Iterable[str]) -> list[str]:
    """The comma-separated values of environment variable ``name``, or ``default``."""
    value = os.environ.get(name, "").strip()
    return [v.strip() for v in value.split(",") if v.strip()] if value else [*default]


def _env_int(name: str, default: int, unit: str = "bytes") -> int:
    """Environment variable ``name`` as a whole number >= 1 of ``unit``, or ``default``."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{name}={value!r}: must be a number of {unit}")
    return int(value)


def _env_seconds(name: str, default: float) -> float:
    """Environment variable ``name`` as a number of seconds > 0, or ``default``."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds < math.inf:
        raise ValueError(f"{name}={value!r}: must be a number of seconds > 0")
    return seconds


# -- security headers: on every response --------------------------------------

SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",  # no page of another site shows this one in a frame
    "Content-Security-Policy": (
        "default-src 'none'; frame-ancestors 'none'; base-uri 'none';"
        " form-action 'none'"
    ),
    "X-Content-Type-Options": "nosniff",  # JSON is never read as a script or page
    "Referrer-Policy": "no-referrer",  # app ids in URLs go to no other site
    "Cross-Origin-Resource-Policy": "same-origin",  # no <script src>, <img> of it
}
"""Added to every response that does not set the header itself (the page sets
its own Content-Security-Policy, see :func:`page_policy`)."""

NONE = "'none'"
_INLINE = re.compile(r"<(script|style)>(.*?)</\1>", re.DOTALL)


def page_policy(html: str) -> str:
    """The Content-Security-Policy of a page: its own inline ``<script>`` and
    ``<style>`` blocks (by hash), requests to this server only, no frames.

    Example:
        >>> page_policy("<style>b{}</style>").split("; ")[2]
        "style-src 'sha256-7yqHVAesot11p6HczDsgKRipvI5UPgs97z80zNXlans='"
    """
    sources: dict[str, list[str]] = {"script": [], "style": []}
    for tag, text in _INLINE.findall(html):
        digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        sources[tag].append(f"'sha256-{digest}'")
    return "; ".join(
        [
            "default-src 'none'",
            f"script-src {' '.join(sources['script']) or NONE}",
            f"style-src {' '.join(sources['style']) or NONE}",
            "connect-src 'self'",  # fetch and EventSource
            "img-src 'self'",
            "form-action 'self'",
            "base-uri 'none'",
            "frame-ancestors 'none'",
        ]
    )


class SecurityHeaders:
    """ASGI middleware: :data:`SECURITY_HEADERS` on every HTTP response.

    Example::

        Starlette(routes=[...], middleware=[Middleware(SecurityHeaders)])
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.headers = [
            (name.lower().encode(), value.encode())
            for name, value in SECURITY_HEADERS.items()
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers += [h for h in self.headers if h[0] not in present]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


# -- request and response bodies ---------------------------------------------

_SHORT_FIELDS = {"cmd", "replicas", "env", "name", "cfg"}
_TOO_DEEP = f"the request body is nested deeper than {MAX_JSON_DEPTH} levels"


async def _json_object(request: Request) -> dict[str, Any]:
    # Only JSON: a form or a text/plain body is what a foreign page can send
    # without asking the browser first (no CORS preflight).
    content_type = request.headers.get("content-type", "")
    if content_type.partition(";")[0].strip().lower() != "application/json":
        got = f", not {content_type!r}" if content_type else ""
        raise Refused(
            415,
            "UnsupportedMediaType",
            f"send the body as JSON with `Content-Type: application/json`{got}",
        )
    try:
        body = json.loads(await request.body())
    except RecursionError:
        raise InvalidArgumentError(_TOO_DEEP) from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise InvalidArgumentError(f"the request body is not JSON: {exc}") from None
    _check_parsed(body)
    if not isinstance(body, dict):
        raise InvalidArgumentError("the request body must be a JSON object")
    return body


def _check_parsed(body: object) -> None:
    """Lists and objects nest at most ``MAX_JSON_DEPTH`` deep, and every string
    is valid Unicode (JSON's ``"\\ud800"`` escape is not). No recursion."""
    stack = [(body, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            stack.append((list(item), depth))  # the keys, as a list at this depth
            item = list(item.values())
        if isinstance(item, list):
            if depth > MAX_JSON_DEPTH:
                raise InvalidArgumentError(_TOO_DEEP)
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, str):
            try:
                item.encode()
            except UnicodeEncodeError:
                raise InvalidArgumentError(
                    f"the request body holds a lone surrogate: {item!r:.60}"
                ) from None


def _check_str(value: object, field: str) -> None:
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{field}: must be a string, got {value!r:.40}")


def _check_env(env: object, field: str) -> None:
    if not isinstance(env, dict):
        raise InvalidArgumentError(f"{field}: must be an object of strings")
    for key, value in env.items():
        _check_str(value, f"{field}.{key}")


def _check_appdef_strings(app: object) -> None:
    """Names and env values are JSON strings (``app_from_dict`` turns 1 into "1")."""
    if not isinstance(app, dict):
        return  # app_from_dict says what is wrong
    if "name" in app:
        _check_str(app["name"], "app.name")
    roles = app.get("roles")
    for i, role in enumerate(roles if isinstance(roles, list) else []):
        if isinstance(role, dict):
            if "name" in role:
                _check_str(role["name"], f"app.roles[{i}].name")
            _check_env(role.get("env", {}), f"app.roles[{i}].env")


def app_from_body(body: dict[str, Any]) -> tuple[AppDef, dict[str, Any]]:
    """The AppDef and run config a ``POST /apps`` body asks for."""
    cfg = body.get("cfg", {})
    if not isinstance(cfg, dict):
        raise InvalidArgumentError("cfg: must be an object of run options")
    allowed = {"app", "cfg"} if "app" in body else _SHORT_FIELDS
    if unknown := sorted(set(body) - allowed):
        raise InvalidArgumentError(
            f"unknown fields {unknown}: give `cmd` (with `replicas`, `env`, `name`,"
            " `cfg`) or `app` (with `cfg`)"
        )
    if "app" in body:
        _check_appdef_strings(body["app"])
        return app_from_dict(body["app"], path="app"), cfg
    cmd = body.get("cmd")
    if not isinstance(cmd, list) or not cmd or not all(isinstance(c, str) for c in cmd):
        raise InvalidArgumentError("cmd: must be a non-empty list of strings")
    _check_str(body.get("name", "web"), "name")
    _check_env(body.get("env", {}), "env")
    role = {
        "name": "main",
        "entrypoint": cmd[0],
        "args": cmd[1:],
        "num_replicas": body.get("replicas", 1),
        "env": body.get("env", {}),
    }
    app = {"name": body.get("name", "web"), "roles": [role]}
    return app_from_dict(app, path="request"), cfg


def status_json(handle: str, status: AppStatus) -> dict[str, Any]:
    """An app's status as JSON, states by name, replicas in one flat list."""
    return {
        "app_id": handle.rsplit("/", 1)[1],
        "handle": handle,
        "state": status.state.name,
        "reason": status.reason.value if status.reason else None,
        "msg": status.msg,
        "num_restarts": status.num_restarts,
        "replicas": [
            {
                "role": role.role,
                "id": r.id,
                "state": r.state.name,
                "exit_code": r.exit_code,
                "reason": r.reason.value if r.reason else None,
                "message": r.message,
                "pid": r.pid,
            }
            for role in status.roles
            for r in sorted(role.replicas, key=lambda r: r.id)
        ],
    }


# -- server-sent events: bounded per client, capped in number ------------------

SSE_BUFFER_BYTES = 1024 * 1024  # frames queued per stream before its producer waits
SSE_STALL_S = 30.0  # a full buffer the client takes nothing from for this long: dropped
SSE_RETRY_MS = 1000  # how soon a browser reconnects a lost status stream
SSE_KEEPALIVE_S = 15.0  # silence before a status stream sends a comment
HUB_HISTORY = 4096  # recent events kept for clients that reconnect
WAKE_BATCH = 32  # clients of the event hub woken per turn of the loop
MAX_STREAMS = 256  # open SSE streams, all clients together; more answer 503
STREAM_RETRY_AFTER_S = 5  # the Retry-After of that 503
LOG_LINE_BYTES = 64 * 1024  # a longer log line comes in pieces ("partial": true)
SEND_BYTES = 64 * 1024  # frames queued for a client are joined up to this, one write


class Stalled(Exception):
    """An SSE client took no frame for ``stall_s`` seconds while its buffer was full."""


class FrameBuffer:
    """The frames waiting for one SSE client, at most ``max_bytes`` of them.

    ``put`` waits while the buffer is full, so a slow client slows its
    producers down and nothing is skipped (the logs wait on disk). A client
    that takes nothing for ``stall_s`` seconds while the buffer is full makes
    ``put`` raise :class:`Stalled`. A frame larger than the bound is let in
    when the buffer is empty; ``offer`` puts a frame only if it fits, without
    waiting. Iterating takes the frames until :meth:`close`; :meth:`take`
    takes the frames queued joined (one write to the client for several).

    Example::

        buffer = FrameBuffer(max_bytes=1 << 20, stall_s=30)
        await buffer.put(b"data: 1\\n\\n")  # a producer
        buffer.close()
        frames = [frame async for frame in buffer]  # the response
    """

    def __init__(self, max_bytes: int, stall_s: float) -> None:
        self.max_bytes = max_bytes
        self.stall_s = stall_s
        self.size = 0  # bytes queued
        self._frames: deque[bytes] = deque()
        self._closed = False
        # made by whoever waits, set (and dropped) by the other side: a frame
        # that nobody waits for costs no event
        self._taken: anyio.Event | None = None  # a frame was taken
        self._added: anyio.Event | None = None  # a frame was added, or the end

    async def put(self, frame: bytes) -> None:
        while not self.fits(frame):
            if self._taken is None:
                self._taken = anyio.Event()
            taken = self._taken
            with anyio.move_on_after(self.stall_s):
                await taken.wait()
            if not taken.is_set():
                raise Stalled(
                    f"the client read nothing for {self.stall_s:g} s while"
                    f" {self.size} bytes waited for it"
                )
        if self._closed:
            raise anyio.ClosedResourceError
        self._add(frame)

    def fits(self, frame: bytes) -> bool:
        """``frame`` goes in without waiting (the buffer is empty, or has room)."""
        return not self._frames or self.size + len(frame) <= self.max_bytes

    def offer(self, frame: bytes) -> bool:
        """Put ``frame`` if it fits, at once; False (nothing put) if it does not
        or the buffer is closed."""
        if self._closed or not self.fits(frame):
            return False
        self._add(frame)
        return True

    def _add(self, frame: bytes) -> None:
        self._frames.append(frame)
        self.size += len(frame)
        _wake(self._added)
        self._added = None

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self, final: bytes = b"", *, drop: bool = False) -> None:
        """End the stream after the frames queued (none if ``drop``) and ``final``."""
        if drop:
            self._frames.clear()
            self.size = 0
        if final and not self._closed:
            self._frames.append(final)
            self.size += len(final)
        self._closed = True
        _wake(self._added)
        self._added = None

    def __aiter__(self) -> FrameBuffer:
        return self

    async def __anext__(self) -> bytes:
        if frame := await self.take():
            return frame
        raise StopAsyncIteration

    async def take(self, up_to: int = 0) -> bytes:
        """The next frame, joined with the ones queued after it while the
        whole stays within ``up_to`` bytes; ``b""`` once the buffer is closed
        and empty."""
        while not self._frames:
            if self._closed:
                return b""
            if self._added is None:
                self._added = anyio.Event()
            await self._added.wait()
        frames = self._frames
        piece = frames.popleft()
        if frames and len(piece) + len(frames[0]) <= up_to:
            pieces = [piece]
            size = len(piece)
            while frames and size + len(frames[0]) <= up_to:
                pieces.append(frames.popleft())
                size += len(pieces[-1])
            piece = b"".join(pieces)
        self.size -= len(piece)
        _wake(self._taken)
        self._taken = None
        return piece


def _wake(event: anyio.Event | None) -> None:
    """Set ``event``, if any (its waiters run); the next wait makes a new one."""
    if event is not None:
        event.set()


class StreamSlots:
    """How many SSE streams are open, at most ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open = 0

    def take(self) -> bool:
        """Count one more stream; False (nothing counted) when ``limit`` are open."""
        if self.open >= self.limit:
            return False
        self.open += 1
        return True

    def give_back(self) -> None:
        self.open -= 1


def _frame(event: str | None, data: object, event_id: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    if event_id is not None:  # cursors are URL-safe: no newline, no NUL
        head = f"id: {event_id}\n{head}"
    return f"{head}data: {json.dumps(data)}\n\n".encode()


RETRY_FRAME = f"retry: {SSE_RETRY_MS}\n\n".encode()
KEEPALIVE_FRAME = b": keep-alive\n\n"


def resume_cursor(request: Request) -> str | None:
    """Where an event stream resumes: the ``Last-Event-ID`` a reconnecting
    browser sends, else the ``since`` query parameter (None: from now)."""
    return request.headers.get("last-event-id") or request.query_params.get("since")


async def keep_alive(
    out: FrameBuffer, events: AsyncIterator[Any], every_s: float
) -> AsyncIterator[Any]:
    """``events``' items; a keep-alive comment is put in ``out`` whenever none
    came for ``every_s`` seconds (proxies close silent connections)."""
    while True:
        got, item = False, None
        with anyio.move_on_after(every_s):  # never open across the yield
            try:
                item = await events.__anext__()
            except StopAsyncIteration:
                return
            got = True
        if got:
            yield item
        else:
            await out.put(KEEPALIVE_FRAME)


def _only(exc: BaseException, kind: type[Exception]) -> bool:
    """``exc`` is a ``kind``, or a group of nothing else."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_only(e, kind) for e in exc.exceptions)
    return isinstance(exc, kind)


def _first(exc: BaseException) -> BaseException:
    """``exc``, or the first exception of a group, at any depth."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


class _ClientGone(Exception):
    """A send to the client did not complete within the response's send timeout."""


Produce = Callable[[FrameBuffer], Awaitable[None]]
SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),  # no proxy holds the frames back
]


class EventStream(Response):
    """An SSE response of the frames put in its :class:`FrameBuffer`.

    The frames come from ``produce``, a task started in the lifespan's task
    group (no cancel scope stays open across a ``yield`` in the response),
    or from whoever ``on_open`` hands the stream to: the :class:`EventHub`
    puts frames in the buffers of all its clients itself, and starts a
    producer (:meth:`start_producer`) only for a client that falls behind.
    A task waits for the client to disconnect; then the buffer is closed and
    the producer cancelled. The stream ends:

    - normally, after the frames queued, once the producer has ended;
    - with ``event: stream-error``, ``{"error"}``, if it failed;
    - with ``event: lagged``, ``{"error"}``, if the client stalled (see
      :class:`FrameBuffer`): the frames still queued are dropped and the
      client is told to open the stream again.

    Once the buffer is closed, a send to the client that blocks for
    ``stall_s`` gives the connection up (the client read nothing, not even the
    end). Beyond ``slots.limit`` open streams it answers 503 ``TooManyStreams``
    with ``Retry-After``. Example::

        async def produce(out: FrameBuffer) -> None:
            await out.put(b"data: 1\\n\\n")

        return EventStream(request, produce)
    """

    def __init__(
        self,
        request: Request,
        produce: Produce | None = None,
        *,
        on_open: Callable[[EventStream], None] | None = None,
        on_close: Callable[[EventStream], None] | None = None,
    ) -> None:
        state = request.app.state
        self.path: str = request.scope["path"]
        self.tasks: TaskGroup = state.tasks
        self.slots: StreamSlots = state.streams
        self.limits: StreamLimits = state.stream_limits
        self.buffer = FrameBuffer(self.limits.buffer_bytes, self.limits.stall_s)
        self.status_code = 200
        self.background = None
        self.raw_headers = [*SSE_HEADERS]
        self._produce_first = produce
        self._on_open, self._on_close = on_open, on_close
        self._producer: anyio.CancelScope | None = None  # the producer running
        self._sending: anyio.CancelScope | None = None  # the response's sends

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.slots.take():
            busy = Refused(
                503,
                "TooManyStreams",
                f"{self.slots.limit} streams are open, the most this service"
                " serves (ASYNCSCHED_WEB_MAX_STREAMS): retry later",
                {"Retry-After": str(STREAM_RETRY_AFTER_S)},
            )
            await busy.response()(scope, receive, send)
            return
        listening = anyio.CancelScope()
        try:
            self.tasks.start_soon(self._listen, receive, listening)
            if self._produce_first is not None:
                self.start_producer(self._produce_first)
            if self._on_open is not None:
                self._on_open(self)
            await self._stream(send)
        except Exception as exc:
            if not _only(exc, _ClientGone):
                raise
            logger.warning("%s: gave the stalled client's connection up", self.path)
        finally:
            listening.cancel()
            if self._producer is not None:
                self._producer.cancel()
            self.buffer.close()
            if self._on_close is not None:
                self._on_close(self)
            self.slots.give_back()

    def start_producer(self, produce: Produce, *, ends: bool = True) -> None:
        """Run ``produce(buffer)`` in the lifespan's task group; the stream
        ends when it returns if ``ends`` (and whenever it fails)."""
        scope = anyio.CancelScope()
        self._producer = scope
        self.tasks.start_soon(self._produce, produce, scope, ends)

    async def _listen(self, receive: Receive, scope: anyio.CancelScope) -> None:
        """Wait until the client disconnects, then end the stream."""
        with scope:
            while (await receive())["type"] != "http.disconnect":
                pass
            self.buffer.close(drop=True)
            if self._producer is not None:
                self._producer.cancel()

    async def _stream(self, send: Send) -> None:
        start = {"type": "http.response.start", "status": 200}
        await send({**start, "headers": self.raw_headers})
        with anyio.CancelScope() as sending:
            self._sending = sending
            while piece := await self.buffer.take(SEND_BYTES):
                await send(
                    {"type": "http.response.body", "body": piece, "more_body": True}
                )
                if self.buffer.closed:  # each send after the end gets stall_s
                    sending.deadline = anyio.current_time() + self.limits.stall_s
            await send({"type": "http.response.body", "body": b""})
        self._sending = None
        if sending.cancelled_caught:
            raise _ClientGone

    def _give_up_later(self) -> None:
        """The send under way gets ``stall_s`` more seconds, at most."""
        if self._sending is not None:
            deadline = anyio.current_time() + self.limits.stall_s
            self._sending.deadline = min(self._sending.deadline, deadline)

    async def _produce(
        self, produce: Produce, scope: anyio.CancelScope, ends: bool
    ) -> None:
        with scope:
            try:
                await produce(self.buffer)
            except Exception as exc:  # noqa: BLE001 -- told to the client as an event
                ends = True
                if _only(exc, Stalled):
                    stalled = _first(exc)  # one follower's, for a log stream
                    logger.warning(
                        "%s: dropped a stalled client: %s", self.path, stalled
                    )
                    error = (
                        f"this stream was stopped: {stalled}; open it again to"
                        " start over"
                    )
                    self.buffer.close(_frame("lagged", {"error": error}), drop=True)
                elif not scope.cancel_called:  # not merely a client that left
                    while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
                        exc = exc.exceptions[0]
                    logger.warning("%s ended: %r", self.path, exc)
                    self.buffer.close(_frame("stream-error", {"error": str(exc)}))
            finally:
                if ends or scope.cancel_called:
                    self.buffer.close()
                    self._give_up_later()


@dataclass(frozen=True)
class StreamLimits:
    """The SSE settings: :data:`MAX_STREAMS`, :data:`SSE_BUFFER_BYTES`,
    :data:`SSE_STALL_S` unless the environment says otherwise."""

    max_streams: int = MAX_STREAMS
    buffer_bytes: int = SSE_BUFFER_BYTES
    stall_s: float = SSE_STALL_S
    keepalive_s: float = SSE_KEEPALIVE_S

    @classmethod
    def from_env(cls) -> StreamLimits:
        return cls(
            _env_int("ASYNCSCHED_WEB_MAX_STREAMS", MAX_STREAMS, "streams"),
            _env_int("ASYNCSCHED_WEB_SSE_BUFFER", SSE_BUFFER_BYTES),
            _env_seconds("ASYNCSCHED_WEB_SSE_STALL_TIMEOUT", SSE_STALL_S),
            _env_seconds("ASYNCSCHED_WEB_SSE_KEEPALIVE", SSE_KEEPALIVE_S),
        )


# -- endpoints ---------------------------------------------------------------


def _runner(request: Request) -> Runner:
    runner: Runner = request.app.state.runner
    return runner


def _handle(request: Request) -> str:
    return make_app_handle(SCHEDULER, SESSION, request.path_params["app_id"])


async def _status(runner: Runner, handle: str) -> AppStatus:
    status = await runner.status(handle)
    if status is None:
        raise UnknownAppException(handle)
    return status


def _settled(status: AppStatus) -> bool:
    """The app and every replica are in a final state (the processes exited)."""
    replicas = (r for role in status.roles for r in role.replicas)
    return status.is_terminal() and all(is_terminal(r.state) for r in replicas)


async def _until_change(runner: Runner, handle: str, status: AppStatus) -> None:
    """Wait until ``status`` may be stale: the app ended, or a poll interval."""
    if status.is_terminal():
        await anyio.sleep(STATUS_POLL_S)
        return
    with anyio.move_on_after(STATUS_POLL_S):
        await runner.wait(handle)


async def page(request: Request) -> Response:
    html = await anyio.Path(PAGE).read_text()
    return HTMLResponse(html, headers={"Content-Security-Policy": page_policy(html)})


async def submit(request: Request) -> Response:
    app, cfg = app_from_body(await _json_object(request))
    runner = _runner(request)
    handle = await runner.run(app, SCHEDULER, cfg)
    return JSONResponse(status_json(handle, await _status(runner, handle)), 201)


async def list_apps(request: Request) -> Response:
    apps = await _runner(request).list(SCHEDULER)
    rows = [
        {
            "app_id": a.app_id,
            "handle": a.app_handle,
            "name": a.name,
            "state": a.state.name,
        }
        for a in apps
    ]
    return JSONResponse({"apps": rows})


async def status(request: Request) -> Response:
    handle = _handle(request)
    return JSONResponse(status_json(handle, await _status(_runner(request), handle)))


async def cancel(request: Request) -> Response:
    runner, handle = _runner(request), _handle(request)
    await _status(runner, handle)  # 404 for an unknown app
    await runner.cancel(handle)
    # The app is CANCELLED at once; its replicas when their processes have exited.
    with anyio.move_on_after(CANCEL_TIMEOUT_S):
        while not _settled(current := await _status(runner, handle)):
            await _until_change(runner, handle, current)
    return JSONResponse(status_json(handle, current))


async def status_events(request: Request) -> Response:
    runner, handle = _runner(request), _handle(request)
    now = await _status(runner, handle)
    since = resume_cursor(request)
    changes = runner.events([handle], since=since)  # 400: a bad Last-Event-ID
    keepalive_s = request.app.state.stream_limits.keepalive_s

    async def produce(out: FrameBuffer) -> None:
        await out.put(RETRY_FRAME)
        last: dict[str, Any] | None = None
        if since is not None and _settled(
            now
        ):  # resumed after the end: no change comes
            await changes.aclose()
            doc = status_json(handle, now)
            await out.put(_frame("end", doc, since))
            return
        async with changes:
            # the status as of each change: the first one is the app's
            # current state (or the first change after Last-Event-ID)
            async for event in keep_alive(out, changes, keepalive_s):
                current = await _status(runner, handle)
                doc = status_json(handle, current)
                if doc != last:  # a client that lags gets the latest status only
                    await out.put(_frame("status", doc, event.cursor))
                    last = doc
                if _settled(current):
                    await out.put(_frame("end", doc, event.cursor))
                    return

    return EventStream(request, produce)


def _event_frame(event: AppEvent) -> bytes:
    return _frame(event.kind.value, event.to_json(), event.cursor)


@dataclass(eq=False)
class _Follower:
    """Where one ``GET /events`` client of the hub is."""

    stream: EventStream
    pos: int  # number of the last event it was given
    epoch: int  # the hub's epoch when it was
    quiet_since: float  # when it was last given anything


class EventHub:
    """One ``Runner.events`` stream shared by every ``GET /events`` client.

    A thousand browsers cost one reader of the schedulers: the hub keeps the
    latest event of each app (a new client starts from them, as ``current``
    events) and the last ``history`` events numbered, so a client that
    reconnects with a recent ``Last-Event-ID`` resumes from memory. A cursor
    the hub no longer holds (older, or from before a server restart) is
    handed to a stream of its own (``Runner.events(since=...)``), which
    resumes it as far as the backend can.

    The hub feeds its clients itself, with no task per client: after news it
    puts what each client has not had yet in the client's buffer
    (:meth:`FrameBuffer.offer`, encoded once for all clients at the same
    place), ``WAKE_BATCH`` clients per turn of the loop, and a keep-alive
    comment to a client that had nothing for ``keepalive_s``. A client whose
    buffer is full gets a producer of its own that waits for it (and drops
    it if it stalls, see :class:`FrameBuffer`) until it has caught up.
    Example::

        hub = EventHub(runner, tasks, history=4096, keepalive_s=15)
        hub.start()
        return hub.stream(request, hub.position(since))  # in an endpoint
    """

    def __init__(
        self, runner: Runner, tasks: TaskGroup, history: int, keepalive_s: float
    ) -> None:
        self.runner = runner
        self.tasks = tasks
        self.history = history
        self.keepalive_s = keepalive_s
        self.seq = 0  # number of the last event
        self.frames: dict[int, bytes] = {}  # the last ``history`` events, encoded
        self.cursors: dict[int, str] = {}  # and their cursors
        self.by_cursor: dict[str, int] = {}  # cursor -> number of its last event
        self.apps: dict[str, AppEvent] = {}  # app id -> its latest event
        self.cursor = ""  # of the last event
        self.epoch = 0  # bumped when the upstream starts over
        self.started = False
        self._fed: dict[EventStream, _Follower] = {}  # the clients the hub feeds
        self._pending = anyio.Event()  # set when there is news for them
        self._snapshot: tuple[tuple[int, int, bool], bytes] = ((-1, -1, False), b"")

    def start(self) -> None:
        if not self.started:
            self.started = True
            self.tasks.start_soon(self._upstream)
            self.tasks.start_soon(self._fan_out)

    async def _upstream(self) -> None:
        while True:
            try:
                async with self.runner.events([SCHEDULER]) as stream:
                    async for event in stream:
                        self._add(event)
                return  # the runner closed
            except Exception:
                logger.exception("the shared event stream failed; starting over")
            self.apps.clear()
            self.epoch += 1
            self._pending.set()
            await anyio.sleep(1.0)

    def _add(self, event: AppEvent) -> None:
        self.seq += 1
        self.frames[self.seq] = _event_frame(event)  # encoded once for all clients
        self.cursors[self.seq] = event.cursor
        self.by_cursor[event.cursor] = self.seq
        gone = self.seq - self.history
        self.frames.pop(gone, None)
        old = self.cursors.pop(gone, None)
        if old is not None and self.by_cursor.get(old) == gone:
            del self.by_cursor[old]
        if event.kind is EventKind.FORGOTTEN:
            self.apps.pop(event.app_id, None)
        elif event.kind is EventKind.RESYNC:
            self.apps.clear()
        else:
            self.apps[event.app_id] = event
        self.cursor = event.cursor
        self._pending.set()

    def position(self, since: str | None) -> int | None:
        """Where a client resumes: 0 for a new one (from the current state)
        and for one that stopped inside the ``current`` events it was sent
        (their cursors but the last restart them); None when the hub does
        not hold ``since``."""
        return 0 if since is None else self.by_cursor.get(since)

    def _current(self, resync: bool = False) -> bytes:
        """Every app's latest event as ``current`` frames (after ``resync``),
        encoded once per change; every frame but the last carries a cursor
        that sends them all again (see ``stamp_burst``)."""
        key, frames = self._snapshot
        if key != (self.epoch, self.seq, resync):
            first = [AppEvent("", EventKind.RESYNC, msg="resync")] if resync else []
            drafts = [replace(e, kind=EventKind.CURRENT) for e in self.apps.values()]
            events = [*first, *drafts]
            burst = stamp_burst(events, self.cursor) if self.cursor else events
            frames = b"".join(_event_frame(e) for e in burst)
            self._snapshot = ((self.epoch, self.seq, resync), frames)
        return frames

    def _since(self, pos: int, joined: dict[tuple[int, int], bytes]) -> bytes:
        """The events after number ``pos``, joined once per round for every
        client at the same place."""
        key = (pos, self.seq)
        if (frames := joined.get(key)) is None:
            numbers = range(pos + 1, self.seq + 1)
            frames = joined[key] = b"".join(self.frames.get(n, b"") for n in numbers)
        return frames

    def stream(self, request: Request, pos: int) -> EventStream:
        """The response of a client that starts after event number ``pos``
        (0: with the current state), fed by the hub from then on."""

        def join(stream: EventStream) -> None:
            now = anyio.current_time()
            follower = _Follower(stream, pos, self.epoch, now)
            if pos == 0:
                follower.pos = self.seq
                stream.buffer.offer(RETRY_FRAME + self._current())  # empty: it fits
            else:
                stream.buffer.offer(RETRY_FRAME)
            if not self._fed:
                self._pending.set()  # the keep-alive timer starts with a client
            self._fed[stream] = follower
            self._feed(follower, now, {})  # a resumed client: what it missed

        def leave(stream: EventStream) -> None:
            self._fed.pop(stream, None)

        return EventStream(request, on_open=join, on_close=leave)

    def _feed(
        self, f: _Follower, now: float, joined: dict[tuple[int, int], bytes]
    ) -> None:
        """Offer a client what it has not had (or a keep-alive); hand it to a
        producer of its own if its buffer is full."""
        if f.epoch != self.epoch or f.pos < self.seq - self.history:
            frames, pos = self._current(resync=True), self.seq  # lost: start over
        elif f.pos < self.seq:
            frames, pos = self._since(f.pos, joined), self.seq
        elif now - f.quiet_since >= self.keepalive_s:
            frames, pos = KEEPALIVE_FRAME, f.pos
        else:
            return
        out = f.stream.buffer
        if out.offer(frames):
            f.epoch, f.pos, f.quiet_since = self.epoch, pos, now
        elif not out.closed:  # it reads slower than the events come
            del self._fed[f.stream]
            f.stream.start_producer(partial(self._catch_up, f), ends=False)

    async def _catch_up(self, f: _Follower, out: FrameBuffer) -> None:
        """Put a client's events with ``put`` (which waits for the client)
        until it has them all; then the hub feeds it again."""
        while True:
            if f.epoch != self.epoch or f.pos < self.seq - self.history:
                f.epoch, f.pos = self.epoch, self.seq
                await out.put(self._current(resync=True))
            elif f.pos < self.seq:
                ready = [
                    self.frames.get(n, b"") for n in range(f.pos + 1, self.seq + 1)
                ]
                f.pos = self.seq
                await out.put(b"".join(ready))
            else:
                break
        f.quiet_since = anyio.current_time()
        if not out.closed:
            self._fed[f.stream] = f

    async def _fan_out(self) -> None:
        """After news (or when a keep-alive is due), feed every client,
        ``WAKE_BATCH`` per turn of the loop: a thousand clients fed at once
        would write to their sockets in one turn of the loop and hold
        everything else back for it."""
        try:
            while True:
                quiet = min(
                    (f.quiet_since for f in self._fed.values()), default=math.inf
                )
                with anyio.move_on_after(
                    quiet + self.keepalive_s - anyio.current_time()
                ):
                    await self._pending.wait()
                self._pending = anyio.Event()
                now = anyio.current_time()
                fed = list(self._fed.values())
                joined: dict[tuple[int, int], bytes] = {}
                for start in range(0, len(fed), WAKE_BATCH):
                    for follower in fed[start : start + WAKE_BATCH]:
                        if self._fed.get(follower.stream) is follower:  # still here
                            self._feed(follower, now, joined)
                    await anyio.lowlevel.checkpoint()
        finally:
            for stream in list(self._fed):
                stream.buffer.close()


async def all_events(request: Request) -> Response:
    hub: EventHub = request.app.state.hub
    since = resume_cursor(request)
    if since is not None and burst_restart(since) is not None:
        since = None  # stopped inside the hub's current events: all of them again
    if (pos := hub.position(since)) is not None:
        hub.start()
        return hub.stream(request, pos)
    # a cursor the hub does not hold: a stream of its own
    own = _runner(request).events([SCHEDULER], since=since)  # 400: a bad cursor
    hub.start()
    keepalive_s = request.app.state.stream_limits.keepalive_s

    async def produce(out: FrameBuffer) -> None:
        await out.put(RETRY_FRAME)
        async with own:
            async for event in keep_alive(out, own, keepalive_s):
                await out.put(_event_frame(event))

    return EventStream(request, produce)


def log_message(role: str, replica: int, line: str) -> dict[str, Any]:
    """One log line (or piece of a line over :data:`LOG_LINE_BYTES`) as JSON.

    Example:
        >>> log_message("main", 0, "hi\\n")
        {'role': 'main', 'replica': 0, 'line': 'hi'}
        >>> log_message("main", 0, "a long li")
        {'role': 'main', 'replica': 0, 'line': 'a long li', 'partial': True}
    """
    doc: dict[str, Any] = {"role": role, "replica": replica}
    doc["line"] = line.rstrip("\r\n")
    if not line.endswith("\n"):  # it goes on in the next message (or never ended)
        doc["partial"] = True
    return doc


async def logs(request: Request) -> Response:
    runner, handle = _runner(request), _handle(request)
    current = await _status(runner, handle)
    replicas = [(r.role, rep.id) for r in current.roles for rep in r.replicas]

    async def follow(out: FrameBuffer, role: str, k: int) -> None:
        lines = runner.log_lines(handle, role, k, should_tail=True)
        async with aclosing(lines):  # type: ignore[type-var]
            async for line in lines:
                await out.put(_frame(None, log_message(role, k, line)))

    async def produce(out: FrameBuffer) -> None:
        async with anyio.create_task_group() as tg:
            for role, k in replicas:
                tg.start_soon(follow, out, role, k)
        final = await runner.wait(handle)
        doc = status_json(handle, final) if final else {"state": "UNKNOWN"}
        await out.put(_frame("end", doc))

    return EventStream(request, produce)


STREAM_LIMITS = StreamLimits.from_env()


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    # an unsafe state dir (another user's, or writable by others) stops the
    # server at startup with UnsafeStateDirError, before any request is served
    await anyio.to_thread.run_sync(check_state_dir, default_state_dir())
    params = {"cache_size": CACHE_SIZE, "max_line_bytes": LOG_LINE_BYTES}
    async with (
        Runner(SESSION, scheduler_params=params) as runner,
        anyio.create_task_group() as tasks,
    ):
        app.state.runner = runner
        app.state.tasks = tasks
        app.state.stream_limits = STREAM_LIMITS
        app.state.streams = StreamSlots(STREAM_LIMITS.max_streams)
        app.state.hub = EventHub(runner, tasks, HUB_HISTORY, STREAM_LIMITS.keepalive_s)
        # what is loaded by now lives as long as the server: the cyclic
        # garbage collector stops walking it (a full collection of it all
        # paused the loop for tens of ms while a thousand streams opened)
        gc.freeze()
        yield
        tasks.cancel_scope.cancel()


app = Starlette(
    routes=[
        Route("/events", all_events),  # first: the route a thousand clients open
        Route("/", page),
        Route("/apps", submit, methods=["POST"]),
        Route("/apps", list_apps, methods=["GET"]),
        Route("/apps/{app_id}", status, methods=["GET"]),
        Route("/apps/{app_id}", cancel, methods=["DELETE"]),
        Route("/apps/{app_id}/cancel", cancel, methods=["POST"]),
        Route("/apps/{app_id}/events", status_events),
        Route("/apps/{app_id}/logs", logs),
    ],
    middleware=[
        Middleware(SecurityHeaders),
        Middleware(
            RequestGuard,
            allowed_hosts=_env_list("ASYNCSCHED_WEB_ALLOWED_HOSTS", LOOPBACK_HOSTS),
            allowed_origins=_env_list("ASYNCSCHED_WEB_ALLOWED_ORIGINS", ()),
            max_body=_env_int("ASYNCSCHED_WEB_MAX_BODY", MAX_BODY_BYTES),
            body_timeout=_env_seconds("ASYNCSCHED_WEB_BODY_TIMEOUT", BODY_TIMEOUT_S),
        ),
    ],
    exception_handlers={AsyncschedError: error_response, Refused: error_response},
    lifespan=lifespan,
)
