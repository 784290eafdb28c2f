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

from asyncsched.errors import ArgumentTypeError, InvalidArgumentError
from asyncsched.schedulers.capabilities import Capabilities, Stream

__all__ = (
    "as_utc",
    "check_app_ids",
    "compile_regex",
    "default_stream",
    "parse_stream",
)


def parse_stream(streams: Stream | str | None, caps: Capabilities) -> Stream | None:
    """The asked stream, checked against ``caps``; None: the default stream."""
    if streams is None:
        return default_stream(caps)
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


def as_utc(when: datetime | float | None, name: str = "since") -> datetime | None:
    """``when`` as a timezone-aware datetime: naive datetimes are UTC (the
    documented contract of every backend), numbers are epoch seconds.

    Raises:
        ArgumentTypeError: (an InvalidArgumentError and a TypeError) ``when``
            is neither (a string, a bool...).

    Example:
        >>> as_utc(0).isoformat()
        '1970-01-01T00:00:00+00:00'
    """
    if when is None:
        return None
    if isinstance(when, datetime):
        return when.replace(tzinfo=UTC) if when.tzinfo is None else when
    number: object = when  # a caller's bool or str gets past the type hints
    if isinstance(number, int | float) and not isinstance(number, bool):
        try:
            return datetime.fromtimestamp(number, UTC)
        except (OverflowError, OSError, ValueError) as exc:
            raise InvalidArgumentError(
                f"{name}={when!r} is not a time in epoch seconds: {exc}"
            ) from None
    raise ArgumentTypeError(
        f"{name} must be a datetime or epoch seconds (int or float),"
        f" got {type(when).__name__} {when!r}"
    )


def default_stream(caps: Capabilities) -> Stream | None:
    """The stream ``log_iter`` reads when none is asked: COMBINED (stdout and
    stderr in the order they were written) wherever the backend serves it,
    else None (the backend's only output, as its ``log_streams`` declare)."""
    return Stream.COMBINED if Stream.COMBINED in caps.log_streams else None


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
