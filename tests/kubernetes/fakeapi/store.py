"""The object store: objects by (kind, namespace, name), one global
resourceVersion counter, a bounded event history and live watchers.

Every write bumps the counter and stamps ``metadata.resourceVersion``; the
event it produces goes to the history (for watches that resume from a
version) and to every live watcher's queue. Once the history drops events
(``history_limit``) or :meth:`Store.compact` is called, a watch from an older
version is answered 410 Expired, as etcd compaction makes a real server do.

Stored objects are never mutated in place: writers store a new dict, so the
history and the watch queues can share them.

Example::

    store = Store()
    store.put(kind, "ns", obj)          # ADDED, resourceVersion "1"
    watcher = store.watch(kind, "ns", since=1)
"""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from .clock import Clock
from .fieldsets import with_managed_fields
from .jsoncopy import copy_json
from .kinds import JSON, KINDS, Kind, expired

ObjKey = tuple[tuple[str, str, str], str, str]


def now_iso() -> str:
    """A creation/transition timestamp as the server writes it (seconds, UTC)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Event:
    rv: int
    kind: Kind
    type: str
    obj: JSON
    old: JSON | None = None  # the previous version, for MODIFIED

    @property
    def namespace(self) -> str:
        return str(self.obj["metadata"].get("namespace", ""))


@dataclass(eq=False)
class Watcher:
    """A live subscription to one kind (optionally one namespace)."""

    kind: Kind
    namespace: str | None
    queue: asyncio.Queue[Event] = field(default_factory=asyncio.Queue)

    def wants(self, event: Event) -> bool:
        return event.kind == self.kind and (
            self.namespace is None or event.namespace == self.namespace
        )


class Notifier:
    """Wakes every waiter on :meth:`notify` (a broadcast, level-free event)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self) -> None:
        await self._event.wait()


