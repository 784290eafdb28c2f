"""Turn successive snapshots of apps into change events.

An event source that only sees states (a re-list, a poll, a relist after a
lost watch) hands each :class:`~asyncsched.schedulers.snapshot.AppSnapshot`
to :class:`SnapshotDiffer`; it remembers the last state of every app and
returns the :class:`~asyncsched.schedulers.events.AppEvent`\\ s between the
two, replica changes first, then the app's own. Events come back with an
empty cursor: the source stamps its own.

Example:
    >>> from asyncsched.specs.status import AppState
    >>> from asyncsched.schedulers.snapshot import AppSnapshot, ReplicaSnapshot
    >>> differ = SnapshotDiffer()
    >>> snap = AppSnapshot("a", [ReplicaSnapshot("r", 0, AppState.RUNNING)])
    >>> [e.kind.value for e in differ.update(snap, observed=1.0)]
    ['submitted']
    >>> done = AppSnapshot("a", [ReplicaSnapshot("r", 0, AppState.SUCCEEDED, 0)])
    >>> [e.kind.value for e in differ.update(done, observed=2.0)]
    ['replica', 'app']
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from asyncsched.schedulers.events import AppEvent, EventKind
from asyncsched.schedulers.snapshot import AppSnapshot, ReplicaSnapshot
from asyncsched.specs.status import AppState

__all__ = ("SnapshotDiffer", "replica_key")


def replica_key(replica: ReplicaSnapshot) -> tuple[object, ...]:
    """What makes a replica change worth an event: state, exit code, reason,
    restarts (not its free-form message or timestamps)."""
    return (replica.state, replica.exit_code, replica.reason, replica.num_restarts)


@dataclass(slots=True)
class _Seen:
    state: AppState
    msg: str
    num_restarts: int
    replicas: tuple[ReplicaSnapshot, ...]
    observed: float


class SnapshotDiffer:
    """The last known state of each app, and the events to the next one."""

    def __init__(self) -> None:
        self._seen: dict[str, _Seen] = {}

    def __len__(self) -> int:
        return len(self._seen)

    def __contains__(self, app_id: object) -> bool:
        return app_id in self._seen

    def update(self, snapshot: AppSnapshot, *, observed: float) -> list[AppEvent]:
        """Remember ``snapshot``; the events since the app's last state
        (SUBMITTED for an app not seen before)."""
        events, self._seen[snapshot.app_id] = self._diff(snapshot, observed)
        return events

    def peek(self, snapshot: AppSnapshot, *, observed: float) -> list[AppEvent]:
        """The events :meth:`update` would return, remembering nothing."""
        return self._diff(snapshot, observed)[0]

    def _diff(
        self, snapshot: AppSnapshot, observed: float
    ) -> tuple[list[AppEvent], _Seen]:
        app_id = snapshot.app_id
        replicas = tuple(snapshot.replicas)
        state = snapshot.state
        now = _Seen(state, snapshot.msg, snapshot.num_restarts, replicas, observed)
        before = self._seen.get(app_id)
        if before is None:
            return [_event(EventKind.SUBMITTED, app_id, now)], now
        old = {(r.role, r.id): replica_key(r) for r in before.replicas}
        out = [
            _event(EventKind.REPLICA, app_id, now, r)
            for r in replicas
            if old.get((r.role, r.id)) != replica_key(r)
        ]
        if (before.state, before.num_restarts) != (state, snapshot.num_restarts) or (
            out and before.msg != snapshot.msg
        ):
            out.append(_event(EventKind.APP, app_id, now))
        return out, now

    def relist(
        self, snapshots: Iterable[AppSnapshot], *, observed: float
    ) -> list[AppEvent]:
        """Every app the engine lists now: their changes, then FORGOTTEN for
        each known app the list no longer holds."""
        out: list[AppEvent] = []
        listed: set[str] = set()
        for snapshot in snapshots:
            listed.add(snapshot.app_id)
            out.extend(self.update(snapshot, observed=observed))
        for app_id in [a for a in self._seen if a not in listed]:
            event = self.forget(app_id, observed=observed)
            if event is not None:
                out.append(event)
        return out

    def forget(self, app_id: str, *, observed: float) -> AppEvent | None:
        """FORGOTTEN for a known app (None if unknown); forgets it."""
        before = self._seen.pop(app_id, None)
        if before is None:
            return None
        gone = _Seen(before.state, before.msg, before.num_restarts, (), observed)
        return _event(EventKind.FORGOTTEN, app_id, gone)

    def current(self) -> list[AppEvent]:
        """A CURRENT event per known app (its last state), in first-seen order."""
        return [_event(EventKind.CURRENT, a, s) for a, s in self._seen.items()]


def _event(
    kind: EventKind, app_id: str, seen: _Seen, replica: ReplicaSnapshot | None = None
) -> AppEvent:
    return AppEvent(
        cursor="",
        kind=kind,
        app_id=app_id,
        state=seen.state,
        observed=seen.observed,
        role=None if replica is None else replica.role,
        replica_id=None if replica is None else replica.id,
        replica=replica,
        msg=seen.msg,
        num_restarts=seen.num_restarts,
        replicas=seen.replicas,
    )
