"""The change half of the scheduler template: signals and resumable events.

:class:`ChangeFeed` is a base of :class:`~asyncsched.schedulers.api.Scheduler`:
a backend tells it about changes (:meth:`ChangeFeed.notify_changed`),
``wait`` listens (:meth:`ChangeFeed.changed`), and :meth:`ChangeFeed.events`
gives users one ordered, resumable stream from the backend's change source
(the ``_events`` hook; a re-list fallback by default).

Example:
    >>> async def until_done(sched, app_id: str) -> None:
    ...     async with sched.events([app_id]) as stream:
    ...         async for event in stream:
    ...             if event.terminal:
    ...                 return
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Iterable

import anyio

from asyncsched.schedulers.events import AppEvent
from asyncsched.schedulers.shared.arguments import check_app_ids
from asyncsched.schedulers.shared.changes import ChangeNotifier
from asyncsched.schedulers.shared.current_burst import burst_restart, restarted_burst
from asyncsched.schedulers.shared.cursor import decode_cursor
from asyncsched.schedulers.shared.event_stream import EventStream
from asyncsched.schedulers.shared.poll_events import PolledEvents
from asyncsched.schedulers.snapshot import AppSnapshot

__all__ = ("ChangeFeed",)


class ChangeFeed:
    """Change signals and the event stream of one scheduler (a mixin)."""

    backend: str
    _closed: bool

    def __init__(self) -> None:
        # per-key change events: backends notify, ``wait`` listens
        self._change_source = ChangeNotifier()
        self._polled_events: PolledEvents | None = None

    # provided by the scheduler
    def _check_open(self) -> None: ...

    def _handle(self, app_id: str) -> str:
        return app_id

    async def _list(self) -> builtins.list[AppSnapshot]:
        return []

    # -- change signal ---------------------------------------------------------

    def notify_changed(self, key: str) -> None:
        """Tell every waiter on ``key`` (an app id, or a snapshot's
        ``change_key``) that the app may have changed: they read it again.

        Every change a backend learns of goes through here (or through
        :attr:`change_source`, handed to the backend's own components), so
        it is the one place later consumers of changes hook into. Waking
        too often is harmless; missing a change makes ``wait`` fall back to
        polling (see :meth:`_poll_interval`).

        Example:
            >>> class Demo(Scheduler[dict[str, str]]):
            ...     def _on_engine_event(self, app_id: str) -> None:
            ...         self.notify_changed(app_id)
        """
        self._change_source.notify(key)

    def changed(self, key: str) -> anyio.Event:
        """An event set at the next :meth:`notify_changed` of ``key``.

        Take it *before* reading the state it guards, then await it: a change
        between the read and the wait is never missed.

        Example:
            >>> async def until_done(sched: Scheduler[Any], app_id: str) -> None:
            ...     while True:
            ...         event = sched.changed(app_id)
            ...         if (await sched.describe(app_id)).is_terminal():
            ...             return
            ...         await event.wait()
        """
        return self._change_source.changed(key)

    @property
    def change_source(self) -> ChangeNotifier:
        """The notifier behind :meth:`notify_changed` / :meth:`changed`, for a
        backend to hand to its own parts (an event watcher, a status poller)."""
        return self._change_source

    # -- events ----------------------------------------------------------------

    def events(
        self, app_ids: Iterable[str] | None = None, *, since: str | None = None
    ) -> EventStream:
        """Yield every change of this scheduler's apps, ordered per app.

        Without ``since``: a CURRENT event per app first, then each change as
        it happens. With ``since`` (an :attr:`AppEvent.cursor` saved earlier,
        possibly by another process): every change after it, even changes
        made while nobody read; a cursor the backend can no longer honour
        yields RESYNC then CURRENT of every app (never a silent gap). The
        CURRENT events of a burst but the last carry a cursor that sends the
        whole burst again (see :mod:`~asyncsched.schedulers.shared.current_burst`).
        ``app_ids`` keeps only those apps' events (RESYNC always passes).
        The iterator ends when the scheduler closes; use it as
        ``async with`` to release it as soon as you stop reading. Delivery is
        at-least-once at resume boundaries; ``docs/events.md`` states each
        backend's guarantees.

        Example:
            >>> async def show(sched: Scheduler[Any], saved: str | None) -> None:
            ...     async with sched.events(since=saved) as stream:
            ...         async for event in stream:
            ...             print(event.kind, event.app_id, event.state, event.cursor)

        Raises:
            InvalidArgumentError: ``since`` is not a cursor of this
                scheduler's backend, or ``app_ids`` is not an iterable of
                app id strings (raised at the call, before anything is read).
        """
        self._check_open()
        wanted = check_app_ids(app_ids)
        if since is None:
            return EventStream(self._events(None), wanted, self._handle)
        decode_cursor(since, self.event_source)
        restart = burst_restart(since)
        self._check_cursor(since if restart is None else restart.base)
        if restart is None:
            return EventStream(self._events(since), wanted, self._handle)
        # inside a CURRENT burst: the backend's stream starts afresh
        source = restarted_burst(self._events(None), restart, since)
        return EventStream(source, wanted, self._handle)

    @property
    def event_source(self) -> str:
        """The name this scheduler's cursors carry (its backend by default)."""
        return self.backend

    def _check_cursor(self, cursor: str) -> None:
        """Hook: refuse a cursor this backend could never read (the default
        checks its source and format)."""
        decode_cursor(cursor, self.event_source)

    def _events(self, since: str | None) -> AsyncIterator[AppEvent]:
        """Hook: the backend's change stream (see :meth:`events`).

        The default re-lists the apps (``_list``) at each change signal or
        every :meth:`_events_interval` seconds and yields the differences;
        its cursors resume within this scheduler instance only. A backend
        with a native source (a journal, an engine's event stream, a watch)
        overrides this.
        """
        if self._polled_events is None:
            self._polled_events = PolledEvents(
                self.event_source,
                self._list,
                self._change_source,
                self._events_interval(),
            )
        return self._polled_events.follow(since, lambda: not self._closed)

    def _events_interval(self) -> float | None:
        """Hook: the fallback event source re-lists at least this often
        (seconds; None: only at change signals). Default 2 s."""
        return 2.0
