"""``asyncsched log``: print (or follow) the logs of an app's replicas."""

from __future__ import annotations

import argparse
import sys
from contextlib import aclosing
from datetime import datetime
from typing import IO, Any

import anyio

from asyncsched.cli._common import (
    EXIT_OK,
    UsageError,
    colorize,
    make_runner,
    parse_log_target,
    parse_time,
    use_color,
)
from asyncsched.cli._options import add_switch, add_verb
from asyncsched.cli._pipes import raise_when_reader_gone
from asyncsched.errors import UnknownAppException
from asyncsched.runner import Runner
from asyncsched.specs import is_started

__all__ = ["add_parser", "log", "replicas_of", "stream_logs"]


def add_parser(sub: Any) -> None:
    p = add_verb(sub, log)
    p.add_argument(
        "target", metavar="TARGET", help="app handle, optionally /ROLE[/REPLICAS]"
    )
    add_switch(
        p,
        "-f",
        "--follow",
        "-t",
        "--tail",
        help="keep printing new lines until the app finishes",
    )
    p.add_argument(
        "--regex", default=None, help="only lines matching this regular expression"
    )
    for flag, what in (
        ("--since", "only lines after T (ISO time, epoch, or 5m/2h ago)"),
        ("--until", "only lines before T"),
    ):
        p.add_argument(flag, default=None, metavar="T", help=what)
    p.add_argument(
        "--streams",
        choices=["stdout", "stderr", "combined"],
        default=None,
        help="which output to read (default: the scheduler's)",
    )


async def replicas_of(
    runner: Runner, handle: str, role: str | None, replicas: tuple[int, ...] | None
) -> list[tuple[str, int]]:
    """The (role, replica id) pairs to read, from the app's status or AppDef.

    Raises:
        UnknownAppException: the app is unknown.
        UsageError: no such role or replica.
    """
    status = await runner.status(handle)
    if status is None:
        raise UnknownAppException(handle)
    found: dict[str, list[int]] = {
        r.role: sorted(rep.id for rep in r.replicas) for r in status.roles if r.replicas
    }
    if not found:
        app = await runner.describe(handle)
        if app is not None:
            found = {r.name: list(range(r.num_replicas)) for r in app.roles}
    if role is not None:
        if role not in found:
            raise UsageError(
                f"app {handle} has no role {role!r}; roles: {sorted(found)}"
            )
        found = {role: found[role]}
    if replicas is not None:
        assert role is not None
        missing = [k for k in replicas if k not in found[role]]
        if missing:
            raise UsageError(
                f"role {role!r} has no replica {missing[0]}; replicas: {found[role]}"
            )
        found = {role: list(replicas)}
    return [(name, k) for name, ids in found.items() for k in ids]


async def stream_logs(
    runner: Runner,
    handle: str,
    role: str | None,
    replicas: tuple[int, ...] | None,
    *,
    follow: bool,
    out: IO[str],
    color: bool,
    regex: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    streams: str | None = None,
) -> None:
    """Print every selected replica's lines as ``role/replica line``, concurrently.

    Raises:
        BrokenPipeError: the reader of ``out`` went away (alone or in groups).
    """
    targets = await replicas_of(runner, handle, role, replicas)
    width = max((len(f"{r}/{k}") for r, k in targets), default=0)

    async def one(index: int, role_name: str, k: int) -> None:
        prefix = colorize(f"{role_name}/{k}".ljust(width), index, color)
        lines = runner.log_lines(
            handle,
            role_name,
            k,
            regex,
            since,
            until,
            should_tail=follow,
            streams=streams,
        )
        async with aclosing(lines):  # type: ignore[type-var]
            async for line in lines:
                end = "" if line.endswith("\n") else "\n"
                out.write(f"{prefix} {line}{end}")
                out.flush()

    async with anyio.create_task_group() as tg:
        # ends everything with BrokenPipeError once `out`'s reader is gone,
        # even while no line arrives (`log -f H | head -2`)
        tg.start_soon(raise_when_reader_gone, out)
        async with anyio.create_task_group() as readers:
            for index, (role_name, k) in enumerate(targets):
                readers.start_soon(one, index, role_name, k)
        tg.cancel_scope.cancel()


async def log(args: argparse.Namespace) -> int:
    """print the logs of an app (all replicas, a role, or some replicas)

    Print log lines prefixed with role/replica. TARGET is
    SCHEDULER://SESSION/APP_ID[/ROLE[/REPLICA[,REPLICA...]]].
    """
    target = parse_log_target(args.target)
    since = parse_time(args.since) if args.since else None
    until = parse_time(args.until) if args.until else None
    async with make_runner(target.session) as runner:
        handle = target.handle
        if args.follow:
            while True:
                status = await runner.status(handle)
                if status is None:
                    raise UnknownAppException(handle)
                if is_started(status.state):
                    break
                with anyio.move_on_after(0.5):
                    await runner.wait(handle)
        await stream_logs(
            runner,
            handle,
            target.role,
            target.replicas,
            follow=args.follow,
            out=sys.stdout,
            color=use_color(sys.stdout),
            regex=args.regex,
            since=since,
            until=until,
            streams=args.streams,
        )
    return EXIT_OK
