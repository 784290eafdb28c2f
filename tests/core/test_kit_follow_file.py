"""The kit's file follower: reads what a writer appends until told it is final."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import anyio
import pytest

from asyncsched.schedulers.kit import LineAssembler, follow_file

pytestmark = pytest.mark.anyio


async def _read_all(path: Path, **kwargs: object) -> bytes:
    out = b""
    async with contextlib.aclosing(follow_file(str(path), **kwargs)) as chunks:  # type: ignore[arg-type]
        async for data in chunks:
            out += data
    return out


async def test_without_follow_it_reads_what_exists_in_chunks(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"x" * 10 + b"\n")
    async with contextlib.aclosing(follow_file(str(path), chunk=4)) as chunks:
        sizes = [len(data) async for data in chunks]
    assert sizes == [4, 4, 3]


async def test_a_missing_file_raises_unless_missing_ok(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        await _read_all(tmp_path / "nope")
    assert await _read_all(tmp_path / "nope", missing_ok=True) == b""


async def test_following_reads_appends_until_final_then_drains(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"one\n")
    asked: list[int] = []
    appended = 0

    async def more(offset: int) -> bool:
        nonlocal appended
        asked.append(offset)
        appended += 1
        with path.open("ab") as fh:  # the writer goes on; last write after "final"
            fh.write(f"line {appended}\n".encode())
        return appended < 3

    lines = LineAssembler()
    got: list[str] = []
    async with contextlib.aclosing(follow_file(str(path), follow=more)) as chunks:
        async for data in chunks:
            got += lines.feed(data)
    assert got == ["one\n", "line 1\n", "line 2\n", "line 3\n"]
    assert asked[0] == 4  # asked with the offset it caught up at


async def test_a_file_that_appears_while_followed_is_read(tmp_path: Path) -> None:
    path = tmp_path / "later"
    rounds = 0

    async def more(offset: int) -> bool:
        nonlocal rounds
        rounds += 1
        if rounds == 2:
            path.write_bytes(b"hello\n")
        return rounds < 3

    assert await _read_all(path, follow=more, missing_ok=True) == b"hello\n"


async def test_seek_picks_the_start_offset(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"skip\nkeep\n")
    assert await _read_all(path, seek=lambda fd: 5) == b"keep\n"


async def test_closing_the_follower_early_closes_its_file(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"a\n" * 100)
    before = len(os.listdir("/proc/self/fd"))

    async def forever(offset: int) -> bool:
        await anyio.sleep(0.01)
        return True

    chunks = follow_file(str(path), chunk=2, follow=forever)
    async with contextlib.aclosing(chunks):
        async for _ in chunks:
            assert len(os.listdir("/proc/self/fd")) == before + 1
            break
    assert len(os.listdir("/proc/self/fd")) == before
