"""Argument checks the scheduler template runs before any backend hook.

Each raises :class:`~asyncsched.errors.InvalidArgumentError` with one text on
every backend.

Example:
    >>> compile_regex("") is None
    True
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import cast

from asyncsched.errors import InvalidArgumentError
from asyncsched.schedulers.capabilities import Capabilities, Stream

__all__ = ("as_utc", "check_app_ids", "compile_regex", "parse_stream")


def parse_stream(streams: Stream | str | None, caps: Capabilities) -> Stream | None:
    if streams is None:
        return None
    try:
        stream = Stream(streams)
    except ValueError:
        raise InvalidArgumentError(
            f"unknown stream {streams!r}; use one of {sorted(s.value for s in Stream)}"
        ) from None
    if stream not in caps.log_streams:
        raise InvalidArgumentError(
            f"stream {stream.value!r} is not supported here; supported: "
            f"{sorted(s.value for s in caps.log_streams)}"
        )
    return stream


def as_utc(when: datetime | None) -> datetime | None:
    """Naive datetimes are UTC (the documented contract of every backend)."""
    if when is not None and when.tzinfo is None:
        return when.replace(tzinfo=UTC)
    return when


def compile_regex(regex: str | None) -> re.Pattern[str] | None:
    if not regex:
        return None
    try:
        return re.compile(regex)
    except re.error as exc:
        raise InvalidArgumentError(f"invalid regex {regex!r}: {exc}") from None


def check_app_ids(app_ids: Iterable[str] | None) -> frozenset[str] | None:
    """``app_ids`` as a set, checked (a lone string is refused)."""
    if app_ids is None:
        return None
    if isinstance(app_ids, str | bytes) or not hasattr(app_ids, "__iter__"):
        raise InvalidArgumentError(
            f"app_ids must be an iterable of app id strings, got {app_ids!r}"
        )
    wanted: frozenset[object] = frozenset(app_ids)
    for app_id in wanted:
        if not isinstance(app_id, str) or not app_id:
            raise InvalidArgumentError(f"app_ids holds {app_id!r}, not an app id")
    return cast("frozenset[str]", wanted)
