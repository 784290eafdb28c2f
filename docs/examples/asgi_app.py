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
- ``GET /apps/{app_id}/logs``: SSE, one message ``{"role", "replica", "line"}``
  per line of every replica while the app runs, then ``event: end``.

Errors answer ``{"error": message, "type": class name}`` with the status given by
:data:`ERROR_STATUS` (bad input 400, unknown app 404, ...); requests that
:class:`RequestGuard` refuses answer the same shape (403, 413, 421).

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
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
from anyio.abc import ObjectSendStream
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

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
    UnsupportedOperationError,
    WaitTimeoutError,
)
from asyncsched.runner import Runner
from asyncsched.specs import AppDef, AppStatus, is_terminal, make_app_handle
from asyncsched.specs.serialize import app_from_dict

SCHEDULER = "local_cwd"
SESSION = "web"
STATUS_POLL_S = 0.2  # replica states can change between app state changes
CANCEL_TIMEOUT_S = 30.0
CACHE_SIZE = 500  # finished apps the local scheduler keeps in memory
SSE_BUFFER = 256  # frames queued per client before its producer waits
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
MAX_JSON_DEPTH = 32  # a submission needs 5 levels; deeper bodies answer 400
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
DEFAULT_PORTS = {"http": 80, "https": 443}
_HOST = re.compile(r"(\[[0-9a-f:.]+\]|[a-z0-9_.-]+)(?::([0-9]{1,5}))?")

Origin = tuple[str, str, int]  # (scheme, host, port): ("http", "localhost", 8000)


class Refused(Exception):
    """A request this service does not serve: ``{"error", "type"}`` with ``status``."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind

    def response(self) -> Response:
        return JSONResponse({"error": str(self), "type": self.kind}, self.status)


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
      hands it to the app.

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
    ) -> None:
        self.app = app
        self.allowed_hosts = {host.strip().lower() for host in allowed_hosts}
        self.allowed_origins: set[Origin] = set()
        for text in allowed_origins:
            if (origin := _parse_origin(text)) is None:
                raise ValueError(f"allowed origin {text!r}: give scheme://host[:port]")
            self.allowed_origins.add(origin)
        self.max_body = max_body

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
        """A ``receive`` that replays the whole body; Refused past ``max_body``."""
        length = headers.get("content-length")
        if length is None and "transfer-encoding" not in headers:
            return receive  # no body
        too_large = Refused(
            413,
            "BodyTooLarge",
            f"the request body is larger than {self.max_body} bytes"
            " (ASYNCSCHED_WEB_MAX_BODY)",
        )
        if length is not None and length.isdigit() and int(length) > self.max_body:
            raise too_large
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left
                pending = [message]
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_body:
                raise too_large
            if not message.get("more_body", False):
                body = b"".join(chunks)
                pending = [{"type": "http.request", "body": body, "more_body": False}]
                break

        async def replay() -> Message:
            return pending.pop() if pending else await receive()

        return replay


def _env_list(name: str, default: Iterable[str]) -> list[str]:
    """The comma-separated values of environment variable ``name``, or ``default``."""
    value = os.environ.get(name, "").strip()
    return [v.strip() for v in value.split(",") if v.strip()] if value else [*default]


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    if not value.isdigit():
        raise ValueError(f"{name}={value!r}: must be a number of bytes")
    return int(value)


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


def _frame(event: str | None, data: object) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n"


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
    return HTMLResponse(await anyio.Path(PAGE).read_text())


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


Produce = Callable[[ObjectSendStream[str]], Awaitable[None]]


def _sse(request: Request, produce: Produce) -> Response:
    """Stream the frames ``produce`` sends as server-sent events.

    The producer runs in the lifespan's task group, not in the response
    generator: no cancel scope stays open across a ``yield``, and a client that
    disconnects only has to cancel ``scope``. A failure ends the stream with an
    ``event: stream-error``.
    """
    send, receive = anyio.create_memory_object_stream[str](SSE_BUFFER)
    scope = anyio.CancelScope()

    async def run() -> None:
        with send, scope:
            try:
                await produce(send)
            except Exception as exc:  # noqa: BLE001 -- sent to the client as an event
                while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
                    exc = exc.exceptions[0]
                if not scope.cancel_called:  # not merely a client that left
                    logger.warning("%s ended: %r", request.url.path, exc)
                    await send.send(_frame("stream-error", {"error": str(exc)}))

    request.app.state.tasks.start_soon(run)

    async def frames() -> AsyncIterator[str]:
        try:
            with receive:
                async for frame in receive:
                    yield frame
        finally:
            scope.cancel()

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(frames(), media_type="text/event-stream", headers=headers)


async def status_events(request: Request) -> Response:
    runner, handle = _runner(request), _handle(request)
    await _status(runner, handle)

    async def produce(send: ObjectSendStream[str]) -> None:
        last: dict[str, Any] | None = None
        while True:
            current = await _status(runner, handle)
            doc = status_json(handle, current)
            if doc != last:
                await send.send(_frame("status", doc))
                last = doc
            if _settled(current):
                await send.send(_frame("end", doc))
                return
            await _until_change(runner, handle, current)

    return _sse(request, produce)


async def logs(request: Request) -> Response:
    runner, handle = _runner(request), _handle(request)
    current = await _status(runner, handle)
    replicas = [(r.role, rep.id) for r in current.roles for rep in r.replicas]

    async def follow(send: ObjectSendStream[str], role: str, k: int) -> None:
        lines = runner.log_lines(handle, role, k, should_tail=True)
        async with aclosing(lines):  # type: ignore[type-var]
            async for line in lines:
                line = line.rstrip("\r\n")
                await send.send(
                    _frame(None, {"role": role, "replica": k, "line": line})
                )

    async def produce(send: ObjectSendStream[str]) -> None:
        async with anyio.create_task_group() as tg:
            for role, k in replicas:
                tg.start_soon(follow, send, role, k)
        final = await runner.wait(handle)
        doc = status_json(handle, final) if final else {"state": "UNKNOWN"}
        await send.send(_frame("end", doc))

    return _sse(request, produce)


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    params = {"cache_size": CACHE_SIZE}
    async with (
        Runner(SESSION, scheduler_params=params) as runner,
        anyio.create_task_group() as tasks,
    ):
        app.state.runner = runner
        app.state.tasks = tasks
        yield
        tasks.cancel_scope.cancel()


app = Starlette(
    routes=[
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
        Middleware(
            RequestGuard,
            allowed_hosts=_env_list("ASYNCSCHED_WEB_ALLOWED_HOSTS", LOOPBACK_HOSTS),
            allowed_origins=_env_list("ASYNCSCHED_WEB_ALLOWED_ORIGINS", ()),
            max_body=_env_int("ASYNCSCHED_WEB_MAX_BODY", MAX_BODY_BYTES),
        )
    ],
    exception_handlers={AsyncschedError: error_response, Refused: error_response},
    lifespan=lifespan,
)
