"""A log followed in the supervising process comes from memory, complete and in order.

The supervisor hands what it copies from a replica's pipe to the followers of
the same process; a follower that falls behind reads the file. These tests
check that the output is then read once, not twice (the pipe, not the file
again), that a stalled follower costs bounded memory and still gets every
line once it goes on, and that streams, order and time bounds hold as they
do for a finished log.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager
from pathlib import Path

import anyio
import psutil
import pytest

from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState

from ._helpers import early_then_late, lines
from .conftest import app_of, py_role

pytestmark = pytest.mark.anyio

MiB = 1 << 20


def gated_writer(go: Path, total: int) -> str:
    """Prints ``ready``, waits for ``go``, then writes ``total`` bytes of
    numbered 80-byte lines to stdout."""
    return (
        "import os, sys, time\n"
        "print('ready', flush=True)\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.01)\n"
        "out = sys.stdout.buffer\n"
        "pad = b'x' * 71\n"
        f"for i in range({total // 80}): out.write(b'%08d%s\\n' % (i, pad))\n"
    )


def numbered(i: int) -> str:
    return f"{i:08d}{'x' * 71}\n"


@asynccontextmanager
async def following_gated_writer(
    sched: LocalScheduler, log_dir: Path, total: int
) -> AsyncIterator[tuple[str, Path, AsyncIterator[str]]]:
    """A :func:`gated_writer` replica's app id, its ``go`` file and a follower
    of its stdout that has read ``ready``; the follower is closed on the way out."""
    go = log_dir / "go"
    app_id = await sched.submit(
        app_of(py_role(gated_writer(go, total))), {"log_dir": str(log_dir)}
    )
    it = sched.log_iter(app_id, "worker", should_tail=True, streams="stdout")
    async with aclosing(it):
        with anyio.fail_after(30):
            assert await anext(it) == "ready\n"  # the follower is following
        yield app_id, go, it


async def _expect_numbered(it: AsyncIterator[str], count: int) -> None:
    i = 0
    async for line in it:
        assert line == numbered(i)
        i += 1
    assert i == count


async def test_followed_output_is_read_once_from_the_pipe_not_again_from_the_file(
    sched: LocalScheduler, log_dir: Path
) -> None:
    total = 8 * MiB
    proc = psutil.Process()
    async with following_gated_writer(sched, log_dir, total) as (_, go, it):
        read_before = proc.io_counters().read_chars
        go.touch()
        with anyio.fail_after(60):
            await _expect_numbered(it, total // 80)
    read = proc.io_counters().read_chars - read_before
    # the supervisor reads the pipe once (8 MiB); reading the file again
    # while following would make it 16 MiB
    assert read < 1.5 * total, f"{read / MiB:.1f} MiB read for {total / MiB} MiB"


async def test_a_stalled_follower_holds_bounded_memory_and_then_gets_every_line(
    sched: LocalScheduler, log_dir: Path
) -> None:
    total = 24 * MiB
    proc = psutil.Process()
    async with following_gated_writer(sched, log_dir, total) as (app_id, go, it):
        rss_before = proc.memory_info().rss
        go.touch()
        # the follower takes nothing while the replica writes all of it
        desc = await sched.wait(app_id, timeout=60)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
        grown = proc.memory_info().rss - rss_before
        with anyio.fail_after(60):  # it went far past memory: the rest from the file
            await _expect_numbered(it, total // 80)
    assert grown < 8 * MiB, f"{grown / MiB:.1f} MiB held for a stalled follower"


INTERLEAVED = (
    "import sys\n"
    "for i in range(20000):\n"
    "    s = sys.stdout if i % 3 else sys.stderr\n"
    "    s.write(f'line{i}\\n')\n"
    "    if i % 7 == 0: s.flush()\n"
)


async def test_each_stream_followed_at_once_equals_its_file_line_for_line(
    sched: LocalScheduler, log_dir: Path
) -> None:
    app_id = await sched.submit(app_of(py_role(INTERLEAVED)), {"log_dir": str(log_dir)})
    followed: dict[str, list[str]] = {}

    async def follow(stream: str) -> None:
        got = followed[stream] = []
        async for line in sched.log_iter(
            app_id, "worker", should_tail=True, streams=stream
        ):
            got.append(line)  # noqa: PERF401 -- read while the replica writes

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for stream in ("combined", "stdout", "stderr"):
                tg.start_soon(follow, stream)
    assert len(followed["combined"]) == 20000
    for stream in ("combined", "stdout", "stderr"):
        assert followed[stream] == await lines(sched, app_id, streams=stream)
    assert sorted(followed["combined"]) == sorted(f"line{i}\n" for i in range(20000))


async def test_followed_since_and_until_keep_the_arrival_times(
    sched: LocalScheduler, log_dir: Path
) -> None:
    go = log_dir / "go"
    app_id, middle = await early_then_late(sched, log_dir, go, then="time.sleep(60)\n")
    since = sched.log_iter(app_id, "worker", should_tail=True, since=middle)
    until = sched.log_iter(app_id, "worker", should_tail=True, until=middle)
    async with aclosing(since), aclosing(until):
        with anyio.fail_after(30):
            assert await anext(until) == "early\n"  # both follow the log now
            go.touch()
            assert await anext(since) == "late\n"
            # "late" arrived after until: the follower ends though the app runs
            assert [line async for line in until] == []
    await sched.cancel(app_id)


async def test_a_follower_ends_with_every_line_when_the_replica_truncates_its_log(
    sched: LocalScheduler, log_dir: Path
) -> None:
    # the replica can write in its log dir: emptying its own log must neither
    # lose what the supervisor copies next nor keep a follower spinning
    target = log_dir / "target"
    code = (
        "import os, time\nprint('before', flush=True)\n"
        f"while not os.path.exists({str(target)!r}): time.sleep(0.01)\n"
        f"os.truncate(open({str(target)!r}).read(), 0)\n"
        "for i in range(3): print(f'after{i}', flush=True)\n"
    )
    app_id = await sched.submit(app_of(py_role(code)), {"log_dir": str(log_dir)})
    combined = log_dir / "test" / app_id / "worker" / "0" / "combined.log"
    it = sched.log_iter(app_id, "worker", should_tail=True)
    async with aclosing(it):
        with anyio.fail_after(30):
            assert await anext(it) == "before\n"
            ready = log_dir / "target.tmp"
            ready.write_text(str(combined))
            ready.rename(target)
            assert [line async for line in it] == [f"after{i}\n" for i in range(3)]
