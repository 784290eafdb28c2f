"""A thousand local apps from one runner, no semaphore of the user's: every
handle comes back, every final status is right, and the open file descriptors
stay bounded by the scheduler's concurrency, not by the number of apps."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from asyncsched.runner import Runner
from asyncsched.schedulers.local._capacity import FDS_PER_REPLICA
from asyncsched.specs import AppState
from tests.runner.helpers import sh_app

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

N = 1000
#: replicas the scheduler may run at once in these tests
CONCURRENCY = 50


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


class FdPeak:
    """The most descriptors this process had open while it ran (sampled)."""

    def __init__(self) -> None:
        self.peak = _open_fds()

    async def sample(self) -> None:
        while True:
            self.peak = max(self.peak, _open_fds())
            await anyio.sleep(0.01)


@pytest.fixture
async def runner(tmp_path: Path) -> AsyncIterator[Runner]:
    params = {
        "state_dir": str(tmp_path / "state"),
        "max_running_replicas": CONCURRENCY,
        "retention": None,
    }
    async with Runner("scale", scheduler_params=params) as r:
        yield r


# the thousand-app run once, on asyncio (trio is covered by the smaller tests)
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_thousand_apps_through_run_many_and_wait_all(
    runner: Runner, tmp_path: Path
) -> None:
    cfg = {"log_dir": str(tmp_path / "logs")}
    await runner.run(sh_app("true"), "local_cwd", cfg)  # warm up: spawner, writer
    baseline = _open_fds()
    fds = FdPeak()
    apps = [sh_app("true", name=f"a{i}") for i in range(N)]
    # every 10th app fails, so a mixed outcome must come back right
    for i in range(0, N, 10):
        apps[i] = sh_app("exit 3", name=f"a{i}")
    async with anyio.create_task_group() as tg:
        tg.start_soon(fds.sample)
        handles = await runner.run_many(apps, "local_cwd", cfg)
        results = await runner.wait_all(handles, timeout=120)
        completed = [h async for h, _ in runner.as_completed(handles, timeout=120)]
        tg.cancel_scope.cancel()
    assert len(handles) == N
    assert len(set(handles)) == N
    assert list(results) == handles
    assert sorted(completed) == sorted(handles)
    for i, handle in enumerate(handles):
        status = results[handle]
        assert status is not None, handle
        expected = AppState.FAILED if i % 10 == 0 else AppState.SUCCEEDED
        assert status.state == expected, (i, handle, status)
    # descriptors: the running replicas' (bounded by the concurrency), the
    # submits being prepared and some slack; N apps' worth would be 9000
    bound = baseline + CONCURRENCY * FDS_PER_REPLICA + 200
    assert fds.peak <= bound, (fds.peak, baseline, bound)


async def test_more_sleeping_apps_than_the_cache_holds_all_run(
    runner: Runner, tmp_path: Path
) -> None:
    # 150 apps of `sleep 0.5` with the default cache (100 apps): TorchX and
    # earlier versions refused the 101st while all ran; now submits wait for
    # a replica slot instead (50 run at once here)
    cfg = {"log_dir": str(tmp_path / "logs")}
    apps = [sh_app("sleep 0.5", name=f"s{i}") for i in range(150)]
    handles = await runner.run_many(apps, "local_cwd", cfg)
    results = await runner.wait_all(handles, timeout=120)
    assert all(
        s is not None and s.state == AppState.SUCCEEDED for s in results.values()
    )


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_waiting_on_finished_apps_holds_few_tasks(
    runner: Runner, tmp_path: Path
) -> None:
    # 200 finished apps, most of them evicted from the scheduler's memory
    # (cache of 100): wait_all reads each final status once and holds a task
    # only while it does, never one per app
    import asyncio

    from asyncsched.runner._fanout import PROBING

    cfg = {"log_dir": str(tmp_path / "logs")}
    handles = await runner.run_many(
        [sh_app("true", name=f"f{i}") for i in range(200)], "local_cwd", cfg
    )
    await runner.wait_all(handles, timeout=60)  # all finished before we count
    baseline = len(asyncio.all_tasks())
    peak = baseline

    async def sample() -> None:
        nonlocal peak
        while True:
            peak = max(peak, len(asyncio.all_tasks()))
            await anyio.sleep(0.001)  # a spinning sampler would starve the loop

    async with anyio.create_task_group() as tg:
        tg.start_soon(sample)
        results = await runner.wait_all(handles, timeout=60)
        tg.cancel_scope.cancel()
    assert all(
        s is not None and s.state == AppState.SUCCEEDED for s in results.values()
    )
    # the sampler, the fan-out's driver and at most PROBING workers (and slack)
    assert peak - baseline <= PROBING + 8, (peak, baseline)
