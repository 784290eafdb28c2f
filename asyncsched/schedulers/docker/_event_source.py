"""``events()`` of the Docker backend: the daemon's own event stream, resumable.

Each reader opens ``GET /events`` filtered to containers of its session
(``type=container``, ``label=asyncsched.io/session=<name>``). Every engine
event only says *which* container changed: the container is inspected and
its app's snapshot (the same :class:`~._state.AppView` ``describe`` builds)
is diffed against the last one the reader saw (:class:`SnapshotDiffer`), so
an event states exactly what ``describe`` would have said then.

Resuming (see :mod:`._event_cursor` for the cursor):

1. ``GET /info``: the engine ID must be the cursor's, and the daemon's
   buffer (the last 256 events, lost at a restart) must still reach back to
   the cursor -- the cursor's own event is replayed, or for an anchor some
   event at or before it is. Otherwise: RESYNC, then CURRENT of every app.
2. The events after the cursor up to the daemon's time now are replayed
   (``since``/``until``); they name the apps that changed while nobody read.
3. The live stream is opened from that time, the session's containers are
   listed and inspected, and each changed app's changes are sent (coalesced:
   its replicas touched by a replayed event, then its state), ordered by the
   app's last replayed event. Then the live stream is followed.

A dropped stream (daemon restart, cut connection) is resumed the same way
from the last event read; the reader's memory of every app makes the
differences exact.
"""

from __future__ import annotations

import builtins
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeGuard

import aiohttp
import anyio

from asyncsched.errors import AsyncschedError
from asyncsched.schedulers.kit import (
    AppEvent,
    AppSnapshot,
    EventKind,
    ReplicaSnapshot,
    SnapshotDiffer,
    stamp_burst,
)
from asyncsched.schedulers.shared.docker_errors import docker_errors, is_not_found
from asyncsched.schedulers.shared.labels import LABEL_APP_ID, LABEL_SESSION
from asyncsched.specs import AppState

from ._client import open_events
from ._connection import DockerConnection
from ._event_cursor import (
    Position,
    decode_position,
    encode_position,
    parse_daemon_time,
    since_param,
)
from ._state import ContainerIndex, ContainerRecord

__all__ = ["ACTIONS", "DockerEventSource", "EngineEvent", "record_from_inspect"]

logger = logging.getLogger(__name__)

#: container actions that may change what ``describe`` says
ACTIONS = (
    "create",
    "start",
    "restart",
    "die",
    "oom",
    "update",
    "pause",
    "unpause",
    "destroy",
)


@dataclass(frozen=True)
class EngineEvent:
    """One container event of the daemon, placed in the filtered stream."""

    t: int
    n: int
    action: str
    container: str
    app_id: str
    #: the container's labels, ``name`` and ``image``
    attributes: Mapping[str, str] = field(default_factory=dict, compare=False)

    @classmethod
    def parse(cls, line: bytes, last: tuple[int, int]) -> EngineEvent | None:
        """The event of one JSON line (None if not ours); ``last`` = the
        previous event's ``(t, n)``."""
        try:
            raw = json.loads(line)
            t = int(raw["timeNano"])
        except (ValueError, KeyError, TypeError):
            return None
        actor = raw.get("Actor") or {}
        attrs = actor.get("Attributes") or {}
        n = last[1] + 1 if t == last[0] else 1
        return cls(
            t,
            n,
            str(raw.get("Action") or raw.get("status") or ""),
            str(actor.get("ID") or raw.get("id") or ""),
            str(attrs.get(LABEL_APP_ID, "")),
            {str(k): str(v) for k, v in attrs.items()},
        )


@dataclass
class _Reader:
    """What one ``events()`` iterator knows: apps seen, where it stands."""

    differ: SnapshotDiffer = field(default_factory=SnapshotDiffer)
    model: ContainerIndex = field(default_factory=ContainerIndex)
    #: the position after the last engine event fully handled
    at: Position | None = None


