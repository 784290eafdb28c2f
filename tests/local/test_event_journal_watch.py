"""A process's readers learn of other processes' journal writes from the kernel
(inotify) where it can tell, and read what the page cache holds in the loop:
no poll while the journal is quiet, no worker thread for a few new lines."""

from __future__ import annotations

import functools
import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import psutil
import pytest

from asyncsched.schedulers.local import LocalScheduler
from asyncsched.schedulers.local._journal import (
    JournalFile,
    read_info,
    segment_names,
)
from asyncsched.schedulers.local._journal_events import _Reader
from asyncsched.schedulers.local._journal_watch import watch_journal

from .conftest import app_of, sh_role

pytestmark = pytest.mark.anyio

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="inotify is Linux's"
)


class Wakes:
    """The watch's calls (``new_segment`` of each) since :meth:`arm`."""

    def __init__(self) -> None:
        self.calls: list[bool] = []
        self._next = anyio.Event()

    def __call__(self, new_segment: bool) -> None:
        self.calls.append(new_segment)
        self._next.set()

    def arm(self) -> None:
        """Forget the calls so far."""
        self.calls = []
        self._next = anyio.Event()

    async def wait(self) -> list[bool]:
        """The calls since :meth:`arm`, once there is one."""
        with anyio.fail_after(10):
            await self._next.wait()
        return self.calls


def append_in_thread(directory: str, segment_bytes: int = 4 << 20) -> None:
    JournalFile(directory, segment_bytes=segment_bytes).append([{"k": "app"}])


@asynccontextmanager
async def watched(
    tmp_path: Path, *, kernel: bool = True
) -> AsyncIterator[tuple[str, Wakes, str]]:
    """A new journal and a watch of it past its first look: its directory,
    the watch's wakes and its mode; the watch is stopped on the way out."""
    directory = str(tmp_path / "journal")
    JournalFile(directory).ensure()
    wakes = Wakes()
    async with anyio.create_task_group() as tg:
        watch = functools.partial(watch_journal, kernel=kernel)
        mode = await tg.start(watch, directory, wakes, lambda: True)
        await wakes.wait()  # the first look, right after the watch was set
        yield directory, wakes, mode
        tg.cancel_scope.cancel()


async def each_write_wakes_the_watch(directory: str, wakes: Wakes) -> None:
    for _ in range(3):
        wakes.arm()
        await anyio.to_thread.run_sync(append_in_thread, directory)
        assert await wakes.wait() == [False]  # a write: no new segment


@linux_only
async def test_a_write_of_another_process_wakes_the_kernel_watch(
    tmp_path: Path,
) -> None:
    async with watched(tmp_path) as (directory, wakes, mode):
        assert mode == "kernel"
        await each_write_wakes_the_watch(directory, wakes)


@linux_only
async def test_the_kernel_watch_tells_of_a_new_segment_and_outlives_a_recreated_journal(
    tmp_path: Path,
) -> None:
    async with watched(tmp_path) as (directory, wakes, _):
        # a tiny segment bound: the second append starts a new segment
        await anyio.to_thread.run_sync(append_in_thread, directory, 1)
        wakes.arm()
        await anyio.to_thread.run_sync(append_in_thread, directory, 1)
        assert True in await wakes.wait()
        # the journal deleted and made anew: the watch follows the new one
        await anyio.to_thread.run_sync(shutil.rmtree, directory)
        with anyio.fail_after(20):
            while True:
                wakes.arm()
                await anyio.to_thread.run_sync(append_in_thread, directory)
                if await wakes.wait() == [False]:
                    break  # a plain write, seen by a kernel watch again


async def test_without_kernel_notifications_the_watch_polls_the_size(
    tmp_path: Path,
) -> None:
    async with watched(tmp_path, kernel=False) as (directory, wakes, mode):
        assert mode == "poll"
        await each_write_wakes_the_watch(directory, wakes)


@linux_only
def test_new_lines_are_read_without_a_blocking_read_until_a_segment_may_have_been_added(
    tmp_path: Path,
) -> None:
    directory = str(tmp_path / "journal")
    info = JournalFile(directory).ensure()
    reader = _Reader(directory, info.journal_id)
    reader.open_at(0)
    assert reader.read(segments=7) == []  # the header
    assert reader.read(segments=7) == []  # the end: the directory was listed
    append_in_thread(directory)
    lines = reader.read_nowait(7)
    assert lines is not None
    assert [line["s"] for line in lines] == [1]
    assert reader.read_nowait(7) == []  # the end, and no segment since
    assert reader.read_nowait(8) is None  # maybe a new one: list the directory
    reader.close()


async def test_a_reader_of_a_quiet_journal_is_not_woken_by_polls() -> None:
    """While nothing is written, a following reader's process sleeps: no look
    at the journal every few milliseconds (its main thread is switched out
    only by the reader's once-a-second checks and this test's sleep)."""
    me = psutil.Process()
    async with LocalScheduler("quiet", cancel_grace=2.0) as sched:
        app_id = await sched.submit(app_of(sh_role("exit 0")), {})
        ended = anyio.Event()

        async def follow() -> None:
            async with sched.events() as stream:
                async for event in stream:
                    if event.app_id == app_id and event.terminal:
                        ended.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(follow)
            with anyio.fail_after(30):
                await ended.wait()
            await anyio.sleep(0.5)  # the last batch's wakes are over
            before = me.num_ctx_switches().voluntary
            await anyio.sleep(2.0)
            switches = me.num_ctx_switches().voluntary - before
            tg.cancel_scope.cancel()
    assert switches < 30, f"{switches} wake-ups in 2 s of a quiet journal"


def test_a_segment_bound_below_one_line_starts_a_segment_per_batch(
    tmp_path: Path,
) -> None:
    """Even a bound smaller than a segment's header appends every batch (each
    in a segment of its own), so the watch is told of each new segment."""
    directory = str(tmp_path / "journal")
    journal = JournalFile(directory, segment_bytes=1, segments=8)
    journal.ensure()
    assert [journal.append([{"k": "app"}]) for _ in range(3)] == [1, 2, 3]
    assert len(segment_names(directory)) == 3
    info = read_info(directory)
    assert info is not None
    assert (info.first, info.last) == (1, 3)