class Store:
    """In-memory objects, resourceVersion counter, history and watchers."""

    def __init__(
        self,
        history_limit: int = 10_000,
        *,
        watch_window: float | None = None,
        managed_fields: bool = True,
        clock: Clock | None = None,
    ) -> None:
        #: when events were recorded (the watch window's expiry)
        self.clock = clock or Clock()
        self.rv = 0
        self.objects: dict[ObjKey, JSON] = {}
        self.history: deque[Event] = deque()
        self.history_limit = history_limit
        #: seconds an event stays resumable (a watch cache's window; None: no limit)
        self.watch_window = watch_window
        #: write metadata.managedFields on creates and updates, as a real server
        self.managed_fields = managed_fields
        self._recorded_at: deque[float] = deque()
        self.compacted_rv = 0
        #: watches from an older version answer 410 (:meth:`forget_watch_cache`)
        self.watch_floor = 0
        self.watchers: set[Watcher] = set()
        self.changed = Notifier()

    # -- reads -------------------------------------------------------------
    def get(self, kind: Kind, namespace: str, name: str) -> JSON | None:
        return self.objects.get((kind.key, namespace, name))

    def items(self, kind: Kind, namespace: str | None = None) -> list[JSON]:
        """Objects of a kind, sorted by namespace then name (as etcd lists)."""
        found = [
            (ns, name, obj)
            for (k, ns, name), obj in self.objects.items()
            if k == kind.key and (namespace is None or ns == namespace)
        ]
        return [obj for _, _, obj in sorted(found, key=lambda t: (t[0], t[1]))]

    def items_at(self, kind: Kind, namespace: str | None, rv: int) -> list[JSON]:
        """Objects of a kind as they were at version ``rv`` (an exact list, as
        etcd answers it from its revisions): the later history, undone.

        Raises ``ApiError(410)`` when that history was compacted away.
        """
        if rv < self.compacted_rv:
            raise expired("The resourceVersion for the provided list is too old.")
        objects = {
            (ns, name): obj
            for (k, ns, name), obj in self.objects.items()
            if k == kind.key and (namespace is None or ns == namespace)
        }
        for event in reversed(self.history):
            if event.rv <= rv:
                break
            if event.kind.key != kind.key:
                continue
            meta = event.obj["metadata"]
            key = (str(meta.get("namespace", "")), str(meta["name"]))
            if namespace is not None and key[0] != namespace:
                continue
            if event.type == "ADDED":
                objects.pop(key, None)
            elif event.old is not None:
                objects[key] = event.old
        return [objects[k] for k in sorted(objects)]

    # -- writes ------------------------------------------------------------
    def _record(
        self, kind: Kind, type_: str, obj: JSON, old: JSON | None = None
    ) -> None:
        event = Event(self.rv, kind, type_, obj, old)
        self.history.append(event)
        self._recorded_at.append(self.clock.now())
        while len(self.history) > self.history_limit:
            self.compacted_rv = self.history.popleft().rv
            self._recorded_at.popleft()
        self._expire_window()
        for watcher in self.watchers:
            if watcher.wants(event):
                watcher.queue.put_nowait(event)
        self.changed.notify()

    def _expire_window(self) -> None:
        """Drop the events older than ``watch_window`` (their versions get 410)."""
        if self.watch_window is None:
            return
        oldest = self.clock.now() - self.watch_window
        while self._recorded_at and self._recorded_at[0] < oldest:
            self._recorded_at.popleft()
            self.compacted_rv = self.history.popleft().rv

    def _managed(self, stored: JSON, old: JSON | None) -> JSON:
        """``stored`` (a fresh copy) with its managedFields written."""
        if self.managed_fields:
            with_managed_fields(stored, old, now_iso())
        return stored

    def _stamp(self, obj: JSON) -> JSON:
        self.rv += 1
        obj = copy_json(obj)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        return obj

    def create(self, kind: Kind, namespace: str, obj: JSON) -> JSON:
        """Store a new object (the caller checked it does not exist)."""
        meta = obj["metadata"]
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", now_iso())
        meta.setdefault("generation", 1)
        if kind.namespaced:
            meta["namespace"] = namespace
        stored = self._managed(self._stamp(obj), None)
        self.objects[(kind.key, namespace, meta["name"])] = stored
        self._record(kind, "ADDED", stored)
        return stored

    def update(self, kind: Kind, namespace: str, obj: JSON) -> JSON:
        """Replace an existing object with a new version."""
        key = (kind.key, namespace, obj["metadata"]["name"])
        old = self.objects[key]
        stored = self._managed(self._stamp(obj), old)
        self.objects[key] = stored
        self._record(kind, "MODIFIED", stored, old)
        return stored

    def remove(self, kind: Kind, namespace: str, name: str) -> JSON:
        """Delete an object; the DELETED event carries a new resourceVersion."""
        old = self.objects.pop((kind.key, namespace, name))
        gone = self._stamp(old)
        self._record(kind, "DELETED", gone, old)
        return gone

    def compact(self) -> None:
        """Forget all history: watches from any past version get 410."""
        self.history.clear()
        self._recorded_at.clear()
        self.compacted_rv = self.rv

    def forget_watch_cache(self) -> None:
        """What an API server restart does to its watch cache: it starts at
        the current version, so a watch from an older one gets 410, while an
        exact list of one (etcd's history) still answers until compacted."""
        self.watch_floor = self.rv

    # -- watch -------------------------------------------------------------
    def watch(
        self, kind: Kind, namespace: str | None, since: int | None
    ) -> tuple[Watcher, list[Event]]:
        """Subscribe; return the watcher and the events to send first.

        ``since=None`` means "from now": synthetic ADDED events for the
        current objects. Otherwise the history after ``since`` is replayed;
        raises ``ApiError(410)`` when that history was compacted away.
        """
        watcher = Watcher(kind, namespace)
        first: list[Event]
        if since is None:
            first = [
                Event(self.rv, kind, "ADDED", o) for o in self.items(kind, namespace)
            ]
        else:
            oldest = max(self.compacted_rv, self.watch_floor)
            if since < oldest:
                raise expired(f"too old resource version: {since} ({oldest})")
            first = [e for e in self.history if e.rv > since and watcher.wants(e)]
        self.watchers.add(watcher)
        return watcher, first

    def unwatch(self, watcher: Watcher) -> None:
        self.watchers.discard(watcher)

    def dependents(self, uid: str) -> Iterable[tuple[Kind, str, str]]:
        """(kind, namespace, name) of objects whose ownerReferences name ``uid``."""
        for (key, ns, name), obj in list(self.objects.items()):
            refs = obj["metadata"].get("ownerReferences") or []
            if any(ref.get("uid") == uid for ref in refs):
                yield KINDS[key], ns, name
