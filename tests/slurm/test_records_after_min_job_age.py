"""Apps whose records left the controller (MinJobAge) are described, per
replica, by a fresh scheduler: from accounting (``sacct``) on the cluster
with accounting, from the job completion log (``sacct -c``) on the other."""

from __future__ import annotations

import anyio
import pytest

from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.specs import AppState

from .cluster import Cluster
from .conftest import MIXED_RESULTS, SETTLE, AgedApps, assert_own_results

pytestmark = [pytest.mark.slurm, pytest.mark.anyio]


async def _wait_purged(slurm_cluster: Cluster, aged_apps: AgedApps) -> None:
    apps = aged_apps
    ids = f"{apps.ok},{apps.failed},{apps.mixed},{apps.cancelled}"
    # slurmctld purges finished jobs older than MinJobAge about once a minute
    with anyio.fail_after(100):
        while True:
            out = slurm_cluster.run("squeue", "-h", "-t", "all", "-j", ids)
            gone = "invalid job id" in out.stderr.lower()
            if gone or (out.returncode == 0 and not out.stdout.strip()):
                break
            await anyio.sleep(0.5)


async def test_finished_app_is_described_from_slurms_records(
    slurm_cluster: Cluster, aged_apps: AgedApps
) -> None:
    await _wait_purged(slurm_cluster, aged_apps)
    # a new scheduler of the submitters' session (as in a new process): it
    # lists that session's apps, from Slurm's records alone
    async with SlurmScheduler(
        "pytest",
        slurm_conf=str(slurm_cluster.conf),
        state_dir=str(aged_apps.state_dir),
    ) as sched:
        ok = await sched.describe(aged_apps.ok)
        failed = await sched.describe(aged_apps.failed)
        sacct_calls = sched.cli.counts["sacct"]
        listed = {a.app_id: (a.name, a.state) for a in await sched.list()}
        lines = [line async for line in sched.log_iter(aged_apps.ok, "worker", 1)]
    log = slurm_cluster.jobcomp.read_text()
    assert sacct_calls >= 1
    assert ok is not None, log
    assert ok.state == AppState.SUCCEEDED, log
    assert [r.id for r in ok.roles_statuses[0].replicas] == [0, 1], log
    assert failed is not None, log
    assert failed.state == AppState.FAILED, log
    assert [r.exit_code for r in failed.roles_statuses[0].replicas] == [3], log
    assert listed == {
        aged_apps.ok: ("aged-ok", AppState.SUCCEEDED),
        aged_apps.failed: ("aged-failed", AppState.FAILED),
        aged_apps.mixed: ("aged-mixed", AppState.FAILED),
        aged_apps.cancelled: ("aged-cancelled", AppState.CANCELLED),
    }
    assert lines == ["done\n"]


async def test_finished_replicas_keep_their_own_results(
    slurm_cluster: Cluster, aged_apps: AgedApps
) -> None:
    await _wait_purged(slurm_cluster, aged_apps)
    async with SlurmScheduler(
        "fresh",
        slurm_conf=str(slurm_cluster.conf),
        state_dir=str(aged_apps.state_dir),
    ) as sched:
        desc = await sched.wait(aged_apps.mixed, timeout=SETTLE)
        cancelled = await sched.describe(aged_apps.cancelled)
        squeue_calls = sched.cli.counts["squeue"]
    assert squeue_calls >= 1  # asked the controller first: the job had left it
    assert desc is not None
    assert desc.state == AppState.FAILED
    assert [r.id for r in desc.roles_statuses[0].replicas] == [0, 1]
    # accounting keeps every replica's code; the completion log may lose one
    assert_own_results(
        desc,
        MIXED_RESULTS,
        may_be_lost=not slurm_cluster.accounting,
        context=slurm_cluster.jobcomp.read_text(),
    )
    assert cancelled is not None
    assert cancelled.state == AppState.CANCELLED
    assert "CANCELLED" in cancelled.msg
    [role] = cancelled.roles_statuses
    assert [r.state for r in role.replicas] == [AppState.CANCELLED] * 2
