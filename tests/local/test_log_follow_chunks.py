"""Lines of a followed log, cut from the chunks the supervisor hands over in memory.

A follower in the supervising process takes what the supervisor appended
since its last turn as a list of chunks (one per pipe read). These tests
drive a :class:`ReplicaLog` directly, so the chunking is exact: lines split
across chunks, a character split across chunks, a line over the cap, many
small chunks taken at once, and a follower closed in the middle of a batch.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path

import anyio
import pytest

from asyncsched.schedulers.local._logs import (
    ReplicaLog,
    create_log_files,
    read_line_batches,
)
from asyncsched.schedulers.local._open_files import OpenFiles

pytestmark = pytest.mark.anyio


@contextlib.contextmanager
def replica_log(tmp_path: Path) -> Iterator[ReplicaLog]:
    replica_dir = str(tmp_path / "r")
    files = OpenFiles(4)
    log = ReplicaLog(replica_dir, create_log_files(replica_dir), files)
    try:
        yield log
    finally:
        log.close()
        files.close()


def follow(log: ReplicaLog, max_line_bytes: int = 1 << 20) -> AsyncGenerator[list[str]]:
    """Batches of ``log``'s stdout, followed from memory."""
    return read_line_batches(
        log.paths["stdout"],
        index=None,
        since=None,
        until=None,
        follow=None,
        max_line_bytes=max_line_bytes,
        live=(log, "stdout"),
    )


async def started(log: ReplicaLog, batches: AsyncGenerator[list[str]]) -> None:
    """Write a first line and take it: the follower follows from memory now."""
    log.write("stdout", b"start\n")
    with anyio.fail_after(10):
        assert await anext(batches) == ["start\n"]


def pieces(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


async def test_small_chunks_taken_at_once_are_cut_in_one_go_in_order(
    tmp_path: Path,
) -> None:
    # "é" (2 bytes) and "€" (3 bytes) fall across chunk boundaries too
    text = "".join(f"line {i} é€ {'x' * (i % 13)}\n" for i in range(500))
    with replica_log(tmp_path) as log:
        batches = follow(log)
        async with contextlib.aclosing(batches):
            await started(log, batches)
            for chunk in pieces(text.encode() + b"no newline", 7):
                log.write("stdout", chunk)
            log.set_final()
            with anyio.fail_after(10):
                got = [batch async for batch in batches]
    lines = [*text.splitlines(keepends=True), "no newline"]
    assert [line for batch in got for line in batch] == lines
    # one batch for what one turn took (the partial tail aside), not one per chunk
    assert len(got) == 2, [len(batch) for batch in got]


async def test_a_line_over_the_cap_split_across_small_chunks_comes_in_capped_pieces(
    tmp_path: Path,
) -> None:
    line = "€" * 30 + "\n"  # 91 bytes; a cap of 16 cuts it between characters
    with replica_log(tmp_path) as log:
        batches = follow(log, max_line_bytes=16)
        async with contextlib.aclosing(batches):
            await started(log, batches)
            for chunk in pieces(line.encode() * 3, 5):
                log.write("stdout", chunk)
            log.set_final()
            with anyio.fail_after(10):
                got = [item async for batch in batches for item in batch]
    assert "".join(got) == line * 3
    assert all(len(item.encode()) <= 16 for item in got)
    assert sum(item.endswith("\n") for item in got) == 3


async def test_a_follower_closed_in_the_middle_of_a_batch_leaves_the_window(
    tmp_path: Path,
) -> None:
    with replica_log(tmp_path) as log:
        batches = follow(log)
        async with contextlib.aclosing(batches):
            await started(log, batches)
            log.write("stdout", b"".join(b"%d\n" % i for i in range(1000)))
            with anyio.fail_after(10):
                batch = await anext(batches)
            assert batch[:2] == ["0\n", "1\n"]  # the caller stops after two lines
            assert "stdout" in (log._windows or {})  # held while it follows
        # closed: the window went with its only follower (a new one makes a new one)
        assert log._windows == {}


async def test_a_follower_cancelled_while_waiting_leaves_the_window(
    tmp_path: Path,
) -> None:
    with replica_log(tmp_path) as log:
        batches = follow(log)
        async with contextlib.aclosing(batches):
            await started(log, batches)
            with anyio.move_on_after(0.05) as scope:  # nothing more comes
                await anext(batches)
            assert scope.cancelled_caught
        assert log._windows == {}
