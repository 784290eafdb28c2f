"""A writer that appended last skips reading the journal before its next
append; whatever another writer did in between is still seen: its lines, a
torn line, a journal made anew."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

import pytest

from asyncsched.schedulers.local._journal import (
    JournalFile,
    parse_line,
    read_info,
    segment_names,
)
from asyncsched.schedulers.local._journal_writer import EventJournal
from asyncsched.schedulers.local_scheduler import LocalScheduler

from .conftest import app_of, sh_role

LINE = {"k": "app", "a": "x"}


def numbers(directory: str) -> list[int]:
    out = []
    for name in segment_names(directory):
        for raw in (Path(directory) / name).read_bytes().split(b"\n"):
            line = parse_line(raw)
            if line is not None and "s" in line:
                out.append(int(line["s"]))
    return out


@pytest.mark.parametrize("keep_open", [False, True])
def test_lines_of_another_writer_between_two_appends_keep_the_numbers(
    tmp_path: Path, keep_open: bool
) -> None:
    directory = str(tmp_path / "j")
    mine, other = JournalFile(directory, keep_open=keep_open), JournalFile(directory)
    assert mine.append([LINE]) == 1
    assert other.append([LINE, LINE]) == 3
    assert mine.append([LINE]) == 4
    assert mine.append([LINE]) == 5
    assert numbers(directory) == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("keep_open", [False, True])
def test_a_line_torn_after_this_writers_append_is_ended_and_skipped(
    tmp_path: Path, keep_open: bool
) -> None:
    directory = str(tmp_path / "j")
    mine = JournalFile(directory, keep_open=keep_open)
    mine.append([LINE])
    newest = Path(directory) / segment_names(directory)[-1]
    with newest.open("ab") as f:  # a writer killed in the middle of a line
        f.write(b'{"s": 2, "k": "ap')
    assert mine.append([LINE]) == 2
    assert numbers(directory) == [1, 2]


@pytest.mark.parametrize("keep_open", [False, True])
def test_a_journal_made_anew_after_this_writers_append_gets_its_own_numbers(
    tmp_path: Path, keep_open: bool
) -> None:
    directory = str(tmp_path / "j")
    mine = JournalFile(directory, keep_open=keep_open)
    mine.append([LINE])
    first = read_info(directory)
    shutil.rmtree(directory)
    other = JournalFile(directory)
    # the same segment name and size (its inode may be the freed one too)
    other.append([LINE])
    assert mine.append([LINE]) == 2
    info = read_info(directory)
    assert first is not None
    assert info is not None
    assert info.journal_id != first.journal_id
    assert mine.written is not None
    assert mine.written[0] == info.journal_id  # what its readers are told
    assert numbers(directory) == [1, 2]


def _reads_of_this_thread() -> int:
    """read-type system calls this thread made so far (Linux task I/O stats)."""
    for raw in Path("/proc/thread-self/io").read_text().splitlines():
        key, _, value = raw.partition(":")
        if key == "syscr":
            return int(value)
    raise AssertionError("no syscr in /proc/thread-self/io")


def test_a_sessions_journal_appends_without_reading_it_while_nobody_else_wrote(
    tmp_path: Path,
) -> None:
    directory = str(tmp_path / "j")
    journal = EventJournal(directory)
    journal.write([LINE])  # the first append reads where the journal stands
    # reading the counter is itself a read or two: measured with nothing between
    probe = -_reads_of_this_thread() + _reads_of_this_thread()
    before = _reads_of_this_thread()
    for _ in range(20):
        journal.write([LINE])
    assert _reads_of_this_thread() - before == probe
    # another writer in between: the next append reads again and numbers on
    JournalFile(directory).append([LINE])
    journal.write([LINE, LINE])
    journal.close()
    assert numbers(directory) == list(range(1, 25))


def test_a_kept_segment_rotates_and_keeps_numbering_with_another_writer(
    tmp_path: Path,
) -> None:
    directory = str(tmp_path / "j")
    mine = JournalFile(directory, segment_bytes=300, segments=3, keep_open=True)
    other = JournalFile(directory, segment_bytes=300, segments=3)
    for i in range(40):
        (other if i % 7 == 3 else mine).append([LINE])
    mine.close()
    names = segment_names(directory)
    assert len(names) == 3
    kept = numbers(directory)
    assert kept == list(range(kept[0], 41))
    info = read_info(directory)
    assert info is not None
    assert info.last == 40


async def test_a_closed_scheduler_holds_no_descriptor_of_its_journal(
    state_dir: Path, log_dir: Path
) -> None:
    async with LocalScheduler("kept") as sched:
        await sched.wait(
            await sched.submit(app_of(sh_role("true")), {"log_dir": str(log_dir)})
        )
        held = _fds_under(state_dir / "events")
        assert held  # the segment appended to last, while open
    assert _fds_under(state_dir / "events") == []


def _fds_under(directory: Path) -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith(str(directory)):
                found.append(target)
    return found
