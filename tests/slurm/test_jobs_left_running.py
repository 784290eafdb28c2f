"""A job a test leaves running is ended after it (the ``slurm`` fixture).

The four test nodes are shared by every Slurm test in turn: a leftover job
whose replicas ignore SIGTERM held CPUs of two nodes for a minute, and the
next test's three-replica app (three nodes, each with a free CPU) waited past
its deadline. The first test leaves such a job running; the second, run right
after it on the same cluster, sees it ended.
"""

from __future__ import annotations

import anyio
import pytest

from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.specs import AppDef, AppState, Resource, Role

from .cluster import Cluster
from .conftest import SETTLE

pytestmark = [pytest.mark.slurm, pytest.mark.anyio]

#: cluster flavour -> the job the first test left running
_LEFT: dict[bool, str] = {}


def _stubborn() -> AppDef:
    role = Role(
        "worker",
        image="/",
        entrypoint="sh",
        args=["-c", "trap '' TERM; echo started; sleep 300"],
        num_replicas=2,
        resource=Resource(cpu=1, gpu=0, memMB=64),
    )
    return AppDef("stubborn", roles=[role])


async def _state(cluster: Cluster, job_id: str) -> str:
    done = await anyio.to_thread.run_sync(
        cluster.run, "squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"
    )
    return done.stdout


async def test_a_test_leaves_a_job_that_ignores_sigterm_running(
    slurm: SlurmScheduler, slurm_cluster: Cluster
) -> None:
    app_id = await slurm.submit(_stubborn())
    with anyio.fail_after(SETTLE):
        while (desc := await slurm.describe(app_id)) is None or (
            desc.state != AppState.RUNNING
        ):
            await anyio.sleep(0.2)
    _LEFT[slurm_cluster.accounting] = app_id


async def test_the_job_the_previous_test_left_running_is_ended(
    slurm_cluster: Cluster,
) -> None:
    app_id = _LEFT.get(slurm_cluster.accounting)
    if app_id is None:
        pytest.skip("runs after the test that leaves the job (not selected)")
    with anyio.fail_after(SETTLE):  # scancel: SIGTERM, KillWait, SIGKILL
        while "RUNNING" in (state := await _state(slurm_cluster, app_id)) or (
            "COMPLETING" in state
        ):
            await anyio.sleep(0.2)
    assert "CANCELLED" in state, state
