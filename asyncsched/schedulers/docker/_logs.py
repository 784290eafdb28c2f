"""Replica logs through ``GET /containers/{id}/logs``.

``since``/``until`` are sent with nanosecond precision. A naive ``datetime``
is taken as **UTC** (docker-py 7 would read it as local time; TorchX's tests
pass ``datetime.utcnow()``). Lines keep their ``\\n``; a line the log driver
split across frames is joined again (up to the line cap, see
:mod:`asyncsched.schedulers.shared.lines`).

Example:
    >>> from datetime import datetime, timezone
    >>> docker_timestamp(datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=timezone.utc))
    '1704164645.000006000'
    >>> docker_timestamp(datetime(2024, 1, 2, 3, 4, 5))  # naive: UTC
    '1704164645.000000000'
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from datetime import UTC, datetime
from typing import Any

import aiodocker

from asyncsched.schedulers.kit import (
    DEFAULT_MAX_LINE_BYTES,
    LineAssembler,
    LogQuery,
    Stream,
)
from asyncsched.schedulers.shared.docker_errors import docker_errors

from ._client import open_logs

__all__ = ["docker_timestamp", "iter_container_log", "log_params"]


def docker_timestamp(when: datetime) -> str:
    """``seconds.nanoseconds`` since the epoch; naive datetimes are UTC."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    delta = when - datetime(1970, 1, 1, tzinfo=UTC)
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    seconds, rest = divmod(micros, 1_000_000)
    return f"{seconds}.{rest * 1000:09d}"


def log_params(
    since: datetime | None,
    until: datetime | None,
    streams: Stream | None,
) -> dict[str, Any]:
    """Query parameters of the logs call (without ``follow``)."""
    params: dict[str, Any] = {
        "stdout": streams != Stream.STDERR,
        "stderr": streams != Stream.STDOUT,
    }
    if since is not None:
        params["since"] = docker_timestamp(since)
    if until is not None:
        params["until"] = docker_timestamp(until)
    return params


def _frames(
    buf: bytearray, assemblers: dict[int, LineAssembler], out: list[str]
) -> int:
    """Feed the complete frames at the start of ``buf``; return the bytes used.

    A frame is an 8-byte header (stream type, 3 zero bytes, big-endian size)
    and its payload. Stdout (and stdin) and stderr get a line assembler each,
    so a partial line of one stream is never glued to the other's.
    """
    pos = 0
    end = len(buf)
    while end - pos >= 8:
        size = int.from_bytes(buf[pos + 4 : pos + 8], "big")
        stop = pos + 8 + size
        if stop > end:
            break
        if size:
            assembler = assemblers[2 if buf[pos] == 2 else 1]
            out.extend(assembler.feed(bytes(buf[pos + 8 : stop])))
        pos = stop
    return pos


async def iter_container_log(
    docker: aiodocker.Docker,
    host: str,
    container_id: str,
    query: LogQuery,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> AsyncGenerator[list[str], None]:
    """Yield whole lines in batches (one per network read) of the streams and
    times ``query`` asks for; with its ``should_tail`` follow until the
    container stops.

    Reads the multiplexed stream itself (containers run without a TTY) in
    whatever chunks arrive, parsing frames out of one buffer; lines are
    assembled in linear time and capped at ``max_line_bytes`` (tqdm's ``\\r``
    progress output, which the daemon hands over as 16 KiB partial-line
    frames, costs no more than any other output). One request per call;
    closing the generator closes the response (its connection) at once.
    """
    params = {
        **log_params(query.since, query.until, query.streams),
        "follow": query.should_tail,
    }
    assemblers = {
        1: LineAssembler(max_line_bytes),
        2: LineAssembler(max_line_bytes),
    }
    buf = bytearray()
    with docker_errors("read container logs", host):
        async with open_logs(docker, container_id, params) as response:
            try:
                async for chunk in response.content.iter_any():
                    buf += chunk
                    batch: list[str] = []
                    used = _frames(buf, assemblers, batch)
                    if used:
                        del buf[:used]
                    if batch:
                        yield batch
            finally:
                response.close()
    tail = [t for t in (a.flush() for a in assemblers.values()) if t]
    if tail:
        yield tail
