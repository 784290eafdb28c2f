"""``asyncsched prune``: forget finished local apps beyond a retention policy."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

import anyio

from asyncsched.cli._common import EXIT_OK, err
from asyncsched.cli._options import add_switch, add_verb
from asyncsched.schedulers.local import Retention, prune
from asyncsched.schedulers.shared.state_dir import default_state_dir

__all__ = ["add_parser"]

_DEFAULT = Retention()


def _count(text: str) -> int:
    """An int >= 0 (argparse type: a bad value exits 2 with the reason)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _days(text: str) -> float:
    """A finite number of days >= 0 (``nan``, ``inf`` and negatives exit 2)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(
            f"must be a finite number of days >= 0, got {text!r}"
        )
    return value


def add_parser(sub: Any) -> None:
    p = add_verb(sub, prune_apps, "prune")
    for flag, kind, default, metavar, what in (
        ("--keep", _count, _DEFAULT.max_apps, "N", "finished apps to keep"),
        (
            "--max-age-days",
            _days,
            _DEFAULT.max_age_days,
            "DAYS",
            "remove finished apps older than this",
        ),
    ):
        p.add_argument(
            flag,
            type=kind,
            default=default,
            metavar=metavar,
            help=f"{what} (default: %(default)s)",
        )
    add_switch(p, "--dry-run", help="say what would go, remove nothing")
    add_switch(p, "--json", help="print JSON")


async def prune_apps(args: argparse.Namespace) -> int:
    """forget finished local apps (records and logs) beyond a retention policy

    Remove the records of finished local apps, and their logs when they live
    in the state dir, keeping the newest --keep apps that are at most
    --max-age-days old. Running apps, unreadable records and log dirs given
    with -cfg log_dir=... are never deleted.
    """
    retention = Retention(max_apps=args.keep, max_age_days=args.max_age_days)
    state_dir = default_state_dir()
    report = await anyio.to_thread.run_sync(
        lambda: prune(state_dir, retention, dry_run=args.dry_run)
    )
    for path in report.unreadable:
        err(f"skipped an unreadable record: {path}")
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
        return EXIT_OK
    verb = "would remove" if args.dry_run else "removed"
    for app_id in report.removed:
        print(f"{verb} {app_id}")
    print(
        f"{verb} {len(report.removed)} finished app(s); kept {report.kept},"
        f" {report.running} running"
    )
    return EXIT_OK
