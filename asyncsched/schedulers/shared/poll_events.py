"""The fallback event source: re-list the apps at each change signal, diff.

A backend without a native change stream gets ``events()`` from this: one
:class:`~asyncsched.schedulers.shared.event_history.EventHistory` per
scheduler, fed by re-listing every app (``_list``) when the backend signals
a change (``notify_changed``) or at least every ``interval`` seconds, and
diffing against the last list. Cursors resume within the scheduler instance
that made them; any other cursor starts over with RESYNC.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio

from asyncsched.schedulers.events import AppEvent, EventKind
from asyncsched.schedulers.shared.changes import ChangeNotifier
from asyncsched.schedulers.shared.current_burst import stamp_burst
from asyncsched.schedulers.shared.event_diff import SnapshotDiffer
from asyncsched.schedulers.shared.event_history import EventHistory
from asyncsched.schedulers.snapshot import AppSnapshot

__all__ = ("PolledEvents",)


class PolledEvents:
    """Events of one scheduler from its list, shared by all its readers."""

    def __init__(
        self,
        source: str,
        list_apps: Callable[[], Awaitable[builtins.list[AppSnapshot]]],
        changes: ChangeNotifier,
        interval: float | None,
    ) -> None:
        self.history = EventHistory(source)
        self._differ = SnapshotDiffer()
        self._list_apps = list_apps
        self._changes = changes
        self._interval = interval
        self._listed = False

    async def _refresh(self) -> None:
        async with self.history.lock:
            snapshots = await self._list_apps()
            now = _epoch()
            for draft in self._differ.relist(snapshots, observed=now):
                self.history.append(draft)
            self._listed = True

    def _current(self, drafts: list[AppEvent]) -> list[AppEvent]:
        cursor = self.history.cursor_at(self.history.seq)
        return stamp_burst([*drafts, *self._differ.current()], cursor)

    async def follow(
        self, since: str | None, is_open: Callable[[], bool]
    ) -> AsyncIterator[AppEvent]:
        """Every event after ``since`` (None: CURRENT of every app first)."""
        changed = self._changes.changed_any()
        await self._refresh()
        seq = self.history.position(since) if since is not None else None
        if seq is None:
            first = []
            if since is not None:
                first.append(
                    AppEvent(
                        "",
                        EventKind.RESYNC,
                        observed=_epoch(),
                        msg="cursor not honoured here: current state follows",
                    )
                )
            seq = self.history.seq
            for event in self._current(first):
                yield event
        while is_open():
            pending = self.history.numbered_after(seq)
            for _, event in pending:
                yield event
            if pending:
                seq = pending[-1][0]
                continue
            appended = self.history.appended()
            with anyio.move_on_after(
                self._interval if self._interval is not None else float("inf")
            ):
                async with anyio.create_task_group() as tg:

                    async def wake(event: anyio.Event) -> None:
                        await event.wait()
                        tg.cancel_scope.cancel()

                    tg.start_soon(wake, changed)
                    tg.start_soon(wake, appended)
            changed = self._changes.changed_any()
            if is_open():
                await self._refresh()


def _epoch() -> float:
    return time.time()
