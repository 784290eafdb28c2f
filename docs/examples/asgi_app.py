"""A small web service on asyncsched: a JSON API, a page, live states and logs over SSE.

Routes (JSON unless noted; every state is a name such as ``"RUNNING"``):

- ``GET /``: the HTML page (``asgi_app.html`` beside this file).
- ``POST /apps``: submit. Body ``{"cmd": ["sh", "-c", "echo hi"], "replicas": 2,
  "env": {}, "name": "web", "cfg": {}}`` (only ``cmd`` is required), or
  ``{"app": <AppDef in the file schema>, "cfg": {}}``. Answers 201 with the status.
- ``GET /apps``: ``{"apps": [{"app_id", "handle", "name", "state"}]}``.
- ``GET /apps/{app_id}``: the status, ``{"app_id", "handle", "state", "msg",
  "num_restarts", "replicas": [{"role", "id", "state", "exit_code", "pid"}]}``.
- ``POST /apps/{app_id}/cancel`` or ``DELETE /apps/{app_id}``: cancel; answers the
  status once every replica has stopped (an app already over is left as it is).
- ``GET /apps/{app_id}/events``: SSE, an ``event: status`` on every change, then
  ``event: end`` with the final status (app and replicas final).
- ``GET /apps/{app_id}/logs``: SSE, one message ``{"role", "replica", "line"}``
  per line of every replica while the app runs, then ``event: end``.

Errors answer ``{"error": message, "type": class name}`` with the status given by
:data:`ERROR_STATUS` (bad input 400, unknown app 404, ...).

One :class:`~asyncsched.runner.Runner` lives as long as the app (the lifespan);
leaving it stops the local apps still running. Only the async API is used: the
server's event loop is never blocked.

Run it with ``pip install 'asyncsched[web]'`` and
``uvicorn docs.examples.asgi_app:app``, then open http://127.0.0.1:8000/ or::

    curl -X POST localhost:8000/apps -d '{"cmd": ["sh", "-c", "echo hi; sleep 1; echo bye"]}'
    curl -N localhost:8000/apps/<app_id>/logs

It runs whatever command it is given: keep it on a loopback address.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import ObjectSendStream
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

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
CACHE_SIZE = 500  # apps the local scheduler keeps; more unfinished ones answer 429
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
    code = next(code for cls, code in ERROR_STATUS if isinstance(exc, cls))
    if code >= 500:
        logger.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return JSONResponse({"error": str(exc), "type": type(exc).__name__}, code)


# -- request and response bodies ---------------------------------------------

_SHORT_FIELDS = {"cmd", "replicas", "env", "name", "cfg"}


async def _json_object(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body())
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise InvalidArgumentError(f"the request body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise InvalidArgumentError("the request body must be a JSON object")
    return body


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
        return app_from_dict(body["app"], path="app"), cfg
    cmd = body.get("cmd")
    if not isinstance(cmd, list) or not cmd or not all(isinstance(c, str) for c in cmd):
        raise InvalidArgumentError("cmd: must be a non-empty list of strings")
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
        "msg": status.msg,
        "num_restarts": status.num_restarts,
        "replicas": [
            {
                "role": role.role,
                "id": r.id,
                "state": r.state.name,
                "exit_code": r.exit_code,
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
    exception_handlers={AsyncschedError: error_response},
    lifespan=lifespan,
)
