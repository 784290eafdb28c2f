"""A writer that appended last skips reading the journal before its next
append; whatever another writer did in between is still seen: its lines, a
torn line, a journal made anew."""

from __future__ import annotations

import shutil
from pathlib import Path

from asyncsched.schedulers.local._journal import (
    JournalFile,
    parse_line,
    read_info,
    segment_names,
)

LINE = {"k": "app", "a": "x"}


def numbers(directory: str) -> list[int]:
    out = []
    for name in segment_names(directory):
        for raw in (Path(directory) / name).read_bytes().split(b"\n"):
            line = parse_line(raw)
            if line is not None and "s" in line:
                out.append(int(line["s"]))
    return out


def test_lines_of_another_writer_between_two_appends_keep_the_numbers(
    tmp_path: Path,
) -> None:
    directory = str(tmp_path / "j")
    mine, other = JournalFile(directory), JournalFile(directory)
    assert mine.append([LINE]) == 1
    assert other.append([LINE, LINE]) == 3
    assert mine.append([LINE]) == 4
    assert mine.append([LINE]) == 5
    assert numbers(directory) == [1, 2, 3, 4, 5]


def test_a_line_torn_after_this_writers_append_is_ended_and_skipped(
    tmp_path: Path,
) -> None:
    directory = str(tmp_path / "j")
    mine = JournalFile(directory)
    mine.append([LINE])
    newest = Path(directory) / segment_names(directory)[-1]
    with newest.open("ab") as f:  # a writer killed in the middle of a line
        f.write(b'{"s": 2, "k": "ap')
    assert mine.append([LINE]) == 2
    assert numbers(directory) == [1, 2]


def test_a_journal_made_anew_after_this_writers_append_gets_its_own_numbers(
    tmp_path: Path,
) -> None:
    directory = str(tmp_path / "j")
    mine = JournalFile(directory)
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
