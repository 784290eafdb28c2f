"""``since``/``until`` seek in the line-time index: reading a window costs
what the window holds, not what the log accumulated over its lifetime."""

from __future__ import annotations

import array
import gc
import os
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path

import pytest

from asyncsched.schedulers.local._logs import INDEX_ENTRY, read_line_batches

T0 = 1_700_000_000.0


def _write(path: Path, chunks: list[tuple[bytes, float]]) -> None:
    """A log written chunk by chunk, each chunk indexed with its time."""
    log = bytearray()
    index = bytearray()
    for data, when in chunks:
        log += data
        index += INDEX_ENTRY.pack(len(log), when)
    path.with_suffix(".log").write_bytes(log)
    path.with_suffix(".idx").write_bytes(index)


def _at(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


async def _read(
    path: Path, since: float | None = None, until: float | None = None
) -> list[str]:
    lines: list[str] = []
    async for batch in read_line_batches(
        str(path.with_suffix(".log")),
        index=str(path.with_suffix(".idx")),
        since=None if since is None else _at(since),
        until=None if until is None else _at(until),
        follow=None,
    ):
        lines += batch
    return lines


# a line's time is the time of the chunk that completed it
CHUNKS = [
    (b"aaa\n", T0 + 1),
    (b"bbb", T0 + 2),  # "bbbbbb\n" is completed by the next chunk
    (b"bbb\n", T0 + 3),
    (b"ccc\nddd\n", T0 + 4),
    (b"eee\n", T0 + 5),
]


@pytest.mark.parametrize(
    ("since", "until", "expected"),
    [
        (None, None, ["aaa\n", "bbbbbb\n", "ccc\n", "ddd\n", "eee\n"]),
        (T0 + 1, None, ["aaa\n", "bbbbbb\n", "ccc\n", "ddd\n", "eee\n"]),
        (T0 + 1.5, None, ["bbbbbb\n", "ccc\n", "ddd\n", "eee\n"]),
        (T0 + 2, None, ["bbbbbb\n", "ccc\n", "ddd\n", "eee\n"]),
        (T0 + 2.5, None, ["bbbbbb\n", "ccc\n", "ddd\n", "eee\n"]),
        (T0 + 3, None, ["bbbbbb\n", "ccc\n", "ddd\n", "eee\n"]),
        (T0 + 3.5, None, ["ccc\n", "ddd\n", "eee\n"]),
        (T0 + 5, None, ["eee\n"]),
        (T0 + 5.5, None, []),
        (None, T0 + 0.5, []),
        (None, T0 + 1, ["aaa\n"]),
        (None, T0 + 2, ["aaa\n"]),
        (None, T0 + 3, ["aaa\n", "bbbbbb\n"]),
        (T0 + 3, T0 + 4, ["bbbbbb\n", "ccc\n", "ddd\n"]),
        (T0 + 4, T0 + 4, ["ccc\n", "ddd\n"]),
        (T0 + 4.5, T0 + 4.7, []),
    ],
)
async def test_window_bounds_are_inclusive_and_exact(
    tmp_path: Path, since: float | None, until: float | None, expected: list[str]
) -> None:
    _write(tmp_path / "stdout", CHUNKS)
    assert await _read(tmp_path / "stdout", since, until) == expected


async def test_lines_past_the_index_count_as_just_arrived(tmp_path: Path) -> None:
    _write(tmp_path / "stdout", CHUNKS)
    with (tmp_path / "stdout.log").open("ab") as f:
        f.write(b"late\n")  # written, not indexed yet
    assert await _read(tmp_path / "stdout", T0 + 4.5) == ["eee\n", "late\n"]
    assert await _read(tmp_path / "stdout", None, T0 + 5) == [
        "aaa\n",
        "bbbbbb\n",
        "ccc\n",
        "ddd\n",
        "eee\n",
    ]


async def test_a_long_line_is_read_from_its_start_when_the_window_begins_inside_it(
    tmp_path: Path,
) -> None:
    # one line written in many small chunks, the window starts mid-line
    chunks = [(b"head\n", T0)]
    chunks += [(b"x" * 1000, T0 + 1 + i) for i in range(300)]
    chunks += [(b"\n", T0 + 400), (b"tail\n", T0 + 401)]
    _write(tmp_path / "stdout", chunks)
    lines = await _read(tmp_path / "stdout", T0 + 150)
    assert lines == ["x" * 300_000 + "\n", "tail\n"]


def _rchar() -> int:
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="Linux /proc only")
async def test_a_one_minute_window_of_a_long_log_reads_and_holds_little(
    tmp_path: Path,
) -> None:
    # 1,000,000 lines, one chunk each, 10 ms apart: 16 MB of index, 13 MB of log
    n = 1_000_000
    width = 13
    log = b"".join(b"line %07d\n" % i for i in range(n))
    assert len(log) == n * width
    entries = array.array("Q", bytes(16 * n))
    entries[0::2] = array.array("Q", range(width, width * (n + 1), width))
    times = array.array("d", (T0 + i * 0.01 for i in range(n)))
    entries[1::2] = array.array("Q", times.tobytes())
    (tmp_path / "stdout.log").write_bytes(log)
    (tmp_path / "stdout.idx").write_bytes(entries.tobytes())
    del log, entries
    gc.collect()
    first, last = 900_000, 906_000  # a minute at the end of 2.8 hours
    since, until = times[first], times[last]

    before = _rchar()
    tracemalloc.start()
    try:
        lines = await _read(tmp_path / "stdout", since, until)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    read = _rchar() - before

    assert lines[0] == f"line {first:07d}\n"
    assert lines[-1] == f"line {last:07d}\n"
    assert len(lines) == last - first + 1
    assert peak < 8 << 20, f"peak {peak / 2**20:.1f} MiB"
    assert read < 8 << 20, f"read {read / 2**20:.1f} MiB of 29 MiB"