class DockerEventSource:
    """The Docker event stream of one scheduler's session, for its readers.

    Args:
        conn: The daemon (a client per connection) and the API slots, which
            bound the inspects of a re-list.
        session: The session whose containers are followed.
        is_open: False once the scheduler closed; readers then end.
        max_backoff: Longest pause between reconnects (seconds).
    """

    def __init__(
        self,
        conn: DockerConnection,
        session: str,
        is_open: Callable[[], bool],
        *,
        max_backoff: float = 2.0,
    ) -> None:
        self._docker, self._host, self._limiter = conn.docker, conn.host, conn.slot
        self._session, self._is_open = session, is_open
        self._max_backoff = max_backoff
        self._responses: set[aiohttp.ClientResponse] = set()
        #: connections made (a test and the benchmark read it)
        self.connections = 0

    @property
    def filters(self) -> dict[str, list[str]]:
        """The daemon-side filters of every request (cursors depend on them)."""
        return {
            "type": ["container"],
            "label": [f"{LABEL_SESSION}={self._session}"],
            "event": list(ACTIONS),
        }

    def close(self) -> None:
        """End every reader: their open streams are closed."""
        for response in list(self._responses):
            response.close()

    @staticmethod
    def check_cursor(cursor: str) -> None:
        """Refuse what is not a Docker events cursor (InvalidArgumentError)."""
        decode_position(cursor)

    async def follow(self, since: str | None) -> AsyncIterator[AppEvent]:
        """Every change after ``since`` (None: CURRENT of every app first)."""
        reader = _Reader()
        start = None if since is None else decode_position(since)
        backoff = 0.05
        while self._is_open():
            try:
                async for event in self._connection(reader, start):
                    backoff = 0.05
                    yield event
            except (AsyncschedError, aiohttp.ClientError, OSError) as exc:
                if reader.at is None:
                    raise  # never got going: the caller hears why
                if self._is_open():
                    logger.warning("Docker events stream lost (%s); resuming", exc)
            if not self._is_open():
                return
            start = reader.at
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, self._max_backoff)

    # -- one connection ----------------------------------------------------------

    async def _connection(
        self, reader: _Reader, start: Position | None
    ) -> AsyncIterator[AppEvent]:
        docker = self._docker()
        engine, now = await self._daemon_now()
        self.connections += 1
        replayed: builtins.list[EngineEvent] | None = None
        if start is not None and not start.current and start.engine == engine:
            # list first, then replay up to a later time: an app no replayed
            # event names kept its listed state all along
            await self._relist(reader)
            engine, now = await self._daemon_now()
            if engine == start.engine:
                replayed = await self._replay(start, now)
            if replayed is not None:  # bring what they name up to date
                await self._refresh(reader, {e.container for e in replayed})
        anchor = Position(
            engine, now, sum(1 for e in replayed or () if e.t == now) if replayed else 0
        )
        with docker_errors("follow Docker events", self._host):
            async with open_events(
                docker, self.filters, since=since_param(now)
            ) as response:
                self._responses.add(response)
                try:
                    if replayed is None:
                        # CURRENT from a listing made after the stream opened:
                        # what changed since comes again, as no news
                        await self._relist(reader)
                    reader.at = anchor
                    if replayed is not None and start is not None:
                        drafts = self._catch_up(reader, replayed, start, now)
                    else:
                        resync = start is not None and not start.current
                        drafts = self._current(reader, anchor, resync, now)
                    for event in drafts:
                        yield event
                    async for event in self._live(reader, response, anchor):
                        yield event
                finally:
                    self._responses.discard(response)
                    response.close()  # aiodocker leaves streaming responses open

    async def _daemon_now(self) -> tuple[str, int]:
        """The daemon's engine ID and its clock (epoch ns)."""
        with docker_errors("read the Docker daemon's identity", self._host):
            info = await self._docker().system.info()
        return str(info.get("ID") or ""), parse_daemon_time(
            str(info.get("SystemTime") or "")
        )

    async def _refresh(self, reader: _Reader, containers: set[str]) -> None:
        """Inspect ``containers`` again (concurrently) into the reader's model."""
        records = reader.model.records

        async def inspect(cid: str) -> None:
            async with self._limiter():
                record = await self._inspect(cid)
            if record is None:
                records.pop(cid, None)
            else:
                records[cid] = record

        async with anyio.create_task_group() as tg:
            for cid in containers:
                tg.start_soon(inspect, cid)

    async def _live(
        self, reader: _Reader, response: aiohttp.ClientResponse, anchor: Position
    ) -> AsyncIterator[AppEvent]:
        """Follow the stream: the events the daemon sent together are one
        batch, whose containers are inspected concurrently, then applied in
        order."""
        last = (anchor.t, 0)
        pending = b""
        while self._is_open():
            chunk = await response.content.readany()
            if not chunk:
                return  # the daemon ended the stream
            *lines, pending = (pending + chunk).split(b"\n")
            batch: builtins.list[EngineEvent] = []
            for line in lines:
                event = EngineEvent.parse(line, last)
                if event is None:
                    continue
                last = (event.t, event.n)
                if (event.t, event.n) > (anchor.t, anchor.n):
                    batch.append(event)  # (else: the catch-up delivered it)
            known = await self._prefetch(reader.model, batch)
            for event in batch:
                before = reader.at
                drafts = await self._apply(reader, event, known)
                reader.at = Position(anchor.engine, event.t, event.n)
                for draft in _stamp(drafts, before, reader.at):
                    yield draft

    async def _prefetch(
        self, model: ContainerIndex, batch: builtins.list[EngineEvent]
    ) -> dict[str, ContainerRecord | None]:
        """Inspect, concurrently, the containers of ``batch`` whose events
        need it: those :func:`_told` cannot read from the event, the batch's
        earlier events applied first (a container created, started and ended
        within one batch needs none)."""
        wanted = _to_inspect(model.records, batch)
        known: dict[str, ContainerRecord | None] = {}

        async def inspect(cid: str) -> None:
            async with self._limiter():
                known[cid] = await self._inspect(cid)

        async with anyio.create_task_group() as tg:
            for cid in wanted:
                tg.start_soon(inspect, cid)
        return known

    # -- the daemon's buffer -----------------------------------------------------

    async def _replay(
        self, start: Position, now: int
    ) -> builtins.list[EngineEvent] | None:
        """The events after ``start`` up to ``now``; None when the daemon's
        buffer no longer reaches back to ``start`` (trimmed, or restarted)."""
        if start.t > now:
            return None  # a cursor from the future: another daemon run
        if start.n == 0 and not await self._buffer_reaches(start.t):
            return None
        events = await self._read_all(self.filters, start.t, now)
        if sum(1 for e in events if e.t == start.t) < start.n:
            return None
        return [e for e in events if (e.t, e.n) > (start.t, start.n)]

    async def _buffer_reaches(self, t: int) -> bool:
        """Whether the daemon still holds an event (of any kind) at or before
        ``t``: then every event after ``t`` is held too."""
        return bool(await self._read_all({}, 1, t))

    async def _read_all(
        self, filters: dict[str, list[str]], since: int, until: int
    ) -> builtins.list[EngineEvent]:
        out: builtins.list[EngineEvent] = []
        last = (0, 0)
        with docker_errors("replay Docker events", self._host):
            async with open_events(
                self._docker(),
                filters,
                since=since_param(since),
                until=since_param(until),
            ) as response:
                try:
                    async for line in response.content:
                        event = EngineEvent.parse(line, last)
                        if event is not None:
                            last = (event.t, event.n)
                            out.append(event)
                finally:
                    response.close()
        return out

    # -- states ------------------------------------------------------------------

    async def _relist(self, reader: _Reader) -> None:
        """Replace the reader's model with the session's containers, inspected."""
        docker = self._docker()
        label = f"{LABEL_SESSION}={self._session}"
        with docker_errors("list containers", self._host):
            async with self._limiter():
                items = await docker.containers.list(
                    all=True, filters=json.dumps({"label": [label]})
                )
        records: dict[str, ContainerRecord] = {}

        async def inspect(cid: str) -> None:
            async with self._limiter():
                record = await self._inspect(cid)
            if record is not None:
                records[cid] = record

        async with anyio.create_task_group() as tg:
            for item in items:
                tg.start_soon(inspect, str(item._container["Id"]))
        reader.model.records = records

    async def _inspect(self, cid: str) -> ContainerRecord | None:
        """The container as ``describe`` sees it now; None once it is gone."""
        try:
            with docker_errors("inspect a container", self._host):
                info = await self._docker().containers.container(cid).show()
        except AsyncschedError as exc:
            if is_not_found(exc.__cause__):
                return None
            raise
        return record_from_inspect(info)

    async def _apply(
        self,
        reader: _Reader,
        event: EngineEvent,
        known: Mapping[str, ContainerRecord | None],
    ) -> list[AppEvent]:
        """The app's changes after an engine event (``known``: containers
        inspected since the event)."""
        if not event.app_id:
            return []
        model = reader.model
        told = _told(model.records.get(event.container), event)
        if not isinstance(told, _Inspect):
            record = told
        elif event.container in known:
            seen = known[event.container]
            record = None if seen is None else replace(seen)  # own copy
        else:
            record = await self._inspect(event.container)
        if record is not None and event.action == "oom":
            record.oom_killed = True  # the exit that follows is inspected
        if record is None:
            model.remove(event.container)
        else:
            model.upsert(record)
        view = model.app(event.app_id)
        observed = event.t / 1e9
        if view is None:
            gone = reader.differ.forget(event.app_id, observed=observed)
            return [] if gone is None else [gone]
        return reader.differ.update(view.snapshot(), observed=observed)

    def _current(
        self, reader: _Reader, anchor: Position, resync: bool, now: int
    ) -> list[AppEvent]:
        """CURRENT of every app (after RESYNC when a cursor was not honoured)."""
        observed = now / 1e9
        listed = {v.app_id: v.snapshot() for v in reader.model.apps()}
        drafts: list[AppEvent] = []
        if resync:
            drafts.append(
                AppEvent(
                    "",
                    EventKind.RESYNC,
                    observed=observed,
                    msg="the Docker daemon no longer holds the events after this"
                    " cursor (restarted, or more than its 256 buffered events"
                    " since): the current state of every app follows",
                )
            )
        for app_id in [a for a in list(_known(reader.differ)) if a not in listed]:
            gone = reader.differ.forget(app_id, observed=observed)
            if gone is not None:
                drafts.append(gone)
        for snapshot in listed.values():
            reader.differ.update(snapshot, observed=observed)
        drafts.extend(e for e in reader.differ.current() if e.app_id in listed)
        return stamp_burst(drafts, encode_position(anchor))

    def _catch_up(
        self,
        reader: _Reader,
        replayed: builtins.list[EngineEvent],
        start: Position,
        now: int,
    ) -> list[AppEvent]:
        """The changes of the apps named by the replayed events, one app
        after the other in the order of its last replayed event."""
        observed = now / 1e9
        last: dict[str, EngineEvent] = {}
        touched: set[str] = set()
        created: set[str] = set()
        for event in replayed:
            if event.app_id:
                last.pop(event.app_id, None)
                last[event.app_id] = event
                touched.add(event.container)
                if event.action == "create":
                    created.add(event.container)
        views = {v.app_id: v for v in reader.model.apps()}
        out: list[AppEvent] = []
        before = start
        for app_id, view in views.items():
            if app_id not in last and app_id not in reader.differ:
                reader.differ.update(view.snapshot(), observed=observed)  # seen
            elif app_id not in last:  # a reconnect: the reader knew it
                out.extend(
                    _stamp(
                        reader.differ.update(view.snapshot(), observed=observed),
                        before,
                        before,
                    )
                )
        for app_id, event in last.items():
            found = views.get(app_id)
            drafts: list[AppEvent]
            if found is None:
                gone = reader.differ.forget(app_id, observed=observed)
                drafts = [
                    gone
                    if gone is not None
                    else AppEvent("", EventKind.FORGOTTEN, app_id, observed=observed)
                ]
            else:
                snapshot = found.snapshot()
                fresh = all(r.id in created for r in found.records)
                if app_id not in reader.differ and not fresh:
                    reader.differ.update(
                        _unknown_where(snapshot, found.records, touched),
                        observed=observed,
                    )
                drafts = reader.differ.update(snapshot, observed=observed)
            here = Position(start.engine, event.t, event.n)
            out.extend(_stamp(drafts, before, here))
            before = here
        return out


