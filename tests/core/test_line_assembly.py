"""Line assembly: linear, capped, lossless, never cutting a UTF-8 character."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

import pytest

from asyncsched.errors import AsyncschedError, InvalidRunConfigException
from asyncsched.schedulers.shared.lines import (
    DEFAULT_MAX_LINE_BYTES,
    LineAssembler,
    LineSplitter,
    afilter_regex,
    asplit_lines,
)

pytestmark = pytest.mark.anyio

MiB = 1 << 20


def _assemble(chunks: list[bytes], cap: int) -> list[str]:
    a = LineAssembler(cap)
    out = [line for chunk in chunks for line in a.feed(chunk)]
    tail = a.flush()
    return out + ([tail] if tail else [])


def _chunked(data: bytes, rng: random.Random, biggest: int) -> list[bytes]:
    chunks, pos = [], 0
    while pos < len(data):
        n = rng.randint(1, biggest)
        chunks.append(data[pos : pos + n])
        pos += n
    return chunks


def test_default_cap_is_one_mebibyte() -> None:
    assert MiB == DEFAULT_MAX_LINE_BYTES
    assert LineAssembler().max_line_bytes == MiB


@pytest.mark.timeout(60)
def test_32_mib_without_newline_in_small_chunks_comes_back_as_capped_pieces() -> None:
    # 8192 chunks of 4 KiB: re-concatenating the partial on every chunk would
    # copy ~128 GiB and hit the timeout; linear assembly copies it about twice
    data = b"x" * (32 * MiB)
    a = LineAssembler()
    out: list[str] = []
    for pos in range(0, len(data), 4096):
        out.extend(a.feed(data[pos : pos + 4096]))
    assert a.pending == 0  # 32 MiB is a multiple of the cap: nothing waits
    assert [len(p) for p in out] == [MiB] * 32
    assert "".join(out) == data.decode()
    assert a.flush() == ""


def test_a_line_of_exactly_the_cap_stays_whole_one_byte_more_is_split() -> None:
    assert _assemble([b"abc\n"], 4) == ["abc\n"]
    assert _assemble([b"abcd\n"], 4) == ["abcd", "\n"]
    assert _assemble([b"abcdefghij\nk\n"], 4) == ["abcd", "efgh", "ij\n", "k\n"]


def test_no_byte_lost_no_newline_invented_whatever_the_chunking() -> None:
    rng = random.Random(11)
    parts = []
    for _ in range(400):
        n = rng.choice([0, 1, 3, 7, 15, 16, 17, 40, 100])
        parts.append("".join(rng.choice("ab\ré€😀") for _ in range(n)))
    text = "\n".join(parts) + "tail"
    data = text.encode()
    reference = _assemble([data], 16)
    for _ in range(30):
        got = _assemble(_chunked(data, rng, 50), 16)
        assert got == reference
    assert "".join(reference) == text
    assert sum(item.count("\n") for item in reference) == text.count("\n")
    for item in reference:
        assert len(item.encode()) <= 16
        assert "\ufffd" not in item  # no character was cut
        assert "\n" not in item[:-1]


def test_pieces_never_split_a_utf8_character() -> None:
    # 3-byte euro signs after one ASCII byte: every 4-byte cut falls mid-character
    text = "a" + "€" * 10 + "\n"
    pieces = _assemble([text.encode()], 4)
    assert "".join(pieces) == text
    assert all(len(p.encode()) <= 4 for p in pieces)
    assert pieces[0] == "a€"
    # the same split when the bytes come one at a time
    one_by_one = [bytes([b]) for b in text.encode()]
    assert _assemble(one_by_one, 4) == pieces


def test_only_newline_ends_a_line_whatever_other_breaks_the_text_holds() -> None:
    text = "a\rb\nc\x0bd\n\x0c\n\x1c\x1d\x1e\n\x85\u2028\u2029\nwin\r\nplain\n"
    assert _assemble([text.encode()], MiB) == [
        "a\rb\n",
        "c\x0bd\n",
        "\x0c\n",
        "\x1c\x1d\x1e\n",
        "\x85\u2028\u2029\n",
        "win\r\n",
        "plain\n",
    ]


def test_a_big_chunk_is_cut_on_newlines_only_with_bad_utf8_replaced() -> None:
    # one read of a log file is many KiB: the same lines as line by line
    lines = [
        "a\rb\n",
        "c\x0bd\x0c\x1c\x1d\x1e\n",
        "\x85\u2028\u2029 \u20ac\n",
        "win\r\n",
        "\n",
    ]
    text = "".join(lines) * 2000
    bad = b"ok\xff\xe2\x82\n" * 2000
    assert (
        _assemble([text.encode() + bad], MiB)
        == lines * 2000 + ["ok\ufffd\ufffd\n"] * 2000
    )
    s = LineSplitter()
    assert s.feed("a\udcff\r\n" * 5000) == ["a\udcff\r\n"] * 5000


def test_invalid_utf8_is_replaced_not_dropped() -> None:
    assert _assemble([b"ok\xff\n", b"\xe2\x82\n"], 1024) == ["ok\ufffd\n", "\ufffd\n"]


def test_carriage_return_progress_output_stays_one_line_until_the_cap() -> None:
    frames = [f"\r{i:3d}%|{'#' * (i // 10)}".encode() for i in range(101)]
    lines = _assemble([*frames, b"\n"], MiB)
    assert lines == [b"".join(frames).decode() + "\n"]


def test_feed_raw_items_are_the_bytes_in_order() -> None:
    data = b"hello\n" + b"z" * 10 + b"\nend"
    a = LineAssembler(4)
    raw = [*a.feed_raw(data), a.flush_raw()]
    assert b"".join(raw) == data
    assert raw[0] == b"hell"
    assert all(len(item) <= 4 for item in raw)


@pytest.mark.parametrize("bad", [0, 3, -1, 2.5, "1024", True])
def test_an_invalid_cap_is_a_run_config_error(bad: object) -> None:
    with pytest.raises(InvalidRunConfigException, match="max_line_bytes") as info:
        LineAssembler(bad)  # type: ignore[arg-type]
    assert isinstance(info.value, AsyncschedError)


def test_str_splitter_counts_the_cap_in_utf8_bytes() -> None:
    s = LineSplitter(max_line_bytes=6)
    assert s.feed("éééé") == ["ééé"]  # 6 bytes, 3 characters
    assert s.feed("\n") == ["é\n"]
    assert s.flush() == ""


def test_str_splitter_round_trips_lone_surrogates() -> None:
    text = "a\udcff\nb\ud800"
    s = LineSplitter()
    assert s.feed(text) == ["a\udcff\n"]
    assert s.flush() == "b\ud800"


def test_str_splitter_keeps_its_results_for_normal_input() -> None:
    s = LineSplitter()
    assert s.feed("ab") == []
    assert s.feed("c\nd") == ["abc\n"]
    assert s.feed("e\n\n") == ["de\n", "\n"]
    assert s.flush() == ""


async def _chunks(*items: str) -> AsyncIterator[str]:
    for item in items:
        yield item


async def test_asplit_lines_applies_the_cap() -> None:
    got = [x async for x in asplit_lines(_chunks("abcdef", "g\nh"), 4)]
    assert got == ["abcd", "efg\n", "h"]


async def test_closing_afilter_regex_closes_its_source() -> None:
    closed = False

    async def source() -> AsyncIterator[str]:
        nonlocal closed
        try:
            while True:
                yield "match\n"
        finally:
            closed = True

    filtered = afilter_regex("match", source())
    assert await anext(filtered) == "match\n"
    await filtered.aclose()
    assert closed
