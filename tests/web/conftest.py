"""A real uvicorn serving docs/examples/asgi_app.py, for the web tests.

``service`` starts ``uvicorn`` in a child process, as a user would run it
(``docs.examples.asgi_app:app`` imported from the repository root), on a
loopback socket the test process binds (port 0, so no port is guessed) and
hands over as an inherited file descriptor. The child has its own
``ASYNCSCHED_STATE_DIR``. At the end it gets SIGTERM: uvicorn shuts down, the
lifespan closes the runner, and every app still running is stopped.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psutil
import pytest

ROOT = Path(__file__).parents[2]
SERVE = """
import socket, sys, uvicorn
sock = socket.socket(fileno=int(sys.argv[1]))
http, loop = sys.argv[2:4] or ["auto", "auto"]  # uvicorn's parser and loop
config = uvicorn.Config(
    "docs.examples.asgi_app:app",
    log_level="info",
    timeout_graceful_shutdown=2,
    http=http,
    loop=loop,
)
uvicorn.Server(config).run(sockets=[sock])
"""


@dataclass
class Service:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path


@contextmanager
def serving(
    tmp: Path,
    host: str = "127.0.0.1",
    env: dict[str, str] | None = None,
    port: int = 0,
    pure_python: bool = False,
) -> Iterator[Service]:
    """Run uvicorn on the example until the block ends, then SIGTERM it.

    It listens on ``host`` (a loopback address) at ``port`` (0: a free one;
    give the port of a server that was killed to restart it in its place);
    ``env`` adds environment variables (the example's ``ASYNCSCHED_WEB_*``
    settings). uvicorn picks uvloop and httptools when they are installed
    (the ``web`` extra); ``pure_python`` runs it on asyncio's loop and h11.
    """
    for module in ("uvicorn", "starlette"):  # the `web` extra
        pytest.importorskip(module, reason="pip install 'asyncsched[web]'")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)  # requests queue here until uvicorn has started
    url = f"http://{host}:{sock.getsockname()[1]}"
    env = {**os.environ, "ASYNCSCHED_STATE_DIR": str(tmp / "state"), **(env or {})}
    log = tmp / "server.log"
    server = ["h11", "asyncio"] if pure_python else ["auto", "auto"]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", SERVE, str(sock.fileno()), *server],
            cwd=ROOT,
            env=env,
            pass_fds=[sock.fileno()],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    sock.close()
    try:
        ready = httpx2.get(f"{url}/apps", timeout=30)
        assert ready.status_code == 200, log.read_text()
        yield Service(url, proc, log)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            pytest.fail(f"uvicorn did not stop on SIGTERM:\n{log.read_text()}")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    with serving(tmp_path_factory.mktemp("web")) as running:
        yield running


@pytest.fixture
async def client(service: Service) -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(base_url=service.url, timeout=30) as c:
        yield c


async def sse_events(response: httpx2.Response) -> AsyncIterator[tuple[str, Any]]:
    """``(event, data)`` for each server-sent event; ``event`` is "message" by default."""
    event, data = "message", ""
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            event = line.removeprefix("event: ")
        elif line.startswith("data: "):
            data = line.removeprefix("data: ")
        elif not line and data:
            yield event, json.loads(data)
            event, data = "message", ""


def process_tree(pid: int) -> list[int]:
    """``pid`` and the pids of all its descendants."""
    try:
        return [pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))]
    except psutil.NoSuchProcess:
        return []


async def eventually(
    predicate: Callable[[], bool], what: str, timeout: float = 10
) -> None:
    """Poll ``predicate`` until it is true; fail naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting until {what}")
        await anyio.sleep(0.02)


def gone(pids: list[int]) -> bool:
    """True when none of ``pids`` is a live (non-zombie) process."""
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            continue
    return True
