"""Line assembly shared by every backend's ``log_iter``.

Lines keep their trailing ``\\n`` (and any ``\\r``) so that progress bars survive;
callers print them with ``end=""``. Only ``\\n`` ends a line.

Assembly is linear: the pieces of a partial line are kept in a list and joined
once, when its ``\\n`` arrives. A line is capped at ``max_line_bytes``
(:data:`DEFAULT_MAX_LINE_BYTES`, 1 MiB, by default): a longer one comes out in
consecutive pieces of at most the cap, the last carrying the ``\\n``. No byte is
lost and no ``\\n`` is invented: joining the pieces gives the line back.

The cap is counted in **UTF-8 bytes** for both inputs: the raw bytes for
:class:`LineAssembler` (bytes in, ``str`` out), the UTF-8 encoding for
:class:`LineSplitter` (``str`` in, ``str`` out). A cut never falls inside a
UTF-8 sequence (it moves back to the start of the character), so every piece
decodes on its own. Invalid UTF-8 from a process becomes U+FFFD.

Example:
    >>> split_lines("a\\nb")
    ['a\\n', 'b']
    >>> s = LineSplitter(max_line_bytes=4)
    >>> s.feed("abcdef\\n")
    ['abcd', 'ef\\n']
"""

from __future__ import annotations

import io
import re
from collections.abc import AsyncGenerator, AsyncIterable, Iterable, Iterator
from typing import Protocol, TypeVar

from asyncsched.errors import InvalidRunConfigException
from asyncsched.schedulers.shared.closing_iterator import aclose_iterator

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "LineAssembler",
    "LineSplitter",
    "MIN_MAX_LINE_BYTES",
    "afilter_regex",
    "asplit_lines",
    "assemble_lines",
    "check_max_line_bytes",
    "filter_regex",
    "split_lines",
    "split_lines_iterator",
]

#: Default cap of one log line, in bytes (1 MiB); longer lines come in pieces.
DEFAULT_MAX_LINE_BYTES = 1 << 20
#: The smallest cap allowed: the longest UTF-8 sequence, so a piece is never empty.
MIN_MAX_LINE_BYTES = 4


