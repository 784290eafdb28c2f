"""Submission pacing that follows the server: rise while it accepts, back off when it throttles.

:class:`AdaptivePacer` is a token bucket whose rate adapts (AIMD): it doubles
roughly every second while requests succeed (slow start, up to the first
throttle), then grows by ``step`` requests per second per second; a throttle
(HTTP 429, an API Priority and Fairness rejection) halves it and, when the
server names a ``Retry-After``, holds every request until then. The rate stays
within ``[min_qps, max_qps]``: ``max_qps`` is the client-side safety net.

It has :class:`RateLimiter`'s ``acquire()`` and two reports, so a client uses it
as::

    sent_at = await pacer.acquire()
    try:
        response = await send()
    except Throttled as exc:
        pacer.throttled(exc.retry_after, sent_at=sent_at)
        raise
    pacer.accepted()

Many requests in flight at once meet the same overload: passing ``sent_at``
halves the rate once for them all (a throttle of a request sent before the
last cut is already accounted for), and a ``Retry-After`` holds the others at
most ``max_hold`` seconds (the throttled request itself waits the whole of it).

Example:
    >>> pacer = AdaptivePacer(start_qps=50, max_qps=1000)
    >>> pacer.throttled(retry_after=None)
    >>> pacer.qps
    25.0
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

__all__ = ["AdaptivePacer"]

#: slack of the float arithmetic on times and tokens
_EPSILON = 1e-9


class AdaptivePacer:
    """An AIMD token bucket: ``qps`` rises while accepted, halves when throttled.

    Args:
        start_qps: The rate at first (requests per second).
        min_qps: Never below this (a throttled client keeps making progress).
        max_qps: Never above this: the client-side safety net.
        burst: Requests allowed at once above the rate.
        step: Additive increase, in requests per second gained per second of
            accepted requests, once the first throttle ended the slow start.
        max_hold: Longest ``Retry-After`` that holds every request; a longer
            one holds them this long (the request it answered waits it all).
        clock: Seconds, monotonic (``anyio.current_time`` by default; tests
            pass their own).
    """

    def __init__(
        self,
        start_qps: float = 50.0,
        *,
        min_qps: float = 5.0,
        max_qps: float = 1000.0,
        burst: int = 100,
        step: float = 10.0,
        max_hold: float = 5.0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.min_qps = min_qps
        self.max_qps = max(max_qps, min_qps)
        self.qps = min(max(start_qps, min_qps), self.max_qps)
        self.burst = max(burst, 1)
        self.step = step
        self.max_hold = max_hold
        #: slow start ends at the first throttle (then growth is additive)
        self.slow_start = True
        #: requests accepted and throttled so far
        self.accepted_count = 0
        self.throttled_count = 0
        self._clock = clock or anyio.current_time
        self._tokens = float(self.burst)
        self._stamp: float | None = None
        self._hold_until = 0.0
        self._last_cut = float("-inf")

    def _refill(self, now: float) -> None:
        if self._stamp is not None:
            gained = (now - self._stamp) * self.qps
            self._tokens = min(float(self.burst), self._tokens + gained)
        self._stamp = now

    def delay(self) -> float:
        """Seconds until the next request may go (0: now); takes its token when 0."""
        now = self._clock()
        if self._hold_until - now > _EPSILON:
            return self._hold_until - now
        self._refill(now)
        if self._tokens >= 1 - _EPSILON:  # float sums land a hair short of 1
            self._tokens = max(self._tokens - 1, 0.0)
            return 0.0
        return (1 - self._tokens) / self.qps

    @property
    def held_until(self) -> float:
        """The clock time before which no request goes (a ``Retry-After``)."""
        return self._hold_until

    async def acquire(self) -> float:
        """Wait until a request may go (cancellable); answers the clock time it went."""
        while True:
            wait = self.delay()
            if wait <= 0:
                return self._clock()
            await anyio.sleep(wait)

    def accepted(self) -> None:
        """The server accepted a request: raise the rate a little."""
        self.accepted_count += 1
        if self.slow_start:
            self.qps += 1.0  # one more per accepted request: doubles each second
        else:
            self.qps += self.step / self.qps  # ``step`` more per second
        self.qps = min(self.qps, self.max_qps)

    def throttled(
        self, retry_after: float | None, sent_at: float | None = None
    ) -> None:
        """The server throttled a request: halve the rate, hold for ``retry_after``.

        ``sent_at`` (what :meth:`acquire` answered for it): a request sent
        before the last cut does not cut again.
        """
        self.throttled_count += 1
        self.slow_start = False
        now = self._clock()
        if sent_at is None or sent_at >= self._last_cut:
            self.qps = max(self.min_qps, self.qps / 2)
            self._last_cut = now
        self._tokens = min(self._tokens, 0.0)  # no saved-up burst after a throttle
        if retry_after is not None and retry_after > 0:
            hold = min(retry_after, self.max_hold)
            self._hold_until = max(self._hold_until, now + hold)
