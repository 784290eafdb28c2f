"""Event cursors: an opaque, URL-safe string a backend can read back.

A cursor is ``<source>.<version>.<payload>``: ``source`` names the event
source (a backend family, or ``runner``), ``version`` the format (1), and
``payload`` a base64url JSON object only that source interprets. Cursors of
one format version stay readable by every later release of the same major
version; a malformed cursor, a cursor of another source or of a newer format
is an :class:`~asyncsched.errors.InvalidArgumentError` (never a silent
restart from scratch).

Example:
    >>> c = encode_cursor("local", {"j": "ab12", "seq": 7})
    >>> decode_cursor(c, "local")
    {'j': 'ab12', 'seq': 7}
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from asyncsched.errors import InvalidArgumentError

__all__ = (
    "CURSOR_VERSION",
    "MAX_CURSOR_CHARS",
    "cursor_source",
    "decode_cursor",
    "encode_cursor",
)

#: the cursor format this release writes (and the newest it reads)
CURSOR_VERSION = 1
#: longer cursors are refused before decoding
MAX_CURSOR_CHARS = 16384


def encode_cursor(source: str, position: Mapping[str, Any]) -> str:
    """The cursor of ``position`` (a JSON-ready mapping) for ``source``."""
    raw = json.dumps(dict(position), separators=(",", ":"), sort_keys=True)
    payload = base64.urlsafe_b64encode(raw.encode()).rstrip(b"=").decode()
    return f"{source}.{CURSOR_VERSION}.{payload}"


def cursor_source(cursor: str) -> str:
    """The source a cursor names (``local``, ``docker``, ``runner``, …)."""
    return _split(cursor)[0]


def decode_cursor(cursor: str, source: str) -> dict[str, Any]:
    """The position in ``cursor``, which must come from ``source``.

    Raises:
        InvalidArgumentError: not a cursor, another source's, or a newer format.
    """
    found, version, payload = _split(cursor)
    if found != source:
        raise InvalidArgumentError(
            f"cursor {_short(cursor)} comes from {found!r} events, not {source!r}"
        )
    if version > CURSOR_VERSION:
        raise InvalidArgumentError(
            f"cursor {_short(cursor)} has format {version}; this release reads "
            f"up to {CURSOR_VERSION}"
        )
    try:
        raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
        position = json.loads(raw)
    except (binascii.Error, ValueError) as e:
        raise InvalidArgumentError(f"malformed cursor {_short(cursor)}") from e
    if not isinstance(position, dict):
        raise InvalidArgumentError(f"malformed cursor {_short(cursor)}")
    return position


def _split(cursor: str) -> tuple[str, int, str]:
    if not isinstance(cursor, str):
        raise InvalidArgumentError(
            f"a cursor is a string from AppEvent.cursor, got {type(cursor).__name__}"
        )
    if len(cursor) > MAX_CURSOR_CHARS:
        raise InvalidArgumentError(f"cursor longer than {MAX_CURSOR_CHARS} characters")
    parts = cursor.split(".")
    if len(parts) != 3 or not parts[0] or not parts[1].isdigit():
        raise InvalidArgumentError(f"malformed cursor {_short(cursor)}")
    return parts[0], int(parts[1]), parts[2]


def _short(cursor: str) -> str:
    return repr(cursor if len(cursor) <= 40 else cursor[:37] + "...")
