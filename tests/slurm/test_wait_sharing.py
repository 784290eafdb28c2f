"""Waits on many apps share one status query per tick; closing ends them."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from asyncsched.errors import SchedulerClosedError
from asyncsched.schedulers.shared.ratewindow import RateWindow
from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.specs import AppDef, AppState, Resource, Role

from .cluster import Cluster
from .conftest import SETTLE

pytestmark = [pytest.mark.slurm, pytest.mark.anyio]


def _app(script: str) -> AppDef:
    role = Role(
        "worker",
        image="/",
        entrypoint="sh",
        args=["-c", script],
        resource=Resource(cpu=1, gpu=0, memMB=16),
    )
    return AppDef("many", roles=[role])


async def test_waits_on_many_apps_share_each_squeue(slurm: SlurmScheduler) -> None:
    ids = [await slurm.submit(_app("sleep 1")) for _ in range(6)]
    before = slurm.cli.counts["squeue"]
    results: dict[str, AppState] = {}

    async def wait(app_id: str) -> None:
        desc = await slurm.wait(app_id)
        assert desc is not None
        results[app_id] = desc.state

    with anyio.fail_after(SETTLE):
        async with anyio.create_task_group() as tg:
            for app_id in ids:
                tg.start_soon(wait, app_id)
    assert results == dict.fromkeys(ids, AppState.SUCCEEDED)
    ticks = slurm._tracker.ticks
    # one squeue per tick for all six apps (sacct only for jobs already purged)
    assert slurm.cli.counts["squeue"] - before == ticks


async def test_closing_the_scheduler_ends_pending_waits(
    slurm_cluster: Cluster, tmp_path: Path
) -> None:
    sched = SlurmScheduler(
        "close", slurm_conf=str(slurm_cluster.conf), state_dir=str(tmp_path)
    )
    await sched.__aenter__()
    app_id = await sched.submit(_app("sleep 300"), {"job_dir": str(tmp_path / "j")})
    errors: list[BaseException] = []

    async def wait() -> None:
        try:
            await sched.wait(app_id)
        except SchedulerClosedError as exc:
            errors.append(exc)

    with anyio.fail_after(SETTLE):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            while sched._tracker.ticks == 0:
                await anyio.sleep(0.05)
            await sched.cancel(app_id)
            await sched.aclose()
    assert len(errors) == 1


class _RecordingWindow(RateWindow):
    def __init__(self, max_calls: int, period: float) -> None:
        super().__init__(max_calls, period)
        self.times: list[float] = []

    async def acquire(self) -> None:
        await super().acquire()
        self.times.append(anyio.current_time())


async def test_status_commands_stay_under_the_ceiling_however_many_apps(
    slurm: SlurmScheduler,
) -> None:
    # a tight ceiling (4 commands in any 2 s) so that it binds within seconds
    window = slurm.status_window = _RecordingWindow(4, 2.0)
    ids = [await slurm.submit(_app("sleep 1")) for _ in range(8)]
    # described, never waited for: each describe is a status command of its
    # own (one of a waited app reads the waits' poll), so the ceiling binds
    # however soon the waits end
    described = await slurm.submit(_app("sleep 1"))
    before = slurm.cli.counts["squeue"] + slurm.cli.counts["sacct"]

    async def wait(app_id: str) -> None:
        desc = await slurm.wait(app_id)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED

    async def describe_often() -> None:  # describes share the same ceiling
        for _ in range(10):
            await slurm.describe(described)

    # 8 one-second jobs: a minute is ample on a loaded host, and a hang fails
    # here (inside pytest's 120 s, which also counts the submits)
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for app_id in ids:
                tg.start_soon(wait, app_id)
            tg.start_soon(describe_often)
    used = slurm.cli.counts["squeue"] + slurm.cli.counts["sacct"] - before
    assert used == len(window.times)
    for i, start in enumerate(window.times):
        assert sum(1 for t in window.times[i:] if t - start < 2.0) <= 4
    assert window.waited > 0  # the ceiling did bind


def test_the_default_ceiling_is_sixty_status_commands_a_minute() -> None:
    sched = SlurmScheduler("defaults")
    assert (sched.status_window.max_calls, sched.status_window.period) == (60, 60.0)
