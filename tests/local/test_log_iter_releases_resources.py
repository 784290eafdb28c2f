"""log_iter returns a closeable async generator that holds no file between lines."""

from __future__ import annotations

import contextlib
import inspect
import os

import anyio
import psutil
import pytest

from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState

from .conftest import app_of, py_role

pytestmark = pytest.mark.anyio

PRINT_1000 = "for i in range(1000): print(f'line {i}')"
# prints one line, then keeps printing until killed
TALK_FOREVER = (
    "import sys, time\n"
    "print('first', flush=True)\n"
    "while True:\n"
    "    print('more', flush=True)\n"
    "    time.sleep(0.01)\n"
)


def _log_files_open(app_dir: str) -> list[str]:
    """Log files this process has open for reading (the supervisor's appends aside)."""
    return [
        f.path
        for f in psutil.Process().open_files()
        if f.path.startswith(app_dir) and f.mode == "r"
    ]


async def _app_dir(sched: LocalScheduler, app_id: str) -> str:
    desc = await sched.describe(app_id)
    assert desc is not None
    assert desc.ui_url is not None
    return desc.ui_url.removeprefix("file://")


async def test_log_iter_returns_an_async_generator_with_or_without_regex(
    sched: LocalScheduler,
) -> None:
    app_id = await sched.submit(app_of(py_role("print('hi')")), {})
    await sched.wait(app_id, timeout=30)
    for regex in (None, "h"):
        lines = sched.log_iter(app_id, "worker", regex=regex)
        assert inspect.isasyncgen(lines)
        assert [line async for line in lines] == ["hi\n"]


# asyncio's finalizer closes an abandoned generator quietly; trio warns about
# it by design (close it with aclosing there)
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_breaking_after_the_first_line_1000_times_leaves_no_fd_open(
    sched: LocalScheduler,
) -> None:
    app_id = await sched.submit(app_of(py_role(PRINT_1000)), {})
    desc = await sched.wait(app_id, timeout=30)
    assert desc is not None
    assert desc.state == AppState.SUCCEEDED
    app_dir = await _app_dir(sched, app_id)
    proc = psutil.Process()
    async for _ in sched.log_iter(app_id, "worker"):  # warm up the worker threads
        break
    fds_before = proc.num_fds()
    for _ in range(1000):
        async for first in sched.log_iter(app_id, "worker"):
            assert first == "line 0\n"
            break
    # an abandoned generator is closed by the loop's async-generator finalizer
    # as soon as nothing refers to it: poll briefly for the last one
    with anyio.move_on_after(5):
        while _log_files_open(app_dir) or proc.num_fds() > fds_before:
            await anyio.sleep(0.01)
    assert _log_files_open(app_dir) == []
    assert proc.num_fds() <= fds_before


async def test_aclose_releases_the_log_file_before_returning(
    sched: LocalScheduler,
) -> None:
    app_id = await sched.submit(app_of(py_role(PRINT_1000)), {})
    await sched.wait(app_id, timeout=30)
    app_dir = await _app_dir(sched, app_id)
    for regex in (None, "line"):
        lines = sched.log_iter(app_id, "worker", regex=regex)
        assert await anext(lines) == "line 0\n"
        assert [os.path.basename(p) for p in _log_files_open(app_dir)] == [
            "combined.log"
        ]
        await lines.aclose()
        assert _log_files_open(app_dir) == []


async def test_aclose_of_a_followed_log_returns_at_once_and_releases_it(
    sched: LocalScheduler,
) -> None:
    app_id = await sched.submit(app_of(py_role(TALK_FOREVER)), {})
    app_dir = await _app_dir(sched, app_id)
    proc = psutil.Process()
    fds_before = -1
    for regex in (None, "first", None):
        lines = sched.log_iter(app_id, "worker", regex=regex, should_tail=True)
        with anyio.fail_after(10):
            assert await anext(lines) == "first\n"
            await lines.aclose()  # the app still runs: only closing ends it
        if fds_before < 0:  # the supervisor has opened its index files by now
            fds_before = proc.num_fds()
        with contextlib.suppress(StopAsyncIteration):
            await anext(lines)
            raise AssertionError("a closed generator yielded again")
    assert _log_files_open(app_dir) == []
    assert proc.num_fds() <= fds_before
    desc = await sched.describe(app_id)
    assert desc is not None
    assert desc.state == AppState.RUNNING
    await sched.cancel(app_id)


async def test_cancelling_a_reader_blocked_in_follow_releases_it(
    sched: LocalScheduler,
) -> None:
    app_id = await sched.submit(
        app_of(py_role("import time; print('x', flush=True); time.sleep(60)")), {}
    )
    app_dir = await _app_dir(sched, app_id)
    got: list[str] = []

    async def read() -> None:
        async for line in sched.log_iter(app_id, "worker", should_tail=True):
            got.append(line)  # noqa: PERF401 -- seen line by line, while it runs

    with anyio.move_on_after(30) as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            while not got:  # wait for the first line, then cancel the reader
                await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    assert not scope.cancelled_caught
    assert got == ["x\n"]
    assert _log_files_open(app_dir) == []
    assert os.path.isdir(app_dir)
    await sched.cancel(app_id)
