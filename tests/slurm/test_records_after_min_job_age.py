"""Apps whose records left the controller (MinJobAge) are described from the
job completion log (``sacct -c``), per replica, by a fresh scheduler."""

from __future__ import annotations

import anyio
import pytest

from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.specs import AppState

from .cluster import Cluster
from .conftest import AgedApps

pytestmark = pytest.mark.slurm


async def test_finished_app_is_described_from_the_completion_log(
    slurm_cluster: Cluster, aged_apps: AgedApps
) -> None:
    ids = f"{aged_apps.ok},{aged_apps.failed}"
    # slurmctld purges finished jobs older than MinJobAge about once a minute
    with anyio.fail_after(100):
        while True:
            out = slurm_cluster.run("squeue", "-h", "-t", "all", "-j", ids)
            gone = "invalid job id" in out.stderr.lower()
            if gone or (out.returncode == 0 and not out.stdout.strip()):
                break
            await anyio.sleep(0.5)
    async with SlurmScheduler(
        "fresh",
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
    }
    assert lines == ["done\n"]
