"""A Docker daemon that accepts connections and never answers gives a clear error.

The "daemon" is a unix socket server in the test: the real aiodocker client
talks to a real socket, nothing is mocked. No Docker engine is needed.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from asyncsched.errors import SchedulerUnavailableError
from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.specs import AppDef, Role


@pytest.fixture
def hung_socket(tmp_path: Path) -> Iterator[str]:
    """A unix socket whose server accepts every connection and never replies."""
    path = tmp_path / "docker.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(64)
    held: list[socket.socket] = []

    def accept_forever() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:  # closed: the test is over
                return
            held.append(conn)

    thread = threading.Thread(target=accept_forever, daemon=True)
    thread.start()
    try:
        yield f"unix://{path}"
    finally:
        server.shutdown(socket.SHUT_RDWR)
        server.close()
        thread.join(5)
        for conn in held:
            conn.close()


def _scheduler(host: str) -> DockerScheduler:
    return DockerScheduler(
        "hung", docker_host=host, connect_timeout=0.5, read_timeout=0.5
    )


async def test_submit_to_a_hung_daemon_raises_unavailable(hung_socket: str) -> None:
    app = AppDef("hi", roles=[Role("hi", image="busybox", entrypoint="true")])
    async with _scheduler(hung_socket) as sched:
        with anyio.fail_after(10), pytest.raises(SchedulerUnavailableError) as info:
            await sched.submit(app)
    assert "did not answer in time" in str(info.value)


async def test_queries_to_a_hung_daemon_raise_unavailable(hung_socket: str) -> None:
    async with _scheduler(hung_socket) as sched:
        with anyio.fail_after(10):
            with pytest.raises(SchedulerUnavailableError):
                await sched.describe("some-app")
            with pytest.raises(SchedulerUnavailableError):
                await sched.list()
            with pytest.raises(SchedulerUnavailableError):
                await sched.wait("some-app", timeout=5)
            with pytest.raises(SchedulerUnavailableError):
                async for _ in sched.log_iter("some-app", "worker"):
                    pass  # pragma: no cover - raises first


def test_timeouts_must_be_positive() -> None:
    with pytest.raises(ValueError, match="read_timeout"):
        DockerScheduler("x", read_timeout=0)
