"""Batched job status: one ``squeue`` (plus one ``sacct`` fallback) per tick.

:class:`StatusBatcher` coalesces concurrent requests: every ``get(ids)``
made while a query runs joins the next one, so N concurrent describes cost
one or two commands. :class:`StatusTracker` is how the Slurm backend learns
of changes: one background loop for every ``wait`` in flight queries all
watched apps at once each tick, keeps their latest views and signals the
apps whose state changed, then sleeps with jittered backoff (short after a
change, longer while nothing changes), so waiting on N apps costs one query
per tick, not N.

Facts it relies on (Slurm 22.05): ``squeue -h -t all -j IDS`` keeps finished
jobs only with ``-t all``, and fails when the only id is unknown; finished
jobs leave the controller after ``MinJobAge``, then ``sacct`` (accounting) or
``sacct -c`` (the job completion log) has them.

Example:
    >>> async def main(fetch) -> None:
    ...     batcher = StatusBatcher(fetch)
    ...     views = await batcher.get(["12", "13"])
"""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import KW_ONLY, dataclass, field

import anyio

from asyncsched.errors import AsyncschedError, SchedulerClosedError
from asyncsched.schedulers.kit import ChangeNotifier, TaskHost
from asyncsched.schedulers.shared.coalesce import Coalescer
from asyncsched.schedulers.slurm._state import AppView

__all__ = ["Fetch", "StatusBatcher", "StatusTracker"]

logger = logging.getLogger(__name__)

Fetch = Callable[[frozenset[str]], Awaitable[dict[str, AppView]]]


class StatusBatcher(Coalescer[str, AppView]):
    """Coalesce concurrent status requests into one query at a time."""

    def __init__(self, fetch: Fetch) -> None:
        super().__init__(fetch, shared_errors=(AsyncschedError,))

    @property
    def queries(self) -> int:
        """Status queries run so far."""
        return self.fetches


@dataclass(eq=False)
class StatusTracker:
    """One polling loop shared by every ``wait``; it signals ``changes``."""

    batcher: StatusBatcher
    tasks: TaskHost
    changes: ChangeNotifier
    _: KW_ONLY
    min_interval: float = 0.25
    max_interval: float = 2.0
    #: polling ticks run so far
    ticks: int = field(default=0, init=False)
    _watchers: dict[str, int] = field(default_factory=dict, init=False)
    _latest: dict[str, AppView | None] = field(default_factory=dict, init=False)
    _errors: dict[str, BaseException] = field(default_factory=dict, init=False)
    _kick: anyio.Event = field(default_factory=anyio.Event, init=False)
    #: set after every tick and whenever an app's last watcher leaves
    _updated: anyio.Event = field(default_factory=anyio.Event, init=False)
    _running: bool = field(default=False, init=False)

    def watches(self, app_id: str) -> bool:
        """True while some ``wait`` watches ``app_id``."""
        return app_id in self._watchers

    @asynccontextmanager
    async def watching(self, app_id: str) -> AsyncIterator[None]:
        """Poll ``app_id`` each tick while the block runs."""
        self._watchers[app_id] = self._watchers.get(app_id, 0) + 1
        try:
            if not self._running:
                self._running = True
                await self.tasks.start_soon(self._loop, name="slurm-status")
            self._kick.set()
            yield
        finally:
            self._watchers[app_id] -= 1
            if not self._watchers[app_id]:
                del self._watchers[app_id]
                self._latest.pop(app_id, None)
                self._errors.pop(app_id, None)
                self._wake()  # a view() of it now asks Slurm itself

    def _wake(self) -> None:
        updated, self._updated = self._updated, anyio.Event()
        updated.set()

    async def view(self, app_id: str) -> AppView | None:
        """The view of a watched app as of the last tick (waits for the first);
        once no ``wait`` watches it (the last one may end while this waits),
        one query of its own.

        Raises:
            SchedulerClosedError: the loop ended (the scheduler closed).
            AsyncschedError: the last query failed.
        """
        while True:
            updated = self._updated
            error = self._errors.get(app_id)
            if error is not None:
                raise error
            if app_id in self._latest:
                return self._latest[app_id]
            if not self.watches(app_id):
                return (await self.batcher.get([app_id]))[app_id]
            await updated.wait()

    async def _loop(self) -> None:
        interval = self.min_interval
        try:
            while True:
                if not self._watchers:
                    await self._kick.wait()
                self._kick = anyio.Event()
                await anyio.sleep(0.02)  # let waits arriving together share a tick
                ids = list(self._watchers)
                if not ids:
                    continue
                self.ticks += 1
                changed = await self._tick(ids)
                interval = (
                    self.min_interval
                    if changed
                    else min(interval * 1.5, self.max_interval)
                )
                pause = interval * random.uniform(0.8, 1.2)
                await anyio.sleep(min(self.min_interval, pause))
                # a wait on a new app cuts the rest of the pause short
                with anyio.move_on_after(max(0.0, pause - self.min_interval)):
                    await self._kick.wait()
        finally:
            # only cancellation (the scheduler closing) ends the loop
            self._running = False
            closed = SchedulerClosedError("the scheduler was closed during wait()")
            for app_id in list(self._watchers):
                self._errors[app_id] = closed
                self.changes.notify(app_id)
            self._wake()

    async def _tick(self, ids: list[str]) -> bool:
        try:
            views = await self.batcher.get(ids)
        except Exception as exc:  # noqa: BLE001 -- reported to the waiters, who raise it
            for app_id in ids:
                if self.watches(app_id):
                    self._errors[app_id] = exc
                    self.changes.notify(app_id)
            self._wake()
            return True
        changed = False
        for app_id in filter(self.watches, ids):  # not those left meanwhile
            view = views.get(app_id)
            first = app_id not in self._latest
            old = self._latest.get(app_id)
            self._latest[app_id] = view
            if first or _state(old) != _state(view):
                changed = True
                self.changes.notify(app_id)
        self._wake()
        return changed


def _state(view: AppView | None) -> object:
    return None if view is None else view.state
