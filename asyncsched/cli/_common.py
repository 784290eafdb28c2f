"""Pieces shared by the CLI verbs: argument parsing, errors, output helpers."""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import IO, NoReturn

from asyncsched.errors import AsyncschedError, MalformedAppHandleException
from asyncsched.runner import DEFAULT_SESSION_NAME, Runner
from asyncsched.specs import AppState

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "ArgumentParser",
    "LogTarget",
    "UsageError",
    "colorize",
    "exit_code_for",
    "make_runner",
    "parse_log_target",
    "parse_time",
    "use_color",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class UsageError(AsyncschedError, ValueError):
    """A bad command-line argument found after parsing (exit status 2)."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors: ``asyncsched run: error: ...`` and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def exit_code_for(state: AppState | None) -> int:
    """0 only for SUCCEEDED."""
    return EXIT_OK if state == AppState.SUCCEEDED else EXIT_FAILED


def make_runner(session: str | None) -> Runner:
    """A runner for the CLI's session (the local backend keys its records by it)."""
    return Runner(session if session is not None else DEFAULT_SESSION_NAME)


# -- log targets -----------------------------------------------------------------

_LOG_TARGET = re.compile(
    r"^(?P<scheduler>[\w.-]+)://(?P<session>[^/]*)/(?P<app_id>[^/]+)"
    r"(?:/(?P<role>[^/]+)(?:/(?P<replicas>\d+(?:,\d+)*))?)?/?$"
)


@dataclass(frozen=True)
class LogTarget:
    """``SCHEDULER://SESSION/APP_ID[/ROLE[/REPLICA[,REPLICA...]]]`` split up."""

    scheduler: str
    session: str
    app_id: str
    role: str | None
    replicas: tuple[int, ...] | None

    @property
    def handle(self) -> str:
        return f"{self.scheduler}://{self.session}/{self.app_id}"


def parse_log_target(text: str) -> LogTarget:
    """Parse the argument of ``asyncsched log``.

    Raises:
        MalformedAppHandleException: it does not have that form.
    """
    match = _LOG_TARGET.match(text)
    if match is None:
        raise MalformedAppHandleException(text)
    replicas = match["replicas"]
    return LogTarget(
        scheduler=match["scheduler"],
        session=match["session"],
        app_id=match["app_id"],
        role=match["role"],
        replicas=tuple(int(r) for r in replicas.split(",")) if replicas else None,
    )


# -- times --------------------------------------------------------------------------

_RELATIVE = re.compile(r"^(?P<n>\d+(?:\.\d+)?)(?P<unit>[smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_time(text: str, now: datetime | None = None) -> datetime:
    """Parse ``--since``/``--until``: ISO 8601, epoch seconds, or ``30s``/``5m``/``2h``/``1d`` ago.

    Naive ISO times are local time. The result is timezone-aware.

    Raises:
        UsageError: none of those forms.
    """
    now = now or datetime.now(UTC)
    match = _RELATIVE.match(text)
    if match:
        return now - timedelta(seconds=float(match["n"]) * _UNITS[match["unit"]])
    try:
        return datetime.fromtimestamp(float(text), UTC)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"invalid time {text!r}: use ISO 8601 (2024-05-01T12:00), "
            "epoch seconds, or an age such as 30s, 5m, 2h, 1d"
        ) from None
    return parsed if parsed.tzinfo is not None else parsed.astimezone()


# -- colour ---------------------------------------------------------------------------

_COLORS = ("32", "36", "33", "35", "34", "31", "92", "96", "93", "95", "94", "91")


def use_color(stream: IO[str]) -> bool:
    """Colour only for terminals, and never with ``NO_COLOR`` set."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def colorize(text: str, index: int, enabled: bool) -> str:
    """Wrap ``text`` in the ``index``-th colour when enabled."""
    if not enabled:
        return text
    return f"\x1b[{_COLORS[index % len(_COLORS)]}m{text}\x1b[0m"


def err(message: str) -> None:
    """One line on stderr, prefixed ``asyncsched:``."""
    print(f"asyncsched: {message}", file=sys.stderr, flush=True)
