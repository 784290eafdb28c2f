"""The display shown while the CLI waits for an app.

On a terminal it redraws a few lines in place (the app state, elapsed time and
one line per role with the state of each replica). Otherwise it prints one
plain line each time the summary changes, which reads well in CI logs.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import IO

from asyncsched.specs import AppStatus

__all__ = ["ProgressDisplay", "format_elapsed", "summarize"]

_MAX_REPLICAS_SHOWN = 16
_SHORT = {
    "UNSUBMITTED": "u",
    "SUBMITTED": "s",
    "PENDING": "p",
    "RUNNING": "R",
    "SUCCEEDED": "S",
    "FAILED": "F",
    "CANCELLED": "C",
    "UNKNOWN": "?",
}


def format_elapsed(seconds: float) -> str:
    """``H:MM:SS``."""
    whole = int(seconds)
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def summarize(status: AppStatus) -> list[str]:
    """One line per role: counts per state, then each replica's state letter."""
    lines = []
    for role in status.roles:
        counts = Counter(str(r.state) for r in role.replicas)
        summary = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
        replicas = sorted(role.replicas, key=lambda r: r.id)
        letters = " ".join(
            f"{r.id}:{_SHORT.get(str(r.state), '?')}"
            for r in replicas[:_MAX_REPLICAS_SHOWN]
        )
        if len(replicas) > _MAX_REPLICAS_SHOWN:
            letters += " ..."
        lines.append(f"  {role.role}: {summary}  [{letters}]")
    return lines


class ProgressDisplay:
    """Show an app's progress on ``stream`` (live on a terminal, plain otherwise)."""

    def __init__(self, stream: IO[str], handle: str, live: bool) -> None:
        self._stream = stream
        self._handle = handle
        self._live = live
        self._start = time.monotonic()
        self._drawn = 0
        self._last_plain: tuple[str, ...] | None = None

    def update(self, status: AppStatus) -> None:
        """Draw ``status`` (redraw on a terminal; print when changed otherwise)."""
        elapsed = format_elapsed(time.monotonic() - self._start)
        details = summarize(status)
        if self._live:
            lines = [f"{self._handle}  {status.state}  {elapsed}", *details]
            out = ""
            if self._drawn:
                out += f"\x1b[{self._drawn}F"  # back to the first line drawn
            out += "".join(f"\x1b[2K{line}\n" for line in lines)
            # clear lines left over from a taller previous frame
            extra = self._drawn - len(lines)
            if extra > 0:
                out += "\x1b[2K\n" * extra + f"\x1b[{extra}F"
            self._stream.write(out)
            self._stream.flush()
            self._drawn = len(lines)
            return
        key = (str(status.state), *details)
        if key != self._last_plain:
            self._last_plain = key
            self._stream.write(f"[{elapsed}] {self._handle} {status.state}\n")
            for line in details:
                self._stream.write(f"{line}\n")
            self._stream.flush()
