"""The clock of the fake API server and its controller: real, or moved by a test.

Everything in the fake that waits on time -- watch ``timeoutSeconds`` and
bookmarks, the watch window's expiry, the rate limit, the fake kubelet's
``start_delay`` and a container's ``sleep N``, a finished job's
``ttlSecondsAfterFinished`` -- asks a :class:`Clock`. The default one is the
event loop's. A :class:`ManualClock` stands still until the test calls
:meth:`ManualClock.advance`: a test waits for an event (e.g. "the replica is
RUNNING", or :meth:`ManualClock.sleepers`), then moves time on by exactly
what it needs, instead of waiting out real timers.

Example::

    clock = ManualClock()
    async with FakeKubeServer(clock=clock) as server:
        ...  # a pod runs "sleep 30"
        await clock.wait_sleepers(1)  # it sleeps now
        await clock.advance(30)  # ... and is done
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


class Clock:
    """The real clock (monotonic seconds, real sleeps)."""

    def now(self) -> float:
        """Monotonic seconds."""
        return time.monotonic()

    async def sleep(self, seconds: float, what: str = "") -> None:
        """Wait ``seconds``; ``what`` names the sleeper (e.g. ``"kubelet"``)."""
        await asyncio.sleep(seconds)

    async def wait_for(self, awaitable: Awaitable[T], timeout: float) -> T:
        """``awaitable``'s result; ``TimeoutError`` after ``timeout`` seconds."""
        return await asyncio.wait_for(awaitable, max(timeout, 0))


class ManualClock(Clock):
    """A clock that moves only when :meth:`advance` is called.

    ``now()`` starts at ``start``. :meth:`advance` jumps to the new time and
    wakes, in deadline order, every sleeper due by then, once: a sleeper
    that sleeps again (a watch's next bookmark) counts from the new time.
    """

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._heap: list[tuple[float, int, str, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._changed = asyncio.Event()

    def now(self) -> float:
        return self._now

    def sleepers(self, what: str | None = None) -> int:
        """How many sleeps (named ``what``, or any) wait for time to move."""
        return sum(
            1
            for _, _, name, fut in self._heap
            if not fut.done() and what in (None, name)
        )

    async def sleep(self, seconds: float, what: str = "") -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if len(self._heap) > 1024:  # drop the cancelled sleeps (watch timers)
            self._heap = [item for item in self._heap if not item[3].done()]
            heapq.heapify(self._heap)
        entry = (self._now + seconds, next(self._order), what, fut)
        heapq.heappush(self._heap, entry)
        self._changed.set()
        try:
            await fut
        finally:
            fut.cancel()  # a cancelled sleeper is skipped by advance()

    async def wait_for(self, awaitable: Awaitable[T], timeout: float) -> T:
        work = asyncio.ensure_future(awaitable)
        timer = asyncio.ensure_future(self.sleep(timeout))
        try:
            await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            if not work.done():
                work.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await timer
        if work.cancelled() or not work.done():
            with contextlib.suppress(asyncio.CancelledError):
                await work
            raise TimeoutError
        return work.result()

    async def wait_sleepers(
        self, count: int, what: str | None = None, timeout: float = 30.0
    ) -> None:
        """Wait (at most ``timeout`` real seconds) until ``count`` sleeps
        (named ``what``, or any) wait for time to move."""
        async with asyncio.timeout(timeout):
            while self.sleepers(what) < count:
                self._changed.clear()
                await self._changed.wait()

    async def advance(self, seconds: float) -> None:
        """Jump ``seconds`` ahead, waking every sleeper due by then."""
        self._now += seconds
        while self._heap and self._heap[0][0] <= self._now:
            fut = heapq.heappop(self._heap)[3]
            if not fut.done():
                fut.set_result(None)
        for _ in range(5):  # let the woken tasks run
            await asyncio.sleep(0)
