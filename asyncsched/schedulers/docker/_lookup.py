"""Finding apps: from the events-fed index, or from the daemon while it resyncs.

One :class:`~._events.EventWatcher` per scheduler keeps the
:class:`~._state.ContainerIndex` current; :class:`Lookup` starts it on first
use (and again should it die) and answers ``describe``/``list`` from the
index when it is synced, else from a labelled listing. Records whose exit
is not understood yet are inspected first.

Example:
    >>> async def main(lookup: Lookup) -> None:
    ...     view = await lookup.view("trainer-x1")
    ...     print(None if view is None else view.snapshot().state)
"""

from __future__ import annotations

import builtins
from collections.abc import Callable

import anyio

from asyncsched.schedulers.kit import TaskHost

from ._connection import DockerConnection, bind
from ._events import EventWatcher, list_records, settle
from ._state import AppView, ContainerIndex, ContainerRecord

__all__ = ("Lookup",)


class Lookup:
    """Answers from the index the events keep current, or from the daemon.

    Args:
        conn: The daemon and the API slots.
        index: The index the watcher keeps.
        tasks: Runs the watcher.
        on_view: Called with every app view read (fail-fast acts on it).
        on_exit: Called by the watcher after a container of an app exited.
    """

    def __init__(
        self,
        conn: DockerConnection,
        index: ContainerIndex,
        tasks: TaskHost,
        *,
        on_view: Callable[[AppView], None],
        on_exit: Callable[[str], None],
    ) -> None:
        self._conn, self._index, self._tasks = conn, index, tasks
        self._on_view, self._on_exit = on_view, on_exit
        self._lock = anyio.Lock()
        #: the running watcher (None before the first call, or after it died)
        self.watcher: EventWatcher | None = None

    async def ensure_watching(self) -> EventWatcher:
        """The watcher, started (and its first listing made) if need be."""
        watcher = self.watcher
        if watcher is not None:
            return watcher
        async with self._lock:
            if self.watcher is None:
                candidate = EventWatcher(self._conn, self._index, on_exit=self._on_exit)
                await self._tasks.start(
                    candidate.run,
                    name="docker-events",
                    on_error=lambda exc: self._watcher_died(candidate),
                )
                self.watcher = candidate
            return self.watcher

    def _watcher_died(self, watcher: EventWatcher) -> None:
        """The events task crashed: the next call starts (and resyncs) a new one."""
        if self.watcher is watcher:
            self.watcher = None
        watcher.mark_unsynced()  # waiters wake and fall back to queries

    @property
    def synced(self) -> bool:
        """Whether the index is current (change signals then wake waiters)."""
        return self.watcher is not None and self.watcher.synced

    async def view(self, app_id: str) -> AppView | None:
        """The containers of ``app_id``; None when there are none."""
        docker = self._conn.docker()
        watcher = await self.ensure_watching()
        view = self._index.app(app_id) if watcher.synced else None
        if view is None:
            # not seen (yet): another process may have just created it, or the
            # stream is reconnecting -- ask the daemon directly
            async with self._conn.slot():
                records = await list_records(docker, self._conn.host, app_id)
            if not records:
                return None
            if watcher.synced:
                for record in records:
                    if record.id not in self._index.records:
                        self._index.upsert(record)
                view = self._index.app(app_id)
            else:
                view = AppView(app_id, records)
                view.records.sort(key=lambda r: (r.role_index, r.role, r.replica_id))
        if view is not None:
            await self._settle(view.records)
            self._on_view(view)
        return view

    async def views(self, session: str) -> builtins.list[AppView]:
        """The apps of ``session`` (its label)."""
        watcher = await self.ensure_watching()
        if watcher.synced:
            views = self._index.apps()
        else:
            grouped: dict[str, builtins.list[ContainerRecord]] = {}
            async with self._conn.slot():
                records = await list_records(self._conn.docker(), self._conn.host)
            for r in records:
                grouped.setdefault(r.app_id, []).append(r)
            views = [AppView(a, rs) for a, rs in grouped.items()]
        views = [v for v in views if v.session == session]
        await self._settle([r for v in views for r in v.records])
        for view in views:
            self._on_view(view)
        return views

    async def _settle(self, records: builtins.list[ContainerRecord]) -> None:
        docker = self._conn.docker()
        pending = [r for r in records if not r.settled]
        if pending:
            await self._conn.run_all(
                [bind(settle, docker, self._conn.host, r) for r in pending]
            )
