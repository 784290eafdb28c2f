"""The app cache bounds how many apps a scheduler keeps in memory; running apps are never evicted, evicted ones are read back from their records."""

from __future__ import annotations

import contextlib
from pathlib import Path

import anyio
import pytest

from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState

from ._helpers import run
from .conftest import app_of, sh_role

pytestmark = pytest.mark.anyio


async def test_cache_full_of_running_apps_raises(log_dir: Path) -> None:
    async with LocalScheduler("s", cache_size=1, close_grace=0.2) as s:
        await s.submit(app_of(sh_role("sleep 30")), {"log_dir": str(log_dir)})
        with pytest.raises(IndexError, match="cache size"):
            await s.submit(app_of(sh_role("sleep 30")), {"log_dir": str(log_dir)})


async def test_concurrent_submits_cannot_overfill_the_cache(log_dir: Path) -> None:
    cfg = {"log_dir": str(log_dir)}
    outcomes: list[str] = []

    async def submit_one(s: LocalScheduler) -> None:
        try:
            outcomes.append(await s.submit(app_of(sh_role("sleep 30")), cfg))
        except IndexError:
            outcomes.append("full")

    async with LocalScheduler("s", cache_size=2, close_grace=0.2) as s:
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(submit_one, s)
        assert sorted(o == "full" for o in outcomes) == [False, False, True]
        assert len(await s.list()) == 2


async def test_eviction_frees_memory_but_the_app_stays_readable(
    log_dir: Path,
) -> None:
    cfg = {"log_dir": str(log_dir)}
    async with LocalScheduler("s", cache_size=2) as s:
        first, _ = await run(s, app_of(sh_role("echo one")), cfg)
        second, _ = await run(s, app_of(sh_role("true")), cfg)
        running = await s.submit(app_of(sh_role("sleep 30")), cfg)  # evicts first
        desc = await s.describe(first)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
        waited = await s.wait(first)
        assert waited is not None
        assert waited.state == AppState.SUCCEEDED
        lines = s.log_iter(first, "worker")
        async with contextlib.aclosing(lines):
            assert [line async for line in lines] == ["one\n"]
        third = await s.submit(app_of(sh_role("sleep 30")), cfg)  # evicts `second`
        assert (await s.describe(second)) is not None
        assert {a.app_id for a in await s.list()} >= {first, second, running, third}
        with pytest.raises(IndexError):  # both running: nothing may be evicted
            await s.submit(app_of(sh_role("true")), cfg)
        assert await s.describe(running) is not None
        await s.cancel(running)
