"""``Runner.events``: the events of several schedulers, with one composite cursor.

Each scheduler's :meth:`~asyncsched.schedulers.api.Scheduler.events` stream
is read by one task of the runner's task group (so no cancel scope is open
across the consumer's ``yield``) and handed over through a bounded memory
stream: a slow reader holds the pumps back instead of buffering without end.
Events of one scheduler keep their order; schedulers interleave.

The composite cursor is ``runner.1.<payload>`` where the payload maps each
scheduler's registry name to that scheduler's own last cursor. Resuming from
it resumes every scheduler it names from its own position.

Example:
    >>> sel = EventSelection({"local_cwd": None}, follow_new=False, positions={})
    >>> sel.names()
    ['local_cwd']
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import suppress
from dataclasses import dataclass, replace
from typing import Any

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream

from asyncsched.errors import (
    InvalidArgumentError,
    SchedulerClosedError,
    UnknownSchedulerException,
)
from asyncsched.schedulers.kit import (
    AppEvent,
    Scheduler,
    TaskHost,
    cursor_source,
    decode_cursor,
    encode_cursor,
)
from asyncsched.schedulers.shared.closing_iterator import ClosingIterator
from asyncsched.specs import make_app_handle, parse_app_handle

__all__ = ("RUNNER_SOURCE", "EventSelection", "RunnerEventStream", "select")

#: the source name of a runner's composite cursors
RUNNER_SOURCE = "runner"
#: events buffered between the schedulers' pumps and the reader
_BUFFER = 256


@dataclass(frozen=True)
class EventSelection:
    """What a runner's event stream reads.

    Args:
        schedulers: Scheduler name -> the app ids wanted (None: every app).
        follow_new: Also read the schedulers the runner opens later.
        positions: Scheduler name -> its cursor to resume from.
    """

    schedulers: Mapping[str, frozenset[str] | None]
    follow_new: bool
    positions: Mapping[str, str]

    def names(self) -> list[str]:
        """The schedulers read from the start."""
        return list(self.schedulers)


def select(
    items: Iterable[str] | None,
    since: str | None,
    registered: Iterable[str],
    opened: Iterable[str],
) -> EventSelection:
    """Check ``Runner.events``' arguments; what they select.

    ``items`` are scheduler names (every app of it) and app handles (that
    app); None reads every scheduler the runner has opened, or opens later,
    and every scheduler ``since`` names.

    Raises:
        InvalidArgumentError: ``since`` is not a runner cursor, or names a
            scheduler the runner does not have; an item is not a string.
        MalformedAppHandleException: an item looks like a handle but is not one.
        UnknownSchedulerException: an item names an unregistered scheduler.
    """
    known = list(registered)
    positions = _positions(since, known) if since is not None else {}
    if isinstance(items, str):
        raise InvalidArgumentError(
            f"pass a list of scheduler names or handles, not the string {items!r}"
        )
    if items is None:
        wanted: dict[str, frozenset[str] | None] = dict.fromkeys([*positions, *opened])
        return EventSelection(wanted, follow_new=True, positions=positions)
    apps: dict[str, set[str] | None] = {}
    for item in items:
        if not isinstance(item, str):
            raise InvalidArgumentError(
                f"a scheduler name or app handle is a string, got {item!r}"
            )
        if "://" in item:
            parsed = parse_app_handle(item)
            name, app_id = parsed.scheduler_backend, parsed.app_id
        else:
            name, app_id = item, None
        if name not in known:
            raise UnknownSchedulerException(name, known)
        if app_id is None:
            apps[name] = None
        elif name not in apps:
            apps[name] = {app_id}
        else:
            ids = apps[name]
            if ids is not None:
                ids.add(app_id)
    if not apps:
        raise InvalidArgumentError("no scheduler or handle to read events of")
    wanted = {n: None if ids is None else frozenset(ids) for n, ids in apps.items()}
    return EventSelection(wanted, follow_new=False, positions=positions)


def _positions(since: str, known: list[str]) -> dict[str, str]:
    """The per-scheduler cursors in the runner cursor ``since``."""
    position = decode_cursor(since, RUNNER_SOURCE)
    out: dict[str, str] = {}
    for name, cursor in position.items():
        if name not in known:
            raise InvalidArgumentError(
                f"the cursor names scheduler {name!r}, which this runner does not"
                f" have (it has: {', '.join(known)})"
            )
        if not isinstance(cursor, str):
            raise InvalidArgumentError(f"malformed runner cursor (at {name!r})")
        cursor_source(cursor)  # a well-formed cursor of some backend
        out[name] = cursor
    return out


@dataclass
class _Failure:
    """Carries a pump's exception to the reader."""

    exc: BaseException


