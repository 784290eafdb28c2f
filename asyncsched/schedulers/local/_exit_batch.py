"""Read the exit facts of many replicas in one worker-thread hop.

Replicas that exit together (a fan-out of short apps, a role that ends at
once) would each cost a hop to read their reply file and cancel marker. The
first exit to ask becomes the batch's leader: it lets the loop run once more
(so the exits already due join it), then reads the files of every exit queued
so far in ONE hop and hands each waiter its own :class:`ExitFacts`.

An exit that ends its app may come with the app's final record already made
for the plain outcome (an :class:`ExitWrite`: no cancel asked by another
process, no reply file); when the facts read say so, the same hop writes it
(records first, then their journal lines, as the record writer does), so the
app's end costs one hop instead of two one after the other.

Example:
    >>> reader = ExitFactsReader()
    >>> reader.hops
    0
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import anyio
import anyio.lowlevel

from asyncsched.schedulers.local._exit_facts import ExitFacts, read_exit_facts
from asyncsched.schedulers.local._record_writer import RecordJob

__all__ = ("ExitFactsReader", "ExitQuery", "ExitWrite", "WriteHere")

#: writes record jobs then journal lines in the calling thread; the failures
WriteHere = Callable[
    [list[RecordJob], list[dict[str, Any]]], list[tuple[int, Exception]]
]


class ExitWrite(Protocol):
    """An app's final record made for the plain outcome of an exit."""

    #: the record to write, and its journal lines
    job: RecordJob
    lines: list[dict[str, Any]]
    #: set in the worker thread: written (the facts were plain), and how it failed
    written: bool
    failure: Exception | None

    def adopt(self) -> bool:
        """In the loop, once the exit was handled: True when the app's state
        is the one written (its record is current), else False."""
        ...


#: what :func:`read_exit_facts` takes: error file, replica dir, app dir,
#: return code, attempt number, attempt start
ExitQuery = tuple[str, str, str, "int | None", int, float]


class _Waiter:
    __slots__ = ("done", "error", "facts", "query", "ready", "then")

    def __init__(self, query: ExitQuery, then: ExitWrite | None) -> None:
        self.query = query
        self.then = then
        self.done = anyio.Event()
        self.ready = False
        self.facts = ExitFacts()
        self.error: Exception | None = None


class ExitFactsReader:
    """Batch :func:`read_exit_facts` calls: one worker-thread hop per batch.

    No task of its own: the first caller of a batch runs it, so nothing has
    to be started or stopped with the scheduler.
    """

    def __init__(
        self,
        read: Callable[..., ExitFacts] = read_exit_facts,
        write: WriteHere | None = None,
    ) -> None:
        self._read = read
        self._write = write
        self._queued: list[_Waiter] = []
        self._leading = False
        #: worker-thread hops made so far (each reads a whole batch)
        self.hops = 0

    async def read(self, query: ExitQuery, then: ExitWrite | None = None) -> ExitFacts:
        """The exit facts of ``query`` (what :func:`read_exit_facts` returns).

        With ``then``, its record is written in the same hop when the facts
        are plain (``then.written`` says whether). Raises what the read raised
        for this query. Callers shield it (the exit path must finish).
        """
        waiter = _Waiter(query, then)
        self._queued.append(waiter)
        while not waiter.ready:
            if self._leading:
                await waiter.done.wait()
                waiter.done = anyio.Event()  # woken without facts: lead next
            else:
                await self._lead()
        if waiter.error is not None:
            raise waiter.error
        return waiter.facts

    async def _lead(self) -> None:
        self._leading = True
        try:
            while self._queued:
                # one loop pass: exits already due queue behind this one
                await anyio.lowlevel.checkpoint()
                batch, self._queued = self._queued, []
                try:
                    await anyio.to_thread.run_sync(self._read_all, batch)
                finally:
                    self.hops += 1
                    # not read (cancelled before the thread ran): queued again
                    self._queued[:0] = [w for w in batch if not w.ready]
                    for w in batch:
                        if w.ready:
                            w.done.set()
        finally:
            self._leading = False
            for w in self._queued:  # the leader left early: one of them leads
                w.done.set()

    def _read_all(self, batch: list[_Waiter]) -> None:
        writes: list[ExitWrite] = []
        for w in batch:
            try:
                w.facts = self._read(*w.query)
            except Exception as exc:  # noqa: BLE001 - re-raised in its own waiter
                w.error = exc
            if w.then is not None and w.error is None and _plain(w.facts):
                writes.append(w.then)
        try:
            if writes and self._write is not None:
                lines = [line for then in writes for line in then.lines]
                failures = dict(self._write([then.job for then in writes], lines))
                for i, then in enumerate(writes):
                    then.written = True
                    then.failure = failures.get(i)
        finally:  # a write that raised leaves its records to the writer
            for w in batch:
                w.ready = True


def _plain(facts: ExitFacts) -> bool:
    """Facts that leave an exit's outcome as its code says."""
    return not facts.cancel_requested and facts.error_text is None
