"""The app cache: a terminal app makes room at once (and stays readable from its record), survivors are still stopped, rejected submits evict nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from asyncsched.errors import SpecError
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState, Role

from ._helpers import (
    IGNORES_TERM,
    exists,
    finished_record,
    record,
    running,
    until_ready,
)
from .conftest import app_of, sh_role

pytestmark = pytest.mark.anyio


# wait() returns on a terminal state: such an app can make room at once
async def test_submit_right_after_wait_with_full_cache(log_dir: Path) -> None:
    cfg = {"log_dir": str(log_dir)}
    async with LocalScheduler("s", cache_size=1, cancel_grace=0.5) as s:
        first = await s.submit(app_of(sh_role(IGNORES_TERM)), cfg)
        await until_ready(s, first)
        pid = (await s.describe(first)).roles_statuses[0].replicas[0].pid  # type: ignore[union-attr]
        assert pid is not None
        await s.cancel(first)
        # CANCELLED at once (wait would return after the grace)
        desc = await s.describe(first)
        assert desc is not None
        assert desc.state == AppState.CANCELLED
        assert running(pid)  # still in its grace
        second = await s.submit(app_of(sh_role("echo b")), cfg)  # evicts `first`
        evicted = await s.describe(first)  # read back from its record
        assert evicted is not None
        assert evicted.state == AppState.CANCELLED
        # the evicted app is still supervised: killed after its grace, recorded
        rec = await finished_record(log_dir / "s" / first)
        assert rec["state"] == "CANCELLED"
        assert not exists(pid)
        desc = await s.wait(second, timeout=10)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED


async def test_aclose_stops_an_evicted_app_in_its_grace(log_dir: Path) -> None:
    cfg = {"log_dir": str(log_dir)}
    async with LocalScheduler("s", cache_size=1, cancel_grace=30, close_grace=0.2) as s:
        first = await s.submit(app_of(sh_role(IGNORES_TERM)), cfg)
        await until_ready(s, first)
        pid = (await s.describe(first)).roles_statuses[0].replicas[0].pid  # type: ignore[union-attr]
        assert pid is not None
        await s.cancel(first)
        desc = await s.describe(first)  # CANCELLED at once, still in its grace
        assert desc is not None
        assert desc.state == AppState.CANCELLED
        await s.submit(app_of(sh_role("echo b")), cfg)  # evicts `first`
    assert not exists(pid)
    rec = record(log_dir / "s" / first)
    assert rec["finished"]
    assert rec["state"] == "CANCELLED"


async def test_rejected_submit_evicts_nothing(log_dir: Path) -> None:
    cfg = {"log_dir": str(log_dir)}
    async with LocalScheduler("s", cache_size=1) as s:
        first = await s.submit(app_of(sh_role("true")), cfg)
        await s.wait(first, timeout=10)
        with pytest.raises(SpecError):
            await s.submit(app_of(Role("r", "/", entrypoint="nope-xyz")), cfg)
        assert await s.describe(first) is not None
