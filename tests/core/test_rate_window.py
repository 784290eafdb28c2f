"""RateWindow: no window of ``period`` seconds ever holds more than ``max_calls``."""

from __future__ import annotations

import anyio
import pytest

from asyncsched.errors import InvalidArgumentError
from asyncsched.schedulers.shared.ratewindow import RateWindow


@pytest.mark.anyio
async def test_no_window_holds_more_than_the_ceiling() -> None:
    window = RateWindow(max_calls=3, period=0.3)
    held: list[int] = []
    started = anyio.current_time()

    async def call() -> None:
        await window.acquire()
        # no checkpoint in between: the grants in the last period, this one
        # included (times taken after the await would add the loop's jitter)
        held.append(window.in_window())

    async with anyio.create_task_group() as tg:
        for _ in range(8):
            tg.start_soon(call)
    assert len(held) == 8
    assert max(held) <= 3
    # eight calls at three per 0.3 s: the last ones waited two periods
    assert anyio.current_time() - started >= 0.6
    assert window.waited > 0  # the burst beyond three had to wait


@pytest.mark.anyio
async def test_calls_below_the_ceiling_do_not_wait() -> None:
    window = RateWindow(max_calls=5, period=60)
    for _ in range(5):
        await window.acquire()
    assert window.waited == 0
    assert window.in_window() == 5


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(InvalidArgumentError):
        RateWindow(0)
    with pytest.raises(InvalidArgumentError):
        RateWindow(1, period=0)
