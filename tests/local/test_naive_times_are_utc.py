"""Naive since/until are UTC, whatever the local time zone."""

from __future__ import annotations

import calendar
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from asyncsched.schedulers.local._logs import _as_epoch
from asyncsched.schedulers.local_scheduler import LocalScheduler

from ._helpers import record
from .conftest import app_of, py_role

pytestmark = pytest.mark.anyio


# naive since/until are UTC, whatever the local time zone
@pytest.fixture
def new_york_tz() -> Iterator[None]:
    old = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = old
        time.tzset()


@pytest.mark.usefixtures("new_york_tz")
def test_naive_datetime_is_utc_epoch() -> None:
    naive = datetime(2024, 1, 2, 3, 4, 5)
    assert _as_epoch(naive) == calendar.timegm(naive.timetuple())
    assert _as_epoch(naive.replace(tzinfo=UTC)) == _as_epoch(naive)


@pytest.mark.usefixtures("new_york_tz")
async def test_naive_since_until_under_non_utc_tz(
    sched: LocalScheduler, log_dir: Path
) -> None:
    code = "import time\nprint('early', flush=True)\ntime.sleep(0.6)\nprint('late', flush=True)"
    app_id = await sched.submit(app_of(py_role(code)), {"log_dir": str(log_dir)})
    await sched.wait(app_id, timeout=30)
    started = record(log_dir / "test" / app_id)["roles"]["worker"][0]["attempts"][0][
        "started"
    ]
    middle = datetime.fromtimestamp(started + 0.3, tz=UTC).replace(tzinfo=None)

    async def lines(**kw: Any) -> list[str]:
        return [line async for line in sched.log_iter(app_id, "worker", **kw)]

    assert await lines(since=middle) == ["late\n"]
    assert await lines(until=middle) == ["early\n"]
