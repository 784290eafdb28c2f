"""Embed asyncsched in a Starlette app: submit apps, stream their logs as SSE.

Endpoints:

- ``POST /apps`` with JSON ``{"cmd": ["python", "-c", "print(1)"], "replicas": 2}``
  submits a one-role app on ``local_cwd`` and answers ``{"handle": ...}``.
- ``GET /apps/{app_id}`` answers the app's status as JSON.
- ``GET /apps/{app_id}/logs`` streams every replica's lines as server-sent
  events (``data: role/replica line``) until the app is over, then sends an
  ``event: end`` with the final state.

One :class:`~asyncsched.runner.Runner` lives as long as the ASGI app (the
lifespan): its schedulers supervise the submitted processes, and leaving the
lifespan cancels whatever still runs.

Run it with ``uvicorn docs.examples.asgi_app:app`` (needs ``starlette`` and
``uvicorn``), then::

    curl -X POST localhost:8000/apps -d '{"cmd": ["sh", "-c", "echo hi; sleep 1; echo bye"]}'
    curl -N localhost:8000/apps/<app_id>/logs
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from asyncsched.runner import Runner
from asyncsched.specs import AppDef, Role, make_app_handle

SCHEDULER = "local_cwd"
SESSION = "web"


def _runner(request: Request) -> Runner:
    runner: Runner = request.app.state.runner
    return runner


async def submit(request: Request) -> Response:
    body: dict[str, Any] = await request.json()
    cmd = body.get("cmd")
    if not isinstance(cmd, list) or not cmd or not all(isinstance(c, str) for c in cmd):
        return JSONResponse({"error": "`cmd` must be a non-empty list of strings"}, 400)
    role = Role(
        name="main",
        image=".",
        entrypoint=cmd[0],
        args=cmd[1:],
        num_replicas=int(body.get("replicas", 1)),
    )
    handle = await _runner(request).run(AppDef("web", roles=[role]), SCHEDULER)
    return JSONResponse({"handle": handle, "app_id": handle.rsplit("/", 1)[1]}, 201)


async def status(request: Request) -> Response:
    handle = make_app_handle(SCHEDULER, SESSION, request.path_params["app_id"])
    result = await _runner(request).status(handle)
    if result is None:
        return JSONResponse({"error": "unknown app"}, 404)
    return JSONResponse(result.to_json())


async def logs(request: Request) -> Response:
    runner = _runner(request)
    handle = make_app_handle(SCHEDULER, SESSION, request.path_params["app_id"])
    current = await runner.status(handle)
    if current is None:
        return JSONResponse({"error": "unknown app"}, 404)
    replicas = [(r.role, rep.id) for r in current.roles for rep in r.replicas]

    send, receive = anyio.create_memory_object_stream[str](math.inf)
    scope = anyio.CancelScope()

    async def follow(role: str, k: int) -> None:
        lines = runner.log_lines(handle, role, k, should_tail=True)
        async with aclosing(lines):  # type: ignore[type-var]
            async for line in lines:
                await send.send(f"data: {role}/{k} {line.rstrip()}\n\n")

    async def produce() -> None:
        with send, scope:
            async with anyio.create_task_group() as tg:
                for role, k in replicas:
                    tg.start_soon(follow, role, k)
            final = await runner.wait(handle)
            state = str(final.state) if final else "UNKNOWN"
            await send.send(f"event: end\ndata: {json.dumps({'state': state})}\n\n")

    # The producer runs in the app's long-lived task group, not in the response
    # generator: no cancel scope stays open across a ``yield``, and a client
    # that disconnects only has to cancel ``scope``.
    request.app.state.tasks.start_soon(produce)

    async def events() -> AsyncIterator[str]:
        try:
            with receive:
                async for event in receive:
                    yield event
        finally:
            scope.cancel()

    return StreamingResponse(events(), media_type="text/event-stream")


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    async with Runner(SESSION) as runner, anyio.create_task_group() as tasks:
        app.state.runner = runner
        app.state.tasks = tasks
        yield
        tasks.cancel_scope.cancel()


app = Starlette(
    routes=[
        Route("/apps", submit, methods=["POST"]),
        Route("/apps/{app_id}", status),
        Route("/apps/{app_id}/logs", logs),
    ],
    lifespan=lifespan,
)
