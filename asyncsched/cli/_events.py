"""``asyncsched events``: print what changed in apps, with a cursor to resume from.

In the style of ``docker events`` / ``kubectl get -w``: without ``--follow``
it prints the current state of the apps (or, with ``--since CURSOR``, the
changes after that cursor) and exits; with ``--follow`` it keeps printing
changes until interrupted. The last field of every line is the cursor
(``--json``: one ``AppEvent.to_json()`` object per line, cursor included), so
a script resumes with ``--since`` where it stopped.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import anyio

from asyncsched.cli._common import EXIT_OK, UsageError, make_runner
from asyncsched.cli._options import add_session_option, add_switch, add_verb
from asyncsched.cli._pipes import raise_when_reader_gone
from asyncsched.errors import UnknownAppException
from asyncsched.runner import DEFAULT_SESSION_NAME, Runner
from asyncsched.schedulers import get_default_scheduler_name
from asyncsched.schedulers.events import AppEvent, EventKind
from asyncsched.specs import parse_app_handle

__all__ = ["add_parser", "events", "format_event"]

#: without --follow: the stream is over once no event came for this long (s)
QUIET = 0.5
#: without --follow: wait at most this long for the current state of every app
CURRENT_TIMEOUT = 60.0


def add_parser(sub: Any) -> None:
    p = add_verb(sub, events)
    p.add_argument("targets", nargs="*", metavar="HANDLE|SCHEDULER")
    add_session_option(
        p,
        None,
        f"session of scheduler targets (default: the handles' or {DEFAULT_SESSION_NAME})",
    )
    p.add_argument(
        "--since", default=None, metavar="CURSOR", help="only changes after CURSOR"
    )
    add_switch(p, "-f", "--follow", help="keep printing new changes")
    add_switch(p, "--json", help="one JSON object (AppEvent) per line")


def format_event(event: AppEvent) -> str:
    """One line: time, kind, handle, state, what changed, then the cursor.

    Example:
        >>> from asyncsched.specs import AppState
        >>> e = AppEvent("c1", EventKind.APP, "a", AppState.RUNNING, 0.0, handle="h")
        >>> format_event(e).split()[1:]
        ['app', 'h', 'RUNNING', 'c1']
    """
    when = datetime.fromtimestamp(event.observed).isoformat(timespec="milliseconds")
    parts = [when, event.kind.value, event.handle or "-", event.state.name]
    replica = event.replica
    if replica is not None:
        detail = f"{replica.role}/{replica.id}={replica.state.name}"
        if replica.exit_code is not None:
            detail += f",exit={replica.exit_code}"
        if replica.reason is not None:
            detail += f",reason={replica.reason.name}"
        if replica.num_restarts:
            detail += f",restarts={replica.num_restarts}"
        parts.append(detail)
    if event.num_restarts:
        parts.append(f"restarts={event.num_restarts}")
    parts.append(event.cursor)
    return " ".join(parts)


def _session_and_targets(args: argparse.Namespace) -> tuple[str, list[str]]:
    targets: list[str] = list(args.targets) or [get_default_scheduler_name()]
    sessions = {parse_app_handle(t).session_name for t in targets if "://" in t}
    if args.session is not None:
        sessions.add(args.session)
    if len(sessions) > 1:
        raise UsageError(
            f"one session at a time: the targets name {', '.join(sorted(sessions))}"
        )
    session = sessions.pop() if sessions else DEFAULT_SESSION_NAME
    return session, targets


def _print(event: AppEvent, as_json: bool) -> None:
    line = json.dumps(event.to_json()) if as_json else format_event(event)
    print(line, flush=True)


async def _known_handles(runner: Runner, targets: Iterable[str]) -> set[str]:
    """The handles of the apps the targets name now (unknown handles raise)."""
    found: set[str] = set()
    listed: dict[str, set[str]] = {}
    for target in targets:
        scheduler = (
            parse_app_handle(target).scheduler_backend if "://" in target else target
        )
        if scheduler not in listed:
            apps = await runner.list(scheduler)
            listed[scheduler] = {a.app_handle for a in apps}
        if "://" not in target:
            found |= listed[scheduler]
            continue
        parsed = parse_app_handle(target)
        mine = f"{scheduler}://{runner.name()}/{parsed.app_id}"
        if mine not in listed[scheduler] and await runner.status(target) is None:
            raise UnknownAppException(target)
        found.add(mine)
    return found


async def events(args: argparse.Namespace) -> int:
    """print app and replica changes (with a cursor to resume from)

    Print the current state of apps, or the changes after --since, one line
    per event ending with its cursor; --follow keeps printing. TARGETs are
    handles (SCHEDULER://SESSION/APP_ID) or scheduler names (every app of the
    session); default: the default scheduler.
    """
    session, targets = _session_and_targets(args)
    async with make_runner(session) as runner:
        stream = runner.events(targets, since=args.since)  # checked here: exit 2
        known = await _known_handles(runner, targets)
        async with stream, anyio.create_task_group() as tg:
            if args.follow:
                tg.start_soon(raise_when_reader_gone, sys.stdout)
                async for event in stream:
                    _print(event, args.json)
            else:
                await _print_current(
                    stream, None if args.since else known, known, args.json
                )
            tg.cancel_scope.cancel()
    return EXIT_OK


async def _print_current(
    stream: Any, expected: set[str] | None, known: set[str], as_json: bool
) -> None:
    """Print events until the current state of every ``expected`` app came
    (None: only the changes after the cursor), then until the stream is quiet."""
    waiting = set(expected) if expected is not None else set()
    deadline = anyio.current_time() + CURRENT_TIMEOUT
    while True:
        limit = (deadline - anyio.current_time()) if waiting else QUIET
        event: AppEvent | None = None
        with anyio.move_on_after(max(limit, 0)):
            try:
                event = await stream.__anext__()
            except StopAsyncIteration:
                return
        if event is None:
            return
        _print(event, as_json)
        if event.kind is EventKind.RESYNC:  # every app's current state follows
            prefix = event.handle
            waiting |= {h for h in known if h.startswith(prefix)}
        waiting.discard(event.handle)
