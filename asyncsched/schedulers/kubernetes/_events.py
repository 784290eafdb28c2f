"""The Kubernetes event source: list+watch from a resourceVersion, diffed.

``events()`` on Kubernetes runs its own caches (Volcano Jobs, batch Jobs,
pods of ``app.kubernetes.io/managed-by=asyncsched``) of each followed
namespace: the scheduler's namespace, those it submitted to and those the
cursor names. Every applied watch event is turned into the app's snapshot
(the one ``describe`` answers) and diffed against the app's last one by a
:class:`~asyncsched.schedulers.kit.SnapshotDiffer`; the events carry a
cursor holding each namespace's three resourceVersions, so a new process
resumes by watching from them (the server replays every change since).

* A version the server no longer has (410 Gone, "too old resource version",
  an API server restart) re-lists that cache and yields RESYNC, then CURRENT
  of every app, then goes on from the new list's version: never a gap.
* The reads do not grow with the number of apps: one list and one watch
  per resource kind and namespace, no per-app request.
* When one watch event changes several things (a replica and the app),
  every event but the last carries the cursor from before that watch event:
  resuming from it replays the whole change (at-least-once).

Example:
    >>> async def main(sched: KubernetesScheduler, saved: str | None) -> None:
    ...     async with sched.events(since=saved) as stream:  # doctest: +SKIP
    ...         async for event in stream:
    ...             saved = event.cursor
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectSendStream

from asyncsched.errors import InvalidArgumentError
from asyncsched.schedulers.kit import (
    AppEvent,
    AppSnapshot,
    ChangeNotifier,
    EventKind,
    SnapshotDiffer,
    TaskHost,
    decode_cursor,
    encode_cursor,
    stamp_burst,
)
from asyncsched.schedulers.kubernetes._caches import Caches
from asyncsched.schedulers.kubernetes._connector import Connector
from asyncsched.schedulers.kubernetes._found import (
    Found,
    deleting,
    found_of,
    pods_behind,
    snapshot_of,
)
from asyncsched.schedulers.kubernetes._names import namespace_problem
from asyncsched.schedulers.kubernetes._registry import CacheSettings
from asyncsched.schedulers.kubernetes._resumable import (
    ResumableInformer,
    version_number,
)
from asyncsched.specs import is_terminal

__all__ = ["KubeEvents", "read_cursor"]

#: cursor keys: the namespaces' versions (Volcano Jobs, batch Jobs, pods)
_NS = "ns"
#: cursor key: which event of one watch event (see :meth:`KubeEvents.changed`)
_PART = "p"


def read_cursor(cursor: str, source: str) -> dict[str, list[str]] | None:
    """The namespaces' versions a cursor holds; None when they are not
    versions this source can resume from (then the stream starts with RESYNC).

    Raises:
        InvalidArgumentError: not a cursor of ``source``, or one naming a
            namespace that is not a DNS-1123 label (names go into request
            paths: they are checked before any request).
    """
    position = decode_cursor(cursor, source)
    spaces = position.get(_NS)
    if not isinstance(spaces, dict):
        return None
    out: dict[str, list[str]] = {}
    for namespace, versions in spaces.items():
        problem = namespace_problem(namespace)
        if problem is not None:
            raise InvalidArgumentError(
                f"the cursor names a namespace Kubernetes refuses: {problem}"
            )
        if (
            not isinstance(versions, list)
            or len(versions) != 3
            or not all(isinstance(v, str) for v in versions)
            or not all(v == "" or version_number(v) is not None for v in versions)
        ):
            return None
        out[str(namespace)] = versions
    return out


@dataclass(eq=False, repr=False)
class KubeEvents:
    """Follows the apps of some namespaces; one per ``events()`` call."""

    _source: str
    _connector: Connector
    _tasks: TaskHost
    _settings: CacheSettings
    _namespaces: Callable[[], set[str]]
    _differ: SnapshotDiffer = field(default_factory=SnapshotDiffer, init=False)
    _caches: dict[str, Caches] = field(default_factory=dict, init=False)
    _send: MemoryObjectSendStream[AppEvent] | None = field(default=None, init=False)
    #: terminal apps whose pods the pods cache has not caught up with yet
    _held: set[str] = field(default_factory=set, init=False)

    # -- the stream -------------------------------------------------------------

    async def follow(
        self, since: str | None, is_open: Callable[[], bool]
    ) -> AsyncIterator[AppEvent]:
        """Every change after ``since`` (None: CURRENT of every app first)."""
        positions = None if since is None else read_cursor(since, self._source)
        api = await self._connector.connect()
        wanted = {self._connector.home, *self._namespaces(), *(positions or {})}
        send, receive = anyio.create_memory_object_stream[AppEvent](math.inf)
        self._send = send
        scopes: list[anyio.CancelScope] = []
        try:
            for namespace in sorted(wanted):
                caches = Caches(
                    api,
                    namespace,
                    changes=ChangeNotifier(),
                    live=True,
                    settings=self._settings,
                    informer=ResumableInformer,
                )
                self._caches[namespace] = caches
                saved = (positions or {}).get(namespace)
                for index, informer in enumerate(self._informers(caches)):
                    informer.listener = self
                    if saved is not None and saved[index]:
                        informer.resume_from = saved[index]
                    scopes.append(anyio.CancelScope())
                    await self._tasks.start(
                        _scoped(scopes[-1], informer.run),
                        name=f"kube-events {informer.path}",
                    )
            scopes.append(anyio.CancelScope())
            await self._tasks.start(_closer(scopes[-1], send), name="kube-events close")
            observed = time.time()
            snapshots = list(self._snapshots())
            if any(i.expired_at_start for i in self._all_informers()):
                positions = None  # a version was compacted away: start over
            if since is None or positions is None:
                self._differ.relist(snapshots, observed=observed)
                resync = None if since is None else self._resync(observed)
                for event in self._current(resync):
                    yield event
            else:
                # resumed: the caches hold what did not change since the
                # cursor; the watches replay the rest. An app whose end came
                # before its pods is not known yet: it is told in full once
                # they come (a change held back before the cursor was taken).
                # Namespaces the cursor does not name send their apps' state
                # (resuming from ``since`` again gives this burst again)
                self._differ.relist(
                    [s for s in snapshots if not self._behind(s)], observed=observed
                )
                fresh = set(wanted) - set(positions)
                drafts = [
                    e
                    for e in self._differ.current()
                    if e.app_id.partition(":")[0] in fresh
                ]
                for event in stamp_burst(drafts, self._cursor(), restart=since):
                    yield event
            for informer in self._all_informers():
                informer.gate.set()
            with receive:
                while is_open():
                    try:
                        event = await receive.receive()
                    except anyio.EndOfStream:
                        return
                    yield event
        finally:
            for scope in scopes:
                scope.cancel()
            send.close()
            receive.close()

    # -- what the informers tell ------------------------------------------------

    def changed(self, informer: ResumableInformer, key: str, before: str) -> None:
        """Diff the app of ``key`` after one applied watch event."""
        self._diff(informer, key, before)
        if self._held:
            self.advanced(informer)

    def advanced(self, informer: ResumableInformer) -> None:
        """The pods cache moved on (a change, a bookmark): diff the apps held
        back while it was behind their Jobs."""
        for key in sorted(self._held):
            self._diff(informer, key, informer.resource_version)

    def _diff(self, informer: ResumableInformer, key: str, before: str) -> None:
        namespace = key.partition(":")[0]
        caches = self._caches.get(namespace)
        if caches is None:
            return
        observed = time.time()
        snapshot = _snapshot(caches, key)
        self._held.discard(key)
        if snapshot is not None and self._behind(snapshot):
            return
        if snapshot is None:
            gone = self._differ.forget(key, observed=observed)
            drafts = [] if gone is None else [gone]
        else:
            drafts = self._differ.update(snapshot, observed=observed)
        if not drafts:
            return
        last = len(drafts) - 1
        for i, draft in enumerate(drafts):
            if i == last:
                cursor = self._cursor()
            else:  # resumes before this watch event: it is replayed whole
                cursor = self._cursor({id(informer): before}, part=i + 1)
            self._emit(replace(draft, cursor=cursor))

    def relisted(self, informer: ResumableInformer, gone: bool) -> None:
        """A cache listed again: RESYNC + CURRENT after a 410, else the diff."""
        observed = time.time()
        snapshots = list(self._snapshots())
        if gone:
            self._differ = SnapshotDiffer()
            self._differ.relist(snapshots, observed=observed)
            for event in self._current(self._resync(observed)):
                self._emit(event)
            return
        cursor = self._cursor()
        for draft in self._differ.relist(snapshots, observed=observed):
            self._emit(replace(draft, cursor=cursor))

    # -- helpers -------------------------------------------------------------------

    def _behind(self, snapshot: AppSnapshot) -> bool:
        """Hold a terminal app whose end came before the pod changes that
        caused it (two watches): its replicas' outcomes follow on the pods'."""
        if is_terminal(snapshot.state) and pods_behind(found_of(snapshot)):
            self._held.add(snapshot.app_id)
            return True
        return False

    def _emit(self, event: AppEvent) -> None:
        if self._send is not None:
            # a reader that has gone: nothing to tell
            with contextlib.suppress(
                anyio.ClosedResourceError, anyio.BrokenResourceError
            ):
                self._send.send_nowait(event)

    def _resync(self, observed: float) -> AppEvent:
        """RESYNC, before the CURRENT events of every app."""
        return AppEvent(
            "",
            EventKind.RESYNC,
            observed=observed,
            msg="resourceVersion too old (history compacted or API server"
            " restarted): current state follows",
        )

    def _current(self, resync: AppEvent | None = None) -> list[AppEvent]:
        """CURRENT of every app (after ``resync``): a burst, whose events but
        the last restart it (resuming there gives all of them again)."""
        first = [] if resync is None else [resync]
        return stamp_burst([*first, *self._differ.current()], self._cursor())

    def _cursor(self, override: dict[int, str] | None = None, part: int = 0) -> str:
        """The position now (``override``: an informer's version instead);
        ``part`` tells apart the events of one watch event (ignored when
        resuming)."""
        spaces: dict[str, list[str]] = {}
        for namespace, caches in self._caches.items():
            spaces[namespace] = [
                (override or {}).get(id(i), i.resource_version)
                for i in self._informers(caches)
            ]
        position: dict[str, Any] = {_NS: spaces}
        if part:
            position[_PART] = part
        return encode_cursor(self._source, position)

    def _snapshots(self) -> Iterator[AppSnapshot]:
        for caches in self._caches.values():
            keys = set(caches.volcano.by_key) | set(caches.batch.by_key)
            for key in sorted(keys):
                snapshot = _snapshot(caches, key)
                if snapshot is not None:
                    yield snapshot

    def _all_informers(self) -> list[ResumableInformer]:
        return [i for c in self._caches.values() for i in self._informers(c)]

    @staticmethod
    def _informers(caches: Caches) -> list[ResumableInformer]:
        return [i for i in caches.informers if isinstance(i, ResumableInformer)]


def _snapshot(caches: Caches, key: str) -> AppSnapshot | None:
    """The app ``key``'s snapshot from the caches (None: no live Job)."""
    named = caches.volcano.by_key.get(key)
    if named:
        job = list(named.values())[-1]
        return (
            None if deleting(job) else snapshot_of(key, Found("volcano", caches, [job]))
        )
    jobs = [j for j in caches.batch.by_key.get(key, {}).values() if not deleting(j)]
    return snapshot_of(key, Found("indexed", caches, jobs)) if jobs else None


def _scoped(
    scope: anyio.CancelScope, run: Callable[..., Coroutine[Any, Any, None]]
) -> Callable[..., Coroutine[Any, Any, None]]:
    async def runner(*, task_status: TaskStatus[None]) -> None:
        with scope:
            await run(task_status=task_status)

    return runner


def _closer(
    scope: anyio.CancelScope, send: MemoryObjectSendStream[AppEvent]
) -> Callable[..., Coroutine[Any, Any, None]]:
    """A task that ends the stream when the scheduler closes (its tasks are
    cancelled) or the reader stops (``scope`` cancelled)."""

    async def runner(*, task_status: TaskStatus[None]) -> None:
        try:
            with scope:
                task_status.started()
                await anyio.sleep_forever()
        finally:
            send.close()

    return runner
