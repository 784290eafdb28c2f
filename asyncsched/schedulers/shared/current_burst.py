"""The CURRENT burst: every app's state when a stream starts, resumable inside.

A stream started without a cursor (or after RESYNC) first sends one CURRENT
event per app. A reader that stops inside that burst must not lose the
CURRENT events it did not read, so every event of a burst but the last
carries a *restart* cursor: resuming from it sends the whole burst again
(the current state of every app at the resume, after RESYNC again if the
burst followed one), then the changes. The last event of a burst carries the
source's own position, after which the changes follow.

A backend stamps its bursts with :func:`stamp_burst`; the scheduler template
(``Scheduler.events``) recognises a restart cursor with :func:`burst_restart`
and starts the backend's stream afresh. A restart cursor keeps the source's
position (its identity checks still apply) plus the ``burst`` key.

Example:
    >>> from asyncsched.schedulers.events import AppEvent, EventKind
    >>> at = encode_cursor("demo", {"s": 4})
    >>> burst = stamp_burst(
    ...     [AppEvent("", EventKind.CURRENT, a) for a in ("x", "y")], at
    ... )
    >>> burst[-1].cursor == at
    True
    >>> burst_restart(burst[0].cursor)
    BurstRestart(base='demo.1.eyJzIjo0fQ', resync=False)
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace

from asyncsched.schedulers.events import AppEvent, EventKind
from asyncsched.schedulers.shared.cursor import (
    cursor_source,
    decode_cursor,
    encode_cursor,
)

__all__ = (
    "BURST_KEY",
    "BurstRestart",
    "burst_restart",
    "restart_cursor",
    "restarted_burst",
    "stamp_burst",
)

#: the payload key of a restart cursor (no source uses it for its position)
BURST_KEY = "burst"
_FRESH, _RESYNC = "current", "resync"


@dataclass(frozen=True, slots=True)
class BurstRestart:
    """What a restart cursor means: ``base`` is the source's position it
    was made at; ``resync`` when the burst followed a RESYNC."""

    base: str
    resync: bool


def restart_cursor(position: str, *, resync: bool = False) -> str:
    """The cursor that restarts a burst read at ``position`` (a cursor)."""
    source = cursor_source(position)
    payload = decode_cursor(position, source)
    payload[BURST_KEY] = _RESYNC if resync else _FRESH
    return encode_cursor(source, payload)


def burst_restart(cursor: str) -> BurstRestart | None:
    """The restart ``cursor`` asks for, or None for an ordinary cursor.

    Raises:
        InvalidArgumentError: ``cursor`` is malformed.
    """
    source = cursor_source(cursor)
    payload = decode_cursor(cursor, source)
    mode = payload.pop(BURST_KEY, None)
    if mode is None:
        return None
    return BurstRestart(encode_cursor(source, payload), mode == _RESYNC)


def stamp_burst(
    drafts: Sequence[AppEvent], position: str, *, restart: str | None = None
) -> list[AppEvent]:
    """Cursors for a burst (an optional RESYNC, FORGOTTEN and CURRENT events):
    the last one resumes after ``position``; the others restart the burst.

    ``restart`` is the cursor that gives this very burst again when the
    source has a better one (a resumed burst: the cursor resumed from);
    by default a restart cursor at ``position``.
    """
    if not drafts:
        return []
    if restart is None:
        resync = drafts[0].kind is EventKind.RESYNC
        restart = restart_cursor(position, resync=resync)
    last = len(drafts) - 1
    return [
        replace(d, cursor=position if i == last else restart)
        for i, d in enumerate(drafts)
    ]


def restarted_burst(
    fresh: AsyncIterator[AppEvent], restart: BurstRestart, cursor: str
) -> AsyncIterator[AppEvent]:
    """The stream that resumes from a restart ``cursor``: ``fresh`` (the
    source started without a cursor), after RESYNC when the burst followed
    one; its burst's restart cursors then keep saying RESYNC."""
    return _after_resync(fresh, cursor) if restart.resync else fresh


async def _after_resync(
    fresh: AsyncIterator[AppEvent], cursor: str
) -> AsyncIterator[AppEvent]:
    try:
        yield AppEvent(
            cursor,
            EventKind.RESYNC,
            observed=time.time(),
            msg="resumed inside the current state that followed a resync:"
            " all of it follows again",
        )
        in_burst = True
        async for event in fresh:
            if in_burst:
                again = burst_restart(event.cursor)
                in_burst = again is not None
                if again is not None:
                    event = replace(
                        event, cursor=restart_cursor(again.base, resync=True)
                    )
            yield event
    finally:
        closer = getattr(fresh, "aclose", None)
        if closer is not None:
            await closer()
