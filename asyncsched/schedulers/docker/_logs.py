"""Replica logs through ``GET /containers/{id}/logs``.

``since``/``until`` are sent with nanosecond precision. A naive ``datetime``
is taken as **UTC** (docker-py 7 would read it as local time; TorchX's tests
pass ``datetime.utcnow()``). Lines keep their ``\\n``; a line the log driver
split across frames is joined again.

Example:
    >>> from datetime import datetime, timezone
    >>> docker_timestamp(datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=timezone.utc))
    '1704164645.000006000'
    >>> docker_timestamp(datetime(2024, 1, 2, 3, 4, 5))  # naive: UTC
    '1704164645.000000000'
"""

from __future__ import annotations

import asyncio
import codecs
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import aiodocker

from asyncsched.schedulers.api import Stream
from asyncsched.schedulers.shared.lines import LineSplitter

from ._client import open_logs
from ._errors import docker_errors

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


async def iter_container_log(
    docker: aiodocker.Docker,
    host: str,
    container_id: str,
    *,
    since: datetime | None,
    until: datetime | None,
    should_tail: bool,
    streams: Stream | None,
) -> AsyncIterator[str]:
    """Yield whole lines; with ``should_tail`` follow until the container stops.

    Reads the multiplexed stream itself (containers run without a TTY): one
    request per call, and the connection is released even when the caller
    stops early.
    """
    params = {**log_params(since, until, streams), "follow": should_tail}
    splitter = LineSplitter()
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    with docker_errors("read container logs", host):
        async with open_logs(docker, container_id, params) as response:
            try:
                while True:
                    try:
                        header = await response.content.readexactly(8)
                    except asyncio.IncompleteReadError:
                        break
                    size = int.from_bytes(header[4:8], "big")
                    payload = await response.content.readexactly(size) if size else b""
                    for line in splitter.feed(decoder.decode(payload)):
                        yield line
            finally:
                response.close()
    tail = splitter.flush() + decoder.decode(b"", final=True)
    if tail:
        yield tail
