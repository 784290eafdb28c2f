"""The in-memory window of a followed stream: what it hands out, what it keeps."""

from __future__ import annotations

from pathlib import Path
from unittest.mock import ANY

import pytest

from asyncsched.schedulers.local._log_window import WINDOW_BYTES, LogWindow
from asyncsched.schedulers.local._logs import ReplicaLog, create_log_files
from asyncsched.schedulers.local._open_files import OpenFiles


def test_a_follower_gets_every_byte_from_its_offset_once_in_order() -> None:
    w = LogWindow(start=100)
    reader = w.join(100)
    for i in range(10):
        w.add(b"%d\n" % i, float(i))
    taken = w.take(reader, 100, 1 << 20)
    assert taken is not None
    assert b"".join(c[0] for c in taken) == b"".join(b"%d\n" % i for i in range(10))
    assert [c[2] for c in taken] == [float(i) for i in range(10)]  # arrival times
    assert w.take(reader, taken[-1][1], 1 << 20) == []  # nothing new


def test_an_offset_inside_a_chunk_starts_there() -> None:
    w = LogWindow(start=0)
    reader = w.join(0)
    w.add(b"abcdef", 1.0)
    w.add(b"gh", 2.0)
    assert w.take(reader, 4, 1 << 20) == [(b"ef", 6, 1.0), (b"gh", 8, 2.0)]


def test_chunks_every_follower_took_are_dropped() -> None:
    w = LogWindow(start=0)
    fast, slow = w.join(0), w.join(0)
    w.add(b"x" * 1000, 1.0)
    w.add(b"y" * 1000, 2.0)
    assert w.take(fast, 0, 1 << 20) is not None
    assert w.held >= 2000  # the slow one has not taken them yet
    assert w.take(slow, 0, 1000) == [(b"x" * 1000, 1000, 1.0)]
    assert w.start == 1000
    w.leave(slow)
    assert w.held == 0
    assert w.start == w.end == 2000


def test_a_lagging_follower_costs_the_limit_at_most_and_reads_the_file() -> None:
    w = LogWindow(start=0, limit=10_000)
    reader = w.join(0)
    for i in range(1000):  # 1 MB while the follower takes nothing
        w.add(bytes(1000), float(i))
        assert w.held <= 10_000 + 1000 + 128
    assert w.take(reader, 0, 1 << 20) is None  # behind the window: the file
    assert w.start > 0
    assert w.take(reader, w.start, 1 << 20) is not None


def test_many_tiny_chunks_count_their_overhead_against_the_limit() -> None:
    w = LogWindow(start=0, limit=64_000)
    w.join(0)
    for i in range(100_000):
        w.add(b"\n", float(i))
    assert w.held <= 64_000 + 129
    assert w.end - w.start < 1000  # a byte each, but each costs its tuple


def test_a_stopped_window_sends_every_follower_to_the_file() -> None:
    w = LogWindow(start=0)
    reader = w.join(0)
    w.add(b"a\n", 1.0)
    w.stop()
    assert w.take(reader, 0, 1 << 20) is None
    assert w.held == 0


def test_a_window_keeps_a_mebibyte_at_most_by_default() -> None:
    assert WINDOW_BYTES == 1 << 20
    w = LogWindow(start=0)
    w.join(0)
    for i in range(100):
        w.add(bytes(64 << 10), float(i))
    assert w.held <= WINDOW_BYTES + (64 << 10) + 128


@pytest.mark.anyio
async def test_a_stream_is_kept_in_memory_only_while_someone_follows_it(
    tmp_path: Path,
) -> None:
    replica_dir = str(tmp_path / "r")
    log = ReplicaLog(replica_dir, create_log_files(replica_dir), OpenFiles(4))
    log.write("stdout", b"before\n")
    joined = log.join_window("stdout")
    assert joined is not None
    window, reader = joined
    assert window.start == window.end == len(b"before\n")  # the rest: the file
    log.write("stdout", b"after\n")
    log.write("stderr", b"not followed\n")
    assert window.take(reader, window.start, 1 << 20) == [
        (b"after\n", len(b"before\nafter\n"), ANY)
    ]
    log.leave_window("stdout", window, reader)
    log.write("stdout", b"unseen\n")
    assert window.end == len(b"before\nafter\n")  # no follower: not kept
    again = log.join_window("stdout")
    assert again is not None
    assert again[0] is not window
    log.close()
    assert log.join_window("stdout") is None  # closed: nothing more comes
