"""Events you can resume: what changed in an app, with a position to resume from.

``Scheduler.events()`` yields :class:`AppEvent`\\ s, ordered per app. Each
event carries an opaque string :attr:`AppEvent.cursor`; save it, and a later
``events(since=cursor)`` — in this process or another — delivers every change
after it. A cursor that can no longer be honoured (history trimmed, engine
data lost) yields one :attr:`EventKind.RESYNC` event followed by a
:attr:`EventKind.CURRENT` event per app: never a silent gap.

Example:
    >>> async def follow(sched, saved: str | None) -> None:
    ...     async for event in sched.events(since=saved):
    ...         print(event.kind, event.app_id, event.state)
    ...         saved = event.cursor  # store it somewhere durable
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any

from asyncsched.errors import InvalidArgumentError
from asyncsched.schedulers.snapshot import ReplicaSnapshot
from asyncsched.specs.reasons import StatusReason
from asyncsched.specs.status import AppState

__all__ = ("AppEvent", "EventKind", "replica_from_json", "replica_to_json")


class EventKind(StrEnum):
    """What an :class:`AppEvent` reports."""

    #: the app's state when a stream starts without a cursor, or after RESYNC
    CURRENT = "current"
    #: the app was submitted (first seen)
    SUBMITTED = "submitted"
    #: the app's state, message or restart count changed
    APP = "app"
    #: one replica's state, exit code, reason or restart count changed
    REPLICA = "replica"
    #: the engine no longer knows the app (deleted, purged, expired)
    FORGOTTEN = "forgotten"
    #: the cursor could not be honoured; CURRENT events of every app follow
    RESYNC = "resync"


@dataclass(frozen=True, slots=True)
class AppEvent:
    """One change of one app (or a RESYNC marker), after which ``cursor`` resumes.

    Args:
        cursor: Opaque position: pass it as ``events(since=...)`` to resume
            right after this event.
        kind: What changed.
        app_id: The app (empty for RESYNC).
        state: The app's state after the change.
        observed: When the engine observed the change (epoch seconds).
        role: The replica's role (REPLICA events), else None.
        replica_id: The replica's index in its role (REPLICA events), else None.
        replica: The replica after the change (REPLICA events), else None.
        msg: The app's message after the change.
        num_restarts: The app's restart count after the change.
        replicas: Every replica after the change, where the source knows
            them (empty for FORGOTTEN and RESYNC).
        handle: The app handle (``scheduler://session/app_id``) the user was
            given; set by the scheduler.

    Example:
        >>> e = AppEvent("c1", EventKind.APP, "app-1", AppState.RUNNING, 1.5e9)
        >>> AppEvent.from_json(e.to_json()) == e
        True
    """

    cursor: str
    kind: EventKind
    app_id: str = ""
    state: AppState = AppState.UNKNOWN
    observed: float = 0.0
    role: str | None = None
    replica_id: int | None = None
    replica: ReplicaSnapshot | None = None
    msg: str = ""
    num_restarts: int = 0
    replicas: tuple[ReplicaSnapshot, ...] = ()
    handle: str = ""

    @property
    def terminal(self) -> bool:
        """True when the app is in a terminal state after this event."""
        return self.state in (AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (states by name); see :meth:`from_json`."""
        out: dict[str, Any] = {
            "cursor": self.cursor,
            "kind": self.kind.value,
            "app_id": self.app_id,
            "state": self.state.name,
            "observed": self.observed,
            "msg": self.msg,
            "num_restarts": self.num_restarts,
            "handle": self.handle,
        }
        if self.role is not None:
            out["role"] = self.role
            out["replica_id"] = self.replica_id
        if self.replica is not None:
            out["replica"] = replica_to_json(self.replica)
        if self.replicas:
            out["replicas"] = [replica_to_json(r) for r in self.replicas]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AppEvent:
        """The event :meth:`to_json` wrote.

        Raises:
            InvalidArgumentError: ``data`` is not such a dict.
        """
        try:
            replica = data.get("replica")
            return cls(
                cursor=str(data["cursor"]),
                kind=EventKind(data["kind"]),
                app_id=str(data.get("app_id", "")),
                state=AppState[data.get("state", "UNKNOWN")],
                observed=float(data.get("observed", 0.0)),
                role=data.get("role"),
                replica_id=data.get("replica_id"),
                replica=None if replica is None else replica_from_json(replica),
                msg=str(data.get("msg", "")),
                num_restarts=int(data.get("num_restarts", 0)),
                replicas=tuple(replica_from_json(r) for r in data.get("replicas", ())),
                handle=str(data.get("handle", "")),
            )
        except (KeyError, ValueError, TypeError, AttributeError) as e:
            raise InvalidArgumentError(f"not an app event: {e!r}") from e


_REPLICA_FIELDS = tuple(f.name for f in fields(ReplicaSnapshot))


def replica_to_json(replica: ReplicaSnapshot) -> dict[str, Any]:
    """A replica snapshot as a JSON-ready dict (only fields that are set)."""
    out: dict[str, Any] = {
        "role": replica.role,
        "id": replica.id,
        "state": replica.state.name,
    }
    for name in _REPLICA_FIELDS:
        if name in out:
            continue
        value = getattr(replica, name)
        if name == "reason":
            if value is not None:
                out[name] = value.name
        elif value not in (None, "", 0) or (name == "exit_code" and value == 0):
            out[name] = value
    return out


def replica_from_json(data: dict[str, Any]) -> ReplicaSnapshot:
    """The replica :func:`replica_to_json` wrote."""
    values = {k: v for k, v in data.items() if k in _REPLICA_FIELDS}
    values["state"] = AppState[data["state"]]
    if "reason" in values:
        values["reason"] = StatusReason[values["reason"]]
    return ReplicaSnapshot(**values)