def record_from_inspect(info: Mapping[str, Any]) -> ContainerRecord | None:
    """A record from ``GET /containers/{id}/json``; None if not an asyncsched
    container."""
    config = info.get("Config") or {}
    record = ContainerRecord.from_labels(
        str(info.get("Id", "")),
        str(info.get("Name", "")),
        str(config.get("Image", "")),
        config.get("Labels") or {},
        "created",
    )
    if record is not None:
        record.apply_inspect(info)
    return record


class _Inspect:
    """What :func:`_told` answers when only an inspect knows."""


_INSPECT = _Inspect()


def _told(
    record: ContainerRecord | None, event: EngineEvent
) -> ContainerRecord | _Inspect | None:
    """The container's record after ``event`` when the event alone says it
    (``record``: the container's record before it; None: the container is
    gone), else ``_INSPECT``. ``record`` is left as it is: a changed record
    is a copy.

    A create is built from the event's labels (what an inspect would say
    now, without waiting for the daemon's lock on a container being started:
    up to seconds on a busy host); a start of a created or restarting
    container means running; a ``die`` that the container's restart policy
    makes final gives the event's exit code.
    """
    if event.action == "destroy":
        return None
    if event.action == "create":
        return record or ContainerRecord.from_labels(
            event.container,
            event.attributes.get("name", ""),
            event.attributes.get("image", ""),
            event.attributes,
            "created",
        )
    if event.action == "start" and _starts(record):
        return replace(
            record, status="running", exit_code=None, oom_killed=False, error=""
        )
    if event.action == "die" and _final_die(record, event):
        return replace(record, status="exited", exit_code=_exit_code(event))
    return _INSPECT


