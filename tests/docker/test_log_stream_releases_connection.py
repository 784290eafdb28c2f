"""Docker log streams: closing releases the connection; long and \\r lines are cheap."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator

import aiodocker
import aiohttp
import anyio
import psutil
import pytest

from asyncsched.errors import InvalidRunConfigException
from asyncsched.schedulers import get_scheduler
from asyncsched.schedulers.docker._logs import _frames
from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.schedulers.shared.lines import LineAssembler
from asyncsched.specs import AppState

from .conftest import NETWORK, SESSION, Engine, sweep
from .helpers import lines, sh_app

MiB = 1 << 20


def _unix_sockets() -> int:
    return len(psutil.Process().net_connections(kind="unix"))


async def _sockets_after_pending_closes() -> int:
    """The socket count once closes already requested are done.

    An asyncio transport closes its socket in a callback that ``close()``
    schedules; yielding to the loop once runs it. (A response left to the
    garbage collector would take more passes: the finalizer only schedules
    a task that closes it.)
    """
    await anyio.sleep(0)
    return _unix_sockets()


async def _settled(baseline: int) -> int:
    """The socket count once it is back at ``baseline`` (or after 5 s)."""
    with anyio.move_on_after(5):
        while _unix_sockets() > baseline:
            await anyio.sleep(0.01)
    return _unix_sockets()


@pytest.fixture
async def unpooled(docker_ready: Engine) -> AsyncIterator[DockerScheduler]:
    """A scheduler whose client closes every connection after its response.

    No idle pooled connection can hide a held one: while a log stream is
    open, exactly one more socket exists.
    """
    assert docker_ready.host.startswith("unix://"), docker_ready.host
    connector = aiohttp.UnixConnector(
        docker_ready.host.removeprefix("unix://"), force_close=True
    )
    session = aiohttp.ClientSession(connector=connector)
    client = aiodocker.Docker(
        url="unix://localhost", connector=connector, session=session
    )
    try:
        async with DockerScheduler(
            SESSION, client=client, network=NETWORK, stop_timeout=1
        ) as scheduler:
            yield scheduler
    finally:
        await client.close()
        await session.close()
        await sweep(docker_ready.host)


def _frame(stream: int, payload: bytes) -> bytes:
    return bytes([stream, 0, 0, 0]) + len(payload).to_bytes(4, "big") + payload


def test_frames_keep_stdout_and_stderr_partials_apart() -> None:
    data = (
        _frame(1, b"out-")
        + _frame(2, b"err line\n")
        + _frame(1, b"line\n")
        + _frame(2, b"")
    )
    assemblers = {1: LineAssembler(), 2: LineAssembler()}
    out: list[str] = []
    buf = bytearray(data + _frame(1, b"incomplete")[:6])
    used = _frames(buf, assemblers, out)
    assert out == ["err line\n", "out-line\n"]
    assert used == len(data)  # the incomplete frame waits for more bytes


def test_an_invalid_max_line_bytes_is_rejected_before_any_daemon_call() -> None:
    with pytest.raises(InvalidRunConfigException, match="max_line_bytes"):
        DockerScheduler("test", docker_host="unix:///nonexistent", max_line_bytes=2)


@pytest.mark.docker
async def test_breaking_after_the_first_line_200_times_leaves_no_connection(
    unpooled: DockerScheduler,
) -> None:
    sched = unpooled
    app_id = await sched.submit(sh_app("echo one; echo two"), {})
    await sched.wait(app_id, timeout=30)
    assert await lines(sched, app_id) == ["one\n", "two\n"]
    baseline = await _sockets_after_pending_closes()
    fds = psutil.Process().num_fds()
    for _ in range(200):
        async for first in sched.log_iter(app_id, "worker"):
            assert first == "one\n"
            break
    assert await _settled(baseline) == baseline
    assert psutil.Process().num_fds() <= fds


@pytest.mark.docker
async def test_aclose_closes_a_followed_log_stream_at_once(
    unpooled: DockerScheduler,
) -> None:
    sched = unpooled
    app_id = await sched.submit(
        sh_app("echo first; while true; do echo more; sleep 0.05; done"), {}
    )
    assert await lines(sched, app_id, regex="nothing") == []
    baseline = await _sockets_after_pending_closes()
    for regex in (None, "first"):
        stream = sched.log_iter(app_id, "worker", regex=regex, should_tail=True)
        assert inspect.isasyncgen(stream)
        with anyio.fail_after(30):
            assert await anext(stream) == "first\n"
        assert _unix_sockets() == baseline + 1  # the stream holds its connection...
        await stream.aclose()
        # ...until closed: gone in the same loop pass, not when the GC runs
        assert await _sockets_after_pending_closes() == baseline
    desc = await sched.describe(app_id)
    assert desc is not None
    assert desc.state == AppState.RUNNING
    await sched.cancel(app_id)


@pytest.mark.docker
async def test_progress_bar_output_comes_back_as_one_line(
    sched: DockerScheduler,
) -> None:
    # ~1.3 MB of tqdm-style \r updates: the daemon hands them over as 16 KiB
    # partial-line frames, joined again in linear time
    script = (
        "i=0; while [ $i -lt 60000 ]; do printf '\\r%05d|#####|' $i; i=$((i+1)); "
        "done; echo"
    )
    async with get_scheduler(
        "local_docker",
        SESSION,
        network=NETWORK,
        stop_timeout=1,
        max_line_bytes=4 * MiB,
    ) as big:
        app_id = await big.submit(sh_app(script), {})
        await big.wait(app_id, timeout=120)
        [line] = [x async for x in big.log_iter(app_id, "worker")]
    assert line.endswith("|\n")
    assert line.count("\r") == 60000
    assert line.startswith("\r00000|#####|\r00001|")


@pytest.mark.docker
async def test_a_32_mib_line_comes_back_in_1_mib_pieces(
    sched: DockerScheduler, docker_ready: Engine
) -> None:
    script = (
        "s=x; i=0; while [ $i -lt 20 ]; do s=$s$s; i=$((i+1)); done; "
        'i=0; while [ $i -lt 32 ]; do printf %s "$s"; i=$((i+1)); done; echo; echo end'
    )
    app_id = await sched.submit(sh_app(script), {})
    await sched.wait(app_id, timeout=120)
    sizes = []
    newlines = 0
    async for piece in sched.log_iter(app_id, "worker"):
        sizes.append(len(piece))
        newlines += piece.count("\n")
    assert max(sizes) == MiB
    assert sum(sizes) == 32 * MiB + 1 + 4
    assert newlines == 2
