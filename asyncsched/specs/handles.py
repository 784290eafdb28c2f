"""App handles: ``{scheduler_backend}://{session_name}/{app_id}``."""

from __future__ import annotations

import re
from typing import NamedTuple

from asyncsched.errors import MalformedAppHandleException

__all__ = ["AppHandle", "ParsedAppHandle", "make_app_handle", "parse_app_handle"]

AppHandle = str
"""A string of the form ``{scheduler_backend}://{session_name}/{app_id}``."""

# Greedy groups and no end anchor: any extra "/" ends up in the session name and
# the app id is whatever follows the last "/".
_HANDLE = re.compile(r"(?P<backend>.+)://(?P<session>.*)/(?P<app_id>.+)")


class ParsedAppHandle(NamedTuple):
    """The three parts of an app handle."""

    scheduler_backend: str
    session_name: str
    app_id: str


def make_app_handle(
    scheduler_backend: str, session_name: str, app_id: str
) -> AppHandle:
    """Format an app handle; an empty session gives ``local:///app_id``."""
    return f"{scheduler_backend}://{session_name}/{app_id}"


def parse_app_handle(app_handle: AppHandle) -> ParsedAppHandle:
    """Split an app handle into backend, session and app id.

    The session may be empty; the app id may not.

    Example:
        >>> parse_app_handle("local_cwd://my_session/trainer-x1y2")
        ParsedAppHandle(scheduler_backend='local_cwd', session_name='my_session', app_id='trainer-x1y2')
        >>> parse_app_handle("local:///app").session_name
        ''

    Raises:
        MalformedAppHandleException: ``app_handle`` does not have that form.
    """
    if "\n" not in app_handle:
        # fast path, same answer as the pattern: one "://" and a non-empty app id
        backend, sep, rest = app_handle.partition("://")
        if backend and sep and "://" not in rest:
            session, slash, app_id = rest.rpartition("/")
            if slash and app_id:
                return ParsedAppHandle(backend, session, app_id)
    match = _HANDLE.match(app_handle)
    if match is None:
        raise MalformedAppHandleException(app_handle)
    return ParsedAppHandle(match["backend"], match["session"], match["app_id"])
