"""At most N calls in any window of T seconds: :class:`RateWindow`.

A sliding window, not a token bucket: whatever the burst before, no window of
``period`` seconds ever holds more than ``max_calls`` acquisitions, so a
cluster that rations polling sees a hard ceiling. Runs on asyncio and trio.

Example:
    >>> async def poll(window: RateWindow) -> None:
    ...     await window.acquire()  # waits while the window is full
    ...     ...  # run one status command
"""

from __future__ import annotations

import collections

import anyio

from asyncsched.errors import InvalidArgumentError

__all__ = ["RateWindow"]


class RateWindow:
    """Allow at most ``max_calls`` acquisitions per ``period`` seconds.

    Raises:
        InvalidArgumentError: ``max_calls`` < 1 or ``period`` <= 0.
    """

    def __init__(self, max_calls: int, period: float = 60.0) -> None:
        if max_calls < 1 or not period > 0:
            raise InvalidArgumentError(
                f"need max_calls >= 1 and period > 0, got {max_calls}, {period}"
            )
        self.max_calls = max_calls
        self.period = period
        self._times: collections.deque[float] = collections.deque()
        self._lock = anyio.Lock()
        self.waited = 0.0  # seconds callers spent waiting for the window

    def in_window(self, now: float | None = None) -> int:
        """How many acquisitions the current window holds."""
        now = anyio.current_time() if now is None else now
        while self._times and now - self._times[0] >= self.period:
            self._times.popleft()
        return len(self._times)

    async def acquire(self) -> None:
        """Return once one more call fits in the window (FIFO among waiters)."""
        async with self._lock:
            now = anyio.current_time()
            if self.in_window(now) >= self.max_calls:
                delay = self._times[0] + self.period - now
                self.waited += delay
                await anyio.sleep(delay)
                self.in_window()
            self._times.append(anyio.current_time())
