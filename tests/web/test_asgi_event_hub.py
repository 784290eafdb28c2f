"""The web example's event hub, in this process: ``GET /events`` clients
called straight through the ASGI app (the example's own lifespan, a real
local runner), so that what a client costs the server can be counted."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

pytest.importorskip("starlette", reason="pip install 'asyncsched[web]'")

from anyio.abc import TaskGroup
from starlette.types import Message, Scope

from asyncsched.specs import AppDef, Role
from docs.examples.asgi_app import StreamLimits, StreamSlots, app

TERMINAL = (b'"state": "SUCCEEDED"', b'"state": "FAILED"')


class Client:
    """One ``GET /events`` through the ASGI app, as uvicorn would call it.

    ``reading`` cleared makes every send block until it is set again, as a
    send to a client whose socket is full does.
    """

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.reading = anyio.Event()
        self.reading.set()
        self.left = anyio.Event()
        self._changed = anyio.Event()

    async def receive(self) -> Message:
        await self.left.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if message["type"] != "http.response.body":
            return
        await self.reading.wait()
        self.bodies.append(message.get("body", b""))
        self._changed.set()
        self._changed = anyio.Event()

    @property
    def frames(self) -> list[bytes]:
        return [f for f in b"".join(self.bodies).split(b"\n\n") if f]

    def ids(self, kind: bytes = b"") -> list[bytes]:
        """The ids of the frames (of event ``kind``), in the order they came."""
        return [
            line.removeprefix(b"id: ")
            for frame in self.frames
            if kind in frame
            for line in frame.split(b"\n")
            if line.startswith(b"id: ")
        ]

    async def until(self, predicate: Callable[[Client], bool]) -> None:
        with anyio.fail_after(60):
            while not predicate(self):
                await self._changed.wait()

    def ended(self, app_id: str) -> bool:
        tag = f'"app_id": "{app_id}"'.encode()
        return any(
            tag in f and b"event: app\n" in f and any(t in f for t in TERMINAL)
            for f in self.frames
        )


def request_scope() -> Scope:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/events",
        "raw_path": b"/events",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8000")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


@asynccontextmanager
async def example(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limits: StreamLimits
) -> AsyncIterator[TaskGroup]:
    """The example's lifespan with ``limits``; a task group to run clients in."""
    monkeypatch.setenv("ASYNCSCHED_STATE_DIR", str(tmp_path / "state"))
    async with app.router.lifespan_context(app), anyio.create_task_group() as tg:
        app.state.stream_limits = limits
        app.state.streams = StreamSlots(limits.max_streams)
        yield tg
        tg.cancel_scope.cancel()


def open_stream(tg: TaskGroup, client: Client) -> None:
    tg.start_soon(app, request_scope(), client.receive, client.send)


async def run_app(script: str) -> str:
    """Run ``sh -c script`` to its end on the example's runner; its app id."""
    runner = app.state.runner
    role = Role("main", image="", entrypoint="sh", args=["-c", script])
    handle = await runner.run(AppDef("hub-test", roles=[role]), "local_cwd")
    await runner.wait(handle)
    return str(handle.rsplit("/", 1)[1])


def has_current(client: Client) -> bool:
    return any(b"event: current\n" in f for f in client.frames)


async def test_hub_clients_cost_one_task_each_and_all_get_every_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limits = StreamLimits(max_streams=200)
    async with example(tmp_path, monkeypatch, limits) as tg:
        await run_app("exit 0")  # every client starts with its current event
        first = Client()
        open_stream(tg, first)  # starts the hub
        await first.until(has_current)
        before = len(asyncio.all_tasks())
        clients = [Client() for _ in range(100)]
        for client in clients:
            open_stream(tg, client)
        for client in clients:
            await client.until(has_current)
        # the task that runs each request (uvicorn's), and one more each:
        # the task that waits for the client to leave; no producer per client
        # (a few tasks of the runner's own may come and go meanwhile)
        assert len(asyncio.all_tasks()) - before <= 2 * len(clients) + 10

        app_id = await run_app("exit 3")
        for client in [first, *clients]:
            await client.until(lambda c: c.ended(app_id))
        assert len({tuple(c.ids()) for c in clients}) == 1  # the same, in order
        for client in clients:
            client.left.set()
    assert app.state.streams.open == 0


async def test_hub_client_that_falls_behind_gets_every_event_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a queue of 2 KiB: a few events fill it while the slow client reads nothing
    limits = StreamLimits(max_streams=10, buffer_bytes=2048, stall_s=120)
    async with example(tmp_path, monkeypatch, limits) as tg:
        await run_app("exit 0")
        fast, slow = Client(), Client()
        for client in (fast, slow):
            open_stream(tg, client)
            await client.until(has_current)
        slow.reading = anyio.Event()  # its socket is full from now on
        apps = [await run_app(f"exit {code}") for code in (0, 1, 0, 2, 0)]
        await fast.until(lambda c: c.ended(apps[-1]))
        assert not slow.ended(apps[0])
        slow.reading.set()  # it reads again
        await slow.until(lambda c: c.ended(apps[-1]))
        assert slow.ids() == fast.ids()  # every event, none twice, in order
        await run_app("exit 0")  # and the hub feeds it again afterwards
        await slow.until(lambda c: len(c.ids()) == len(fast.ids()))
        assert slow.ids() == fast.ids()


class Told(logging.Handler):
    """Sets ``seen`` when the example logs a message containing ``text``."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.seen = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.seen.set()


async def test_hub_client_that_reads_nothing_is_told_lagged_and_others_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limits = StreamLimits(max_streams=10, buffer_bytes=2048, stall_s=0.5)
    dropped = Told("dropped a stalled client")
    logger = logging.getLogger("asyncsched.examples.asgi_app")
    logger.addHandler(dropped)
    try:
        async with example(tmp_path, monkeypatch, limits) as tg:
            await run_app("exit 0")
            fast, stalled = Client(), Client()
            for client in (fast, stalled):
                open_stream(tg, client)
                await client.until(has_current)
            stalled.reading = anyio.Event()  # it reads nothing from now on
            apps = [await run_app("exit 0") for _ in range(5)]
            await fast.until(lambda c: c.ended(apps[-1]))
            with anyio.fail_after(60):  # its queue waits 0.5 s for it, then is dropped
                await dropped.seen.wait()
            stalled.reading.set()  # it reads at last: the end of its stream
            await stalled.until(lambda c: c.frames[-1].startswith(b"event: lagged"))
            assert b"open it again" in stalled.frames[-1]
            later = await run_app("exit 0")
            await fast.until(lambda c: c.ended(later))  # the others go on
    finally:
        logger.removeHandler(dropped)
