"""Container logs kept by the fake server, with the kubelet's read options.

Each (namespace, pod, container) has a list of timestamped lines. The
test-only endpoint appends to it; ``GET .../pods/{name}/log`` reads it with
``sinceTime``/``sinceSeconds``/``tailLines``/``timestamps``/``limitBytes``
and, with ``follow``, waits for more until the container has terminated.

Timestamps are written like the kubelet's RFC3339Nano: nanoseconds with
trailing zeros trimmed, e.g. ``2024-05-01T10:00:00.12345Z``.

Example::

    logs = LogStore()
    logs.append("ns", "pod", "main", "hello\\nworld\\n")
    [line.text for line in logs.lines("ns", "pod", "main")]  # ["hello\\n", "world\\n"]
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from .store import Notifier

LogKey = tuple[str, str, str]


@dataclass(frozen=True)
class LogLine:
    ts_ns: int
    text: str  # ends with "\n" except possibly the very last line

    def render(self, timestamps: bool) -> bytes:
        prefix = format_rfc3339_nano(self.ts_ns) + " " if timestamps else ""
        return (prefix + self.text).encode()


def format_rfc3339_nano(ts_ns: int) -> str:
    """Go's time.RFC3339Nano in UTC: fractional seconds with trailing zeros trimmed."""
    seconds, nanos = divmod(ts_ns, 1_000_000_000)
    base = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    frac = f"{nanos:09d}".rstrip("0")
    return f"{base}.{frac}Z" if frac else f"{base}Z"


def parse_rfc3339(text: str) -> int:
    """An RFC 3339 time (as in ``sinceTime``) in nanoseconds since the epoch."""
    text = text.strip()
    frac_ns = 0
    if "." in text:
        head, _, rest = text.partition(".")
        digits = "".join(ch for ch in rest if ch.isdigit())
        tz = rest[len(digits) :]
        frac_ns = int((digits + "000000000")[:9])
        text = head + tz
    moment = datetime.fromisoformat(text)
    return int(moment.timestamp()) * 1_000_000_000 + frac_ns


@dataclass
class _Log:
    lines: list[LogLine] = field(default_factory=list)
    partial: str = ""


class LogStore:
    """Per-container log lines plus a notifier for followers."""

    def __init__(self, changed: Notifier | None = None) -> None:
        self._logs: dict[LogKey, _Log] = {}
        self.changed = changed or Notifier()

    def append(self, namespace: str, pod: str, container: str, text: str) -> None:
        """Append raw output; complete lines get the current timestamp."""
        log = self._logs.setdefault((namespace, pod, container), _Log())
        data = log.partial + text
        *complete, log.partial = data.split("\n")
        for part in complete:
            log.lines.append(LogLine(time.time_ns(), part + "\n"))
        self.changed.notify()

    def flush(self, namespace: str, pod: str, container: str) -> None:
        """Turn a trailing partial line into a last line (the container ended)."""
        log = self._logs.get((namespace, pod, container))
        if log is not None and log.partial:
            log.lines.append(LogLine(time.time_ns(), log.partial))
            log.partial = ""
            self.changed.notify()

    def lines(self, namespace: str, pod: str, container: str) -> list[LogLine]:
        log = self._logs.get((namespace, pod, container))
        return list(log.lines) if log else []

    def drop_pod(self, namespace: str, pod: str) -> None:
        for key in [k for k in self._logs if k[:2] == (namespace, pod)]:
            del self._logs[key]
        self.changed.notify()