_Item = tuple[str, AppEvent] | _Failure
OpenScheduler = Callable[[str], Awaitable[Scheduler[Any]]]
#: register a callback told each scheduler name the runner opens; returns
#: the function that unregisters it
Subscribe = Callable[[Callable[[str], None]], Callable[[], None]]


class RunnerEventStream(ClosingIterator[AppEvent]):
    """Every selected scheduler's events, with runner handles and cursors.

    Use it as ``async with`` (or close it with :meth:`aclose`) to stop its
    tasks as soon as you stop reading; it ends when the runner closes.
    """

    def __init__(
        self,
        host: TaskHost,
        session: str,
        selection: EventSelection,
        open_scheduler: OpenScheduler,
        opened: Callable[[], Iterable[str]],
        subscribe: Subscribe,
    ) -> None:
        self._host, self._session, self._selection = host, session, selection
        self._open, self._opened, self._subscribe = open_scheduler, opened, subscribe
        self._positions: dict[str, str] = dict(selection.positions)
        self._recv: Any = None
        self._scope = anyio.CancelScope()
        self._done = False

    @property
    def cursor(self) -> str:
        """The composite cursor after the last event read (every scheduler's
        position so far, including the ones the ``since`` cursor carried)."""
        return encode_cursor(RUNNER_SOURCE, self._positions)

    async def __anext__(self) -> AppEvent:
        if self._done:
            raise StopAsyncIteration
        if self._recv is None:
            await self._start()
        try:
            item: _Item = await self._recv.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            await self.aclose()
            raise StopAsyncIteration from None
        if isinstance(item, _Failure):
            await self.aclose()
            raise item.exc
        name, event = item
        self._positions[name] = event.cursor
        if event.app_id:
            handle = make_app_handle(name, self._session, event.app_id)
        else:  # RESYNC: which scheduler starts over
            handle = f"{name}://{self._session}/"
        return replace(event, cursor=self.cursor, handle=handle)

    async def aclose(self) -> None:
        """Stop reading: the schedulers' streams are closed."""
        self._done = True
        self._scope.cancel()
        if self._recv is not None:
            self._recv.close()

    async def _start(self) -> None:
        send, recv = anyio.create_memory_object_stream[_Item](_BUFFER)
        try:
            await self._host.start_soon(self._run, send, name="runner-events")
        except BaseException:  # cancelled before it started: start again next time
            send.close()
            recv.close()
            raise
        self._recv = recv

    async def _run(self, send: MemoryObjectSendStream[_Item]) -> None:
        with send:  # closed however this ends: the reader sees the end
            failure: BaseException | None = None
            with self._scope:
                try:
                    async with anyio.create_task_group() as tg:
                        await self._pump_all(tg, send)
                except Exception as exc:  # noqa: BLE001 -- handed to the reader
                    failure = exc
            if failure is not None:
                while (
                    isinstance(failure, ExceptionGroup) and len(failure.exceptions) == 1
                ):
                    failure = failure.exceptions[0]
                with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    send.send_nowait(_Failure(failure))

    async def _pump_all(
        self, tg: TaskGroup, send: MemoryObjectSendStream[_Item]
    ) -> None:
        started: set[str] = set()

        def begin(name: str) -> None:
            if name not in started:
                started.add(name)
                tg.start_soon(self._pump, name, send, name=f"runner-events-{name}")

        if not self._selection.follow_new:
            for name in self._selection.names():
                begin(name)
            return
        new_send, new_recv = anyio.create_memory_object_stream[str](float("inf"))
        unsubscribe = self._subscribe(new_send.send_nowait)
        with new_send, new_recv:
            try:
                for name in [*self._selection.names(), *self._opened()]:
                    begin(name)
                async for name in new_recv:
                    begin(name)
            finally:
                unsubscribe()

    async def _pump(self, name: str, send: MemoryObjectSendStream[_Item]) -> None:
        with suppress(SchedulerClosedError):
            sched = await self._open(name)
            since = self._selection.positions.get(name)
            wanted = self._selection.schedulers.get(name)
            async with sched.events(wanted, since=since) as stream:
                async for event in stream:
                    await send.send((name, event))
