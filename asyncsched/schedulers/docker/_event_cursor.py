"""Positions in a Docker daemon's event stream, and the cursors that hold them.

An engine event is placed by its ``timeNano`` plus, as a tie-breaker, how
many events of the same filtered stream carried that very ``timeNano``
before it (``n``; 1 for the first). A cursor names the daemon (its engine
``ID``) and the position of the last engine event whose changes were fully
delivered, so a reader in a new process asks the daemon for
``since=<timeNano>`` and skips the first ``n`` events at that instant.
``n`` = 0 is an anchor at a daemon time with no event of ours.

A cursor with ``current`` set (written by earlier releases to the events of
a CURRENT burst but the last one) resumes by sending the current state of
every app again; bursts now carry the kit's restart cursors instead.

Example:
    >>> c = encode_position(Position("engine-1", 1_700_000_000_000_000_123, 2))
    >>> decode_position(c)
    Position(engine='engine-1', t=1700000000000000123, n=2, current=False)
    >>> since_param(1_700_000_000_000_000_123)
    '1700000000.000000123'
    >>> parse_daemon_time("2026-11-27T12:48:12.000000005+01:00")
    1795780092000000005
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from asyncsched.errors import InvalidArgumentError
from asyncsched.schedulers.kit import decode_cursor, encode_cursor

__all__ = [
    "SOURCE",
    "Position",
    "decode_position",
    "encode_position",
    "parse_daemon_time",
    "since_param",
]

#: the source name Docker event cursors carry
SOURCE = "docker"

_TIME = re.compile(
    r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$"
)


@dataclass(frozen=True)
class Position:
    """Where a reader stands in the event stream of the daemon ``engine``."""

    engine: str
    t: int
    n: int
    current: bool = False


def encode_position(position: Position) -> str:
    """The cursor of ``position``."""
    payload: dict[str, object] = {"e": position.engine, "t": position.t}
    if position.n:
        payload["n"] = position.n
    if position.current:
        payload["c"] = 1
    return encode_cursor(SOURCE, payload)


def decode_position(cursor: str) -> Position:
    """The position a Docker events cursor holds.

    Raises:
        InvalidArgumentError: not a Docker events cursor.
    """
    payload = decode_cursor(cursor, SOURCE)
    engine, t, n = payload.get("e"), payload.get("t"), payload.get("n", 0)
    if (
        not isinstance(engine, str)
        or not isinstance(t, int)
        or not isinstance(n, int)
        or t < 0
        or n < 0
    ):
        raise InvalidArgumentError(f"malformed Docker events cursor {cursor[:40]!r}")
    return Position(engine, t, n, current=bool(payload.get("c")))


def since_param(t: int) -> str:
    """A ``timeNano`` as the daemon's ``since``/``until`` parameter (exact)."""
    return f"{t // 1_000_000_000}.{t % 1_000_000_000:09d}"


def parse_daemon_time(text: str) -> int:
    """``SystemTime`` of ``GET /info`` (RFC 3339, nanoseconds) as epoch ns.

    Raises:
        InvalidArgumentError: not such a time.
    """
    match = _TIME.match(text)
    if match is None:
        raise InvalidArgumentError(f"the daemon reported an odd time {text!r}")
    base, frac, zone = match.groups()
    seconds = datetime.fromisoformat(base + ("+00:00" if zone == "Z" else zone))
    nanos = int((frac or "0").ljust(9, "0"))
    return int(seconds.timestamp()) * 1_000_000_000 + nanos
