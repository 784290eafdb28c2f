from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from asyncsched.schedulers.shared.lines import (
    LineSplitter,
    afilter_regex,
    asplit_lines,
    filter_regex,
    split_lines,
    split_lines_iterator,
)

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", []),
        ("\n", ["\n"]),
        ("foo\nbar", ["foo\n", "bar"]),
        ("foo\nbar\n", ["foo\n", "bar\n"]),
    ],
)
def test_split_lines_keeps_newlines(text: str, expected: list[str]) -> None:
    assert split_lines(text) == expected


def test_split_lines_keeps_carriage_returns_and_form_feeds_inside_lines() -> None:
    assert split_lines("10%\r50%\r100%\nnext\x0cpage\n") == [
        "10%\r50%\r100%\n",
        "next\x0cpage\n",
    ]


def test_split_lines_iterator_flattens_and_keeps_partial_chunks() -> None:
    assert list(split_lines_iterator(["1\n2\n3\n4\n"])) == ["1\n", "2\n", "3\n", "4\n"]
    assert list(split_lines_iterator(["foo\nbar", "foobar"])) == [
        "foo\n",
        "bar",
        "foobar",
    ]


def test_filter_regex_uses_search() -> None:
    lines = [f"{i}\n" for i in range(11)]
    assert list(filter_regex("[02468]", lines)) == [
        "0\n",
        "2\n",
        "4\n",
        "6\n",
        "8\n",
        "10\n",
    ]


def test_line_splitter_joins_lines_split_across_chunks() -> None:
    splitter = LineSplitter()
    assert splitter.feed("ab") == []
    assert splitter.feed("c\nd") == ["abc\n"]
    assert splitter.feed("e\n\n") == ["de\n", "\n"]
    assert splitter.flush() == ""
    assert splitter.feed("tail") == []
    assert splitter.flush() == "tail"


async def _chunks(*items: str) -> AsyncIterator[str]:
    for item in items:
        yield item


async def test_async_split_and_filter() -> None:
    lines = [x async for x in asplit_lines(_chunks("a1\nb", "2\nc3"))]
    assert lines == ["a1\n", "b2\n", "c3"]
    kept = [x async for x in afilter_regex("[ab]", asplit_lines(_chunks("a\nb\nc\n")))]
    assert kept == ["a\n", "b\n"]
