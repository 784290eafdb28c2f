"""Line helpers shared by every backend's ``log_iter``.

Lines keep their trailing ``\\n`` (and any ``\\r``) so that progress bars survive;
callers print them with ``end=""``.

Example:
    >>> split_lines("a\\nb")
    ['a\\n', 'b']
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator

__all__ = [
    "LineSplitter",
    "afilter_regex",
    "asplit_lines",
    "filter_regex",
    "split_lines",
    "split_lines_iterator",
]


def split_lines(text: str) -> list[str]:
    """Split ``text`` on ``\\n``, keeping the ``\\n`` on each line.

    ``""`` gives ``[]``, ``"\\n"`` gives ``["\\n"]`` and ``"a\\nb"`` gives ``["a\\n", "b"]``.
    """
    return _split_on_nl(text)


def _split_on_nl(text: str) -> list[str]:
    # Not str.splitlines: it also splits on \r, \x0c, \u2028..., which must stay.
    lines = []
    start = 0
    while True:
        end = text.find("\n", start)
        if end < 0:
            if start < len(text):
                lines.append(text[start:])
            return lines
        lines.append(text[start : end + 1])
        start = end + 1


def split_lines_iterator(chunks: Iterable[str]) -> Iterator[str]:
    """Flatten :func:`split_lines` over ``chunks``; a partial chunk stays its own item."""
    for chunk in chunks:
        yield from split_lines(chunk)


def filter_regex(regex: str | re.Pattern[str], lines: Iterable[str]) -> Iterator[str]:
    """Keep the lines in which ``regex`` matches (``re.search``)."""
    pattern = re.compile(regex) if isinstance(regex, str) else regex
    return (line for line in lines if pattern.search(line))


class LineSplitter:
    """Turn arbitrary text chunks into whole lines, buffering a partial line.

    Unlike :func:`split_lines_iterator`, a line split across two chunks comes out
    whole. ``flush()`` returns the trailing partial line, if any.

    Example:
        >>> s = LineSplitter()
        >>> s.feed("ab"), s.feed("c\\nd"), s.flush()
        ([], ['abc\\n'], 'd')
    """

    def __init__(self) -> None:
        self._partial = ""

    def feed(self, chunk: str) -> list[str]:
        """Add ``chunk``; return the lines it completed."""
        if not chunk:
            return []
        text = self._partial + chunk
        lines = _split_on_nl(text)
        if lines and not lines[-1].endswith("\n"):
            self._partial = lines.pop()
        else:
            self._partial = ""
        return lines

    def flush(self) -> str:
        """Return (and forget) the buffered partial line; ``""`` when there is none."""
        partial, self._partial = self._partial, ""
        return partial


async def asplit_lines(chunks: AsyncIterable[str]) -> AsyncIterator[str]:
    """Async version of :class:`LineSplitter`: whole lines out of text chunks."""
    splitter = LineSplitter()
    async for chunk in chunks:
        for line in splitter.feed(chunk):
            yield line
    tail = splitter.flush()
    if tail:
        yield tail


async def afilter_regex(
    regex: str | re.Pattern[str], lines: AsyncIterable[str]
) -> AsyncIterator[str]:
    """Async :func:`filter_regex`."""
    pattern = re.compile(regex) if isinstance(regex, str) else regex
    async for line in lines:
        if pattern.search(line):
            yield line
