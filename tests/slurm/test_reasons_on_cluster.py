"""Why a Slurm app ended or waits, as the real cluster tells it (both clusters).

A job over its time limit reads TIME_LIMIT, one ``scancel``-ed from outside
reads CANCELLED, and a held job shows squeue's pending reason as
UNSCHEDULABLE with Slurm's own word for it.
"""

from __future__ import annotations

import anyio
import pytest

from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.specs import AppDef, AppState, Resource, Role, StatusReason

from .cluster import Cluster

pytestmark = pytest.mark.slurm


def _app(name: str, script: str) -> AppDef:
    role = Role(
        "worker",
        image="/",
        entrypoint="sh",
        args=["-c", script],
        resource=Resource(cpu=1, gpu=0, memMB=64),
    )
    return AppDef(name, roles=[role])


async def _until_running(slurm: SlurmScheduler, app_id: str) -> None:
    with anyio.fail_after(30):
        while (desc := await slurm.describe(app_id)) and desc.state != AppState.RUNNING:
            await anyio.sleep(0.1)


@pytest.mark.slow
async def test_job_over_its_time_limit_ends_with_time_limit(
    slurm: SlurmScheduler,
) -> None:
    # Slurm's limits are whole minutes, checked by slurmctld every 30 s (fixed
    # in its background loop): this takes 60-95 s
    app_id = await slurm.submit(_app("overtime", "sleep 600"), {"time": "1"})
    desc = await slurm.wait(app_id, timeout=150)
    assert desc is not None
    assert desc.state == AppState.FAILED
    assert desc.reason == StatusReason.TIME_LIMIT, desc
    [replica] = desc.roles_statuses[0].replicas
    assert replica.reason == StatusReason.TIME_LIMIT
    assert "TIMEOUT" in replica.message


async def test_job_cancelled_with_scancel_from_outside_reads_cancelled(
    slurm: SlurmScheduler, slurm_cluster: Cluster
) -> None:
    app_id = await slurm.submit(_app("outside", "sleep 300"))
    await _until_running(slurm, app_id)
    done = slurm_cluster.run("scancel", app_id)
    assert done.returncode == 0, done.stderr
    desc = await slurm.wait(app_id, timeout=30)
    assert desc is not None
    assert desc.state == AppState.CANCELLED
    assert desc.reason == StatusReason.CANCELLED, desc
    [replica] = desc.roles_statuses[0].replicas
    assert replica.state == AppState.CANCELLED
    assert replica.reason == StatusReason.CANCELLED


async def test_held_job_shows_squeues_pending_reason(
    slurm: SlurmScheduler, slurm_cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # sbatch reads SBATCH_HOLD (= --hold): the job is held from the start
    monkeypatch.setenv("SBATCH_HOLD", "1")
    app_id = await slurm.submit(_app("held", "echo never"))
    monkeypatch.delenv("SBATCH_HOLD")
    try:
        squeue = slurm_cluster.run("squeue", "-h", "-j", app_id, "-o", "%T %r")
        with anyio.fail_after(30):
            while True:
                desc = await slurm.describe(app_id)
                assert desc is not None
                assert desc.state == AppState.PENDING
                if desc.reason == StatusReason.UNSCHEDULABLE:
                    break
                await anyio.sleep(0.2)
                squeue = slurm_cluster.run("squeue", "-h", "-j", app_id, "-o", "%T %r")
        assert squeue.stdout.split()[0] == "PENDING", squeue.stdout
        [replica] = desc.roles_statuses[0].replicas
        assert replica.state == AppState.PENDING
        assert replica.reason == StatusReason.UNSCHEDULABLE
        assert "JobHeld" in replica.message, replica.message
        assert replica.message.split("(", 1)[1].rstrip(")") in squeue.stdout
    finally:
        await slurm.cancel(app_id)