def _to_inspect(
    records: Mapping[str, ContainerRecord], batch: Iterable[EngineEvent]
) -> set[str]:
    """The containers of ``batch`` that need an inspect: :func:`_told`
    applied in order on top of ``records`` (which are left as they are);
    once a container needs one, its later events read the inspect (made
    after them all)."""
    changed: dict[str, ContainerRecord | None] = {}
    wanted: set[str] = set()
    for event in batch:
        cid = event.container
        if not event.app_id or cid in wanted:
            continue
        told = _told(changed[cid] if cid in changed else records.get(cid), event)
        if isinstance(told, _Inspect):
            wanted.add(cid)
        else:
            changed[cid] = told
    return wanted


def _starts(record: ContainerRecord | None) -> TypeGuard[ContainerRecord]:
    """Whether a start event is all there is to know: the container was
    created, or is being restarted (its die was inspected: restart count and
    cancel mark are known). Anything else is inspected (the start may be old
    news to a record that is ahead of it)."""
    return record is not None and record.status in ("created", "restarting")


def _exit_code(event: EngineEvent) -> int | None:
    try:
        return int(event.attributes["exitCode"])
    except (KeyError, ValueError):
        return None


def _final_die(
    record: ContainerRecord | None, event: EngineEvent
) -> TypeGuard[ContainerRecord]:
    """Whether ``event`` (a ``die`` of ``record``'s container) says all there
    is to know: the container had started (a failed start's error is only in
    an inspect) and its policy makes the exit final."""
    return (
        record is not None
        and record.status == "running"
        and record.exit_is_final(_exit_code(event))
    )


def _known(differ: SnapshotDiffer) -> list[str]:
    return [e.app_id for e in differ.current()]


def _unknown_where(
    snapshot: AppSnapshot, records: list[ContainerRecord], touched: set[str]
) -> AppSnapshot:
    """``snapshot`` with the replicas of ``touched`` containers unknown: what
    a reader assumes of an app that changed while it was away."""
    ids = {(r.role, r.replica_id) for r in records if r.id in touched}
    replicas = [
        ReplicaSnapshot(r.role, r.id, AppState.UNKNOWN, num_restarts=-1)
        if (r.role, r.id) in ids
        else r
        for r in snapshot.replicas
    ]
    return AppSnapshot(snapshot.app_id, replicas, msg=snapshot.msg, num_restarts=-1)


def _stamp(
    drafts: list[AppEvent], before: Position | None, after: Position
) -> list[AppEvent]:
    """Cursors for the events of one step: the last one resumes after the
    step; the others resume before it (a reader killed in the middle gets
    the whole step again)."""
    if not drafts:
        return []
    head = encode_position(before if before is not None else after)
    tail = encode_position(after)
    return [
        replace(d, cursor=tail if i == len(drafts) - 1 else head)
        for i, d in enumerate(drafts)
    ]
