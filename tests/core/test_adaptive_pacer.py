"""AdaptivePacer: the submission rate follows the server (virtual clock, no waiting)."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from asyncsched.schedulers.shared.pacer import AdaptivePacer


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def drive(
    pacer: AdaptivePacer,
    clock: Clock,
    seconds: float,
    server: Callable[[float], float | bool | None],
) -> list[tuple[float, bool]]:
    """Send as fast as the pacer allows for ``seconds`` of virtual time.

    ``server(now)`` answers True (accepted) or a Retry-After (None or seconds)
    for a throttle. Returns ``(time, accepted)`` per request.
    """
    sent: list[tuple[float, bool]] = []
    while clock.now < seconds:
        wait = pacer.delay()
        if wait > 0:
            clock.now += wait
            continue
        answer = server(clock.now)
        if answer is True:
            pacer.accepted()
            sent.append((clock.now, True))
        else:
            pacer.throttled(None if answer is False else answer)
            sent.append((clock.now, False))
    return sent


def test_a_permissive_server_sees_the_rate_rise_past_300_per_second() -> None:
    clock = Clock()
    pacer = AdaptivePacer(start_qps=50, max_qps=1000, clock=clock)
    sent = drive(pacer, clock, 10.0, lambda now: True)
    last_second = [t for t, ok in sent if ok and t >= 9.0]
    assert len(last_second) >= 300
    assert pacer.qps <= 1000  # the safety net holds


def test_a_strict_server_gets_few_throttles_and_steady_progress() -> None:
    capacity = 100  # the server accepts 100 requests per whole second
    window: dict[int, int] = {}

    def server(now: float) -> float | bool | None:
        second = int(now)
        window[second] = window.get(second, 0) + 1
        if window[second] <= capacity:
            return True
        return (second + 1) - now  # Retry-After: the next second

    clock = Clock()
    pacer = AdaptivePacer(start_qps=50, max_qps=1000, clock=clock)
    sent = drive(pacer, clock, 30.0, server)
    late = [ok for t, ok in sent if t >= 10.0]
    accepted = sum(late)
    assert accepted >= 0.8 * capacity * 20  # close to the server's capacity
    assert late.count(False) <= 0.1 * len(late)  # throttles are rare once settled


def test_retry_after_holds_every_request() -> None:
    clock = Clock()
    pacer = AdaptivePacer(start_qps=100, clock=clock)
    pacer.throttled(retry_after=2.0)
    assert pacer.delay() == pytest.approx(2.0)
    clock.now = 1.5
    assert pacer.delay() == pytest.approx(0.5)
    clock.now = 2.0
    assert pacer.delay() > 0  # the burst was dropped: a token must refill
    assert pacer.qps == 50


def test_the_rate_stays_within_its_bounds() -> None:
    clock = Clock()
    pacer = AdaptivePacer(start_qps=10, min_qps=5, max_qps=40, clock=clock)
    for _ in range(10):
        pacer.throttled(None)
    assert pacer.qps == 5
    for _ in range(1000):
        pacer.accepted()
    assert pacer.qps == 40


@pytest.mark.anyio
async def test_acquire_waits_for_a_token() -> None:
    pacer = AdaptivePacer(start_qps=200, burst=1)
    started = anyio.current_time()
    for _ in range(3):
        await pacer.acquire()
    assert anyio.current_time() - started >= 2 / 200 * 0.9


def test_many_requests_throttled_by_one_overload_halve_the_rate_once() -> None:
    clock = Clock()
    pacer = AdaptivePacer(start_qps=400, clock=clock)
    assert all(pacer.delay() == 0 for _ in range(50))  # 50 in flight at time 0
    clock.now = 0.1
    for _ in range(50):  # the server answers 429 to all of them
        pacer.throttled(None, sent_at=0.0)
    assert pacer.qps == 200  # not 400 / 2**50 (nor the floor)
    clock.now = 0.5
    pacer.throttled(None, sent_at=0.4)  # sent after the cut: a new overload
    assert pacer.qps == 100


def test_a_long_retry_after_holds_the_others_at_most_max_hold() -> None:
    clock = Clock()
    pacer = AdaptivePacer(start_qps=100, max_hold=5.0, clock=clock)
    pacer.throttled(retry_after=30.0)
    assert pacer.delay() == pytest.approx(5.0)
    assert pacer.held_until == pytest.approx(5.0)
