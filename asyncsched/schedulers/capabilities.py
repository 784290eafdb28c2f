"""What a scheduler supports, and what ``log_iter`` asks of a replica.

:class:`Capabilities` is declared by every backend (and checked by the
contract suite); :class:`Stream` and :class:`LogQuery` are the log request
a backend's ``_log_iter`` hook receives, already checked and normalised.

Example:
    >>> Capabilities(logs=True, log_streams=frozenset({Stream.COMBINED})).log_tail
    False
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

__all__ = ("Capabilities", "LogQuery", "Stream")


class Stream(StrEnum):
    """Which output of a replica ``log_iter`` reads."""

    STDOUT = "stdout"
    STDERR = "stderr"
    COMBINED = "combined"


@dataclass(frozen=True)
class LogQuery:
    """What ``log_iter`` asks of one replica, checked and normalised.

    ``since``/``until`` are timezone-aware (naive ones made UTC) or None;
    ``streams`` is a supported :class:`Stream`, or None for the default.
    """

    role_name: str
    k: int
    since: datetime | None = None
    until: datetime | None = None
    should_tail: bool = False
    streams: Stream | None = None


@dataclass(frozen=True)
class Capabilities:
    """What a scheduler supports, machine-readably (rendered in the docs).

    Example:
        >>> Capabilities(logs=True).log_tail
        False
    """

    logs: bool = False
    log_streams: frozenset[Stream] = frozenset()
    log_since_until: bool = False
    log_tail: bool = False
    cancel: bool = True
    list: bool = False
    workspaces: bool = False
    mounts: bool = False
    retries: bool = False
    per_replica_status: bool = False
    event_loops: tuple[str, ...] = ("asyncio",)

    @classmethod
    def observed(cls, **changes: Any) -> Capabilities:
        """Full observation and control: logs of every stream with since/until
        and tail, cancel, list and per-replica status, on asyncio and trio;
        ``changes`` sets other fields.

        Example:
            >>> Capabilities.observed(retries=True).log_tail
            True
        """
        full = cls(
            logs=True,
            log_streams=frozenset(Stream),
            log_since_until=True,
            log_tail=True,
            cancel=True,
            list=True,
            per_replica_status=True,
            event_loops=("asyncio", "trio"),
        )
        return replace(full, **changes)

    def as_dict(self) -> dict[str, object]:
        """Plain-data view (streams and loops as sorted lists)."""
        return {
            "logs": self.logs,
            "log_streams": sorted(s.value for s in self.log_streams),
            "log_since_until": self.log_since_until,
            "log_tail": self.log_tail,
            "cancel": self.cancel,
            "list": self.list,
            "workspaces": self.workspaces,
            "mounts": self.mounts,
            "retries": self.retries,
            "per_replica_status": self.per_replica_status,
            "event_loops": list(self.event_loops),
        }
