"""Why a Slurm app ended or waits, as the real cluster tells it (both clusters).

A job over its time limit reads TIME_LIMIT, one ``scancel``-ed from outside
reads CANCELLED, and a job that cannot start (its partition down, then held
by an admin) shows squeue's pending reason as UNSCHEDULABLE with Slurm's own
word for it.
"""

from __future__ import annotations

import os
import stat

import anyio
import pytest

from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.specs import (
    AppDef,
    AppState,
    ReplicaStatus,
    Resource,
    Role,
    StatusReason,
)

from .cluster import PARTITION, Cluster
from .conftest import SETTLE, OvertimeApp

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
    with anyio.fail_after(SETTLE):
        while (desc := await slurm.describe(app_id)) and desc.state != AppState.RUNNING:
            await anyio.sleep(0.1)


@pytest.mark.slow
async def test_job_over_its_time_limit_ends_with_time_limit(
    slurm: SlurmScheduler, slurm_cluster: Cluster, overtime_app: OvertimeApp
) -> None:
    # Slurm's limits are whole minutes, checked by slurmctld every 30 s (fixed
    # in its background loop): the job, submitted with `-cfg time=1` when the
    # cluster started, ends 60-90 s later (this waits for what is left)
    async with SlurmScheduler(
        "pytest",
        slurm_conf=str(slurm_cluster.conf),
        state_dir=str(overtime_app.state_dir),
        min_interval=0.2,
        max_interval=1.0,
    ) as sched:
        desc = await sched.wait(overtime_app.app_id, timeout=150)
        record = await sched.registry.get(overtime_app.app_id)
    assert desc is not None
    assert desc.state == AppState.FAILED
    assert desc.reason == StatusReason.TIME_LIMIT, desc
    [replica] = desc.roles_statuses[0].replicas
    assert replica.reason == StatusReason.TIME_LIMIT
    assert "TIMEOUT" in replica.message
    # a failed job keeps its environment files, owner-only: Slurm may run a
    # failed job again (docs/backends/slurm.md)
    assert record is not None
    assert stat.S_IMODE(os.stat(record.env_dir).st_mode) == 0o700


async def test_job_cancelled_with_scancel_from_outside_reads_cancelled(
    slurm: SlurmScheduler, slurm_cluster: Cluster
) -> None:
    app_id = await slurm.submit(_app("outside", "sleep 300"))
    await _until_running(slurm, app_id)
    done = slurm_cluster.run("scancel", app_id)
    assert done.returncode == 0, done.stderr
    desc = await slurm.wait(app_id, timeout=SETTLE)
    assert desc is not None
    assert desc.state == AppState.CANCELLED
    assert desc.reason == StatusReason.CANCELLED, desc
    [replica] = desc.roles_statuses[0].replicas
    assert replica.state == AppState.CANCELLED
    assert replica.reason == StatusReason.CANCELLED


async def _until_reason(
    slurm: SlurmScheduler, slurm_cluster: Cluster, app_id: str, word: str
) -> tuple[ReplicaStatus, str]:
    """Poll until squeue's reason for ``app_id`` is ``word``; then describe it."""
    with anyio.fail_after(SETTLE):
        while True:
            squeue = slurm_cluster.run("squeue", "-h", "-j", app_id, "-o", "%T %r")
            if squeue.stdout.split() == ["PENDING", word]:
                break
            await anyio.sleep(0.2)
        while True:  # the scheduler polls at its own pace
            desc = await slurm.describe(app_id)
            assert desc is not None
            assert desc.state == AppState.PENDING, desc
            [replica] = desc.roles_statuses[0].replicas
            if word in replica.message:
                assert desc.reason == replica.reason
                return replica, squeue.stdout
            await anyio.sleep(0.2)


async def test_pending_jobs_show_squeues_reason(
    slurm: SlurmScheduler, slurm_cluster: Cluster
) -> None:
    """A job that cannot start (partition down, then held) says why."""
    down = slurm_cluster.run(
        "scontrol", "update", f"PartitionName={PARTITION}", "State=DOWN"
    )
    assert down.returncode == 0, down.stderr
    try:
        app_id = await slurm.submit(_app("waits", "echo late"))
        replica, squeue = await _until_reason(
            slurm, slurm_cluster, app_id, "PartitionDown"
        )
        assert replica.state == AppState.PENDING
        assert replica.reason == StatusReason.UNSCHEDULABLE, squeue
        assert "PartitionDown" in replica.message

        held = slurm_cluster.run("scontrol", "hold", app_id)
        assert held.returncode == 0, held.stderr
    finally:
        up = slurm_cluster.run(
            "scontrol", "update", f"PartitionName={PARTITION}", "State=UP"
        )
        assert up.returncode == 0, up.stderr
    try:
        replica, squeue = await _until_reason(
            slurm, slurm_cluster, app_id, "JobHeldAdmin"
        )
        assert replica.reason == StatusReason.UNSCHEDULABLE, squeue
        assert "JobHeldAdmin" in replica.message

        released = slurm_cluster.run("scontrol", "release", app_id)
        assert released.returncode == 0, released.stderr
        desc = await slurm.wait(app_id, timeout=SETTLE)
        assert desc is not None
        assert (desc.state, desc.reason) == (AppState.SUCCEEDED, None)
    finally:
        await slurm.cancel(app_id)