def check_max_line_bytes(value: object) -> int:
    """Return ``value`` if it is a valid line cap, else raise.

    Raises:
        InvalidRunConfigException: not an int >= :data:`MIN_MAX_LINE_BYTES`.

    Example:
        >>> check_max_line_bytes(4096)
        4096
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < MIN_MAX_LINE_BYTES
    ):
        raise InvalidRunConfigException(
            f"max_line_bytes must be an int >= {MIN_MAX_LINE_BYTES}, got {value!r}",
            "max_line_bytes",
            value,
        )
    return value


def split_lines(text: str) -> list[str]:
    """Split ``text`` on ``\\n``, keeping the ``\\n`` on each line (no cap).

    ``""`` gives ``[]``, ``"\\n"`` gives ``["\\n"]`` and ``"a\\nb"`` gives ``["a\\n", "b"]``.
    """
    # Not str.splitlines: it also splits on \r, \x0c, \u2028..., which must stay.
    if not text:
        return []
    lines = text.split("\n")
    last = lines.pop()
    out = [line + "\n" for line in lines]
    if last:
        out.append(last)
    return out


def split_lines_iterator(chunks: Iterable[str]) -> Iterator[str]:
    """Flatten :func:`split_lines` over ``chunks``; a partial chunk stays its own item."""
    for chunk in chunks:
        yield from split_lines(chunk)


def filter_regex(regex: str | re.Pattern[str], lines: Iterable[str]) -> Iterator[str]:
    """Keep the lines in which ``regex`` matches (``re.search``)."""
    pattern = re.compile(regex) if isinstance(regex, str) else regex
    return (line for line in lines if pattern.search(line))


def _cut(buf: bytes, start: int, cap: int) -> int:
    """End of the piece of at most ``cap`` bytes of ``buf`` from ``start``.

    Moves back to the start of a UTF-8 sequence that would straddle the cut;
    looks only at bytes before the cut, so the result never depends on what
    arrives later.
    """
    end = start + cap
    j = end - 1
    stop = max(start, end - 4)
    while j > stop and buf[j] & 0xC0 == 0x80:  # continuation byte
        j -= 1
    lead = buf[j]
    if lead >= 0xC0:
        length = 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
        if j + length > end and j > start:
            return j
    return end


#: what str.splitlines breaks on besides \n (as UTF-8); \r\n is fine (kept whole)
_OTHER_BREAKS = (b"\r", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e")
_OTHER_BREAKS_UTF8 = (b"\xc2\x85", b"\xe2\x80\xa8", b"\xe2\x80\xa9")


#: a region at least this long is split by a text reader over it (C code
#: all the way, one pass); a shorter one by ``str`` methods (less set-up)
_READER_SPLIT = 4096


def _split_region(region: bytes, errors: str) -> list[str]:
    """The lines of ``region`` (ending with ``\\n``), decoded, each keeping its ``\\n``."""
    if len(region) >= _READER_SPLIT:
        reader = io.TextIOWrapper(
            io.BytesIO(region), encoding="utf-8", errors=errors, newline="\n"
        )
        return reader.readlines()
    text = region.decode("utf-8", errors)
    # str.splitlines is the fastest split but also breaks on \r, \x0c,
    # \u2028...: use it only when none of those is there (memchr scans)
    if not any(b in region for b in _OTHER_BREAKS) and (
        region.isascii() or not any(b in region for b in _OTHER_BREAKS_UTF8)
    ):
        return text.splitlines(keepends=True)
    parts = text.split("\n")
    parts.pop()  # text ends with \n: the last part is ""
    return [part + "\n" for part in parts]


class LineAssembler:
    """Bytes in, whole lines out: the linear, capped core every backend uses.

    ``feed`` returns the lines (and pieces of over-long lines) a chunk
    completes, decoded as UTF-8 (bad bytes become U+FFFD); ``flush`` returns
    the trailing partial line. :meth:`feed_raw`/:meth:`flush_raw` give the
    same items undecoded (to count bytes, e.g. for file offsets).

    Example:
        >>> a = LineAssembler(max_line_bytes=4)  # "€" is 3 bytes: e2 82 ac
        >>> a.feed(b"ab"), a.feed(b"c\\ndd\\xe2\\x82"), a.feed(b"\\xacxyz"), a.flush()
        ([], ['abc\\n', 'dd'], ['€x'], 'yz')
    """

    __slots__ = ("_cap", "_errors", "_parts", "_size")

    def __init__(
        self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, errors: str = "replace"
    ) -> None:
        self._cap = check_max_line_bytes(max_line_bytes)
        self._errors = errors
        self._parts: list[bytes] = []
        self._size = 0

    @property
    def max_line_bytes(self) -> int:
        """The cap of one item, in bytes."""
        return self._cap

    @property
    def pending(self) -> int:
        """Bytes of the buffered partial line."""
        return self._size

    def feed(self, data: bytes) -> list[str]:
        """Add ``data``; return the lines and pieces it completed, decoded."""
        if not data:
            return []
        errors = self._errors
        head, region, pieces = self._take(data)
        out = [item.decode("utf-8", errors) for item in head]
        if region:
            out.extend(_split_region(region, errors))
        out.extend(item.decode("utf-8", errors) for item in pieces)
        return out

    def feed_raw(self, data: bytes) -> list[bytes]:
        """Like :meth:`feed` but the items stay bytes."""
        if not data:
            return []
        head, region, pieces = self._take(data)
        if region:
            lines = region.split(b"\n")
            lines.pop()
            head.extend([line + b"\n" for line in lines])
        head.extend(pieces)
        return head

    def flush(self) -> str:
        """Return (and forget) the partial line, decoded; ``""`` when none."""
        return self.flush_raw().decode("utf-8", self._errors)

    def flush_raw(self) -> bytes:
        """Return (and forget) the partial line as bytes."""
        partial = b"".join(self._parts)
        self._parts = []
        self._size = 0
        return partial

    def _take(self, data: bytes) -> tuple[list[bytes], bytes, list[bytes]]:
        """Split ``data`` into (items before, a region of whole short lines, items after).

        The region (ending in ``\\n``, possibly empty) holds lines known to be
        within the cap, to be split in one go; the items are single lines or
        pieces, in order.
        """
        cap = self._cap
        head: list[bytes] = []
        start = 0
        if self._parts:
            nl = data.find(b"\n")
            if nl < 0:
                self._append(data)
                return head, b"", self._drain_partial()
            self._parts.append(data[: nl + 1])
            line = b"".join(self._parts)
            self._parts = []
            self._size = 0
            self._pieces(line, head)
            start = nl + 1
        end = data.rfind(b"\n", start)
        region = b""
        tail: list[bytes] = []
        if end >= 0:
            if end + 1 - start <= cap:  # no line in it can be over the cap
                region = data[start : end + 1]
            else:
                self._long_region(data, start, end + 1, head)
            start = end + 1
        if start < len(data):
            self._append(data[start:] if start else data)
            tail = self._drain_partial()
        return head, region, tail

    def _append(self, data: bytes) -> None:
        self._parts.append(data)
        self._size += len(data)

    def _drain_partial(self) -> list[bytes]:
        """Cut the partial line into pieces while it holds a full cap."""
        if self._size < self._cap:
            return []
        buf = b"".join(self._parts)
        out: list[bytes] = []
        pos = 0
        while len(buf) - pos >= self._cap:
            end = _cut(buf, pos, self._cap)
            out.append(buf[pos:end])
            pos = end
        rest = buf[pos:]
        self._parts = [rest] if rest else []
        self._size = len(rest)
        return out

    def _pieces(self, line: bytes, out: list[bytes]) -> None:
        """Append ``line`` (ending in ``\\n``) to ``out``, in pieces if over the cap."""
        cap = self._cap
        if len(line) <= cap:
            out.append(line)
            return
        pos = 0
        while len(line) - pos > cap:
            end = _cut(line, pos, cap)
            out.append(line[pos:end])
            pos = end
        out.append(line[pos:])

    def _long_region(
        self, data: bytes, start: int, stop: int, out: list[bytes]
    ) -> None:
        """Append the lines of ``data[start:stop]`` (whole lines), capping each."""
        cap = self._cap
        while start < stop:
            nl = data.find(b"\n", start, stop)
            if nl + 1 - start <= cap:
                out.append(data[start : nl + 1])
            else:
                self._pieces(data[start : nl + 1], out)
            start = nl + 1


class LineSplitter:
    """Turn arbitrary text chunks into whole lines, buffering a partial line.

    Unlike :func:`split_lines_iterator`, a line split across two chunks comes out
    whole. ``flush()`` returns the trailing partial line, if any. The cap is
    counted in UTF-8 bytes (see the module docstring); pieces never split a
    character.

    Example:
        >>> s = LineSplitter()
        >>> s.feed("ab"), s.feed("c\\nd"), s.flush()
        ([], ['abc\\n'], 'd')
    """

    __slots__ = ("_core",)

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        # surrogatepass: any Python str round-trips exactly
        self._core = LineAssembler(max_line_bytes, errors="surrogatepass")

    def feed(self, chunk: str) -> list[str]:
        """Add ``chunk``; return the lines (and pieces) it completed."""
        if not chunk:
            return []
        return self._core.feed(chunk.encode("utf-8", "surrogatepass"))

    def flush(self) -> str:
        """Return (and forget) the buffered partial line; ``""`` when there is none."""
        return self._core.flush()


_Chunk_contra = TypeVar("_Chunk_contra", contravariant=True)


class _Cutter(Protocol[_Chunk_contra]):
    def feed(self, chunk: _Chunk_contra, /) -> list[str]: ...
    def flush(self) -> str: ...


async def _lines_of(
    cutter: _Cutter[_Chunk_contra], chunks: AsyncIterable[_Chunk_contra]
) -> AsyncGenerator[str, None]:
    async for chunk in chunks:
        for line in cutter.feed(chunk):
            yield line
    tail = cutter.flush()
    if tail:
        yield tail


def asplit_lines(
    chunks: AsyncIterable[str], max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> AsyncGenerator[str, None]:
    """Async version of :class:`LineSplitter`: whole lines out of text chunks."""
    return _lines_of(LineSplitter(max_line_bytes), chunks)


def assemble_lines(
    chunks: AsyncIterable[bytes], max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> AsyncGenerator[str, None]:
    """Async :class:`LineAssembler`: whole lines out of byte chunks.

    Example:
        >>> async def main(path: str) -> None:
        ...     async for line in assemble_lines(follow_file(path)):  # see follow
        ...         print(line, end="")
    """
    return _lines_of(LineAssembler(max_line_bytes), chunks)


async def afilter_regex(
    regex: str | re.Pattern[str], lines: AsyncIterable[str]
) -> AsyncGenerator[str, None]:
    """Async :func:`filter_regex`; closing it closes ``lines`` too."""
    pattern = re.compile(regex) if isinstance(regex, str) else regex
    try:
        async for line in lines:
            if pattern.search(line):
                yield line
    finally:
        await aclose_iterator(lines)
