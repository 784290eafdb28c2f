"""Cancel and list on a real cluster; list shows its own session's apps only."""

from __future__ import annotations

import anyio
import pytest

from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.specs import AppDef, AppState, Resource, Role

from .cluster import Cluster
from .conftest import SETTLE

pytestmark = [pytest.mark.slurm, pytest.mark.anyio]


def _app(name: str, script: str, replicas: int = 1) -> AppDef:
    role = Role(
        "worker",
        image="/",
        entrypoint="sh",
        args=["-c", script],
        num_replicas=replicas,
        resource=Resource(cpu=1, gpu=0, memMB=64),
    )
    return AppDef(name, roles=[role])


async def test_cancel_stops_every_replica(
    slurm: SlurmScheduler, slurm_cluster: Cluster
) -> None:
    app_id = await slurm.submit(_app("long", "echo up; sleep 300", 2))
    with anyio.fail_after(SETTLE):
        while (desc := await slurm.describe(app_id)) and desc.state != AppState.RUNNING:
            await anyio.sleep(0.1)
    await slurm.cancel(app_id)
    desc = await slurm.wait(app_id, timeout=SETTLE)
    assert desc is not None
    assert desc.state == AppState.CANCELLED
    assert [r.state for r in desc.roles_statuses[0].replicas] == [
        AppState.CANCELLED
    ] * 2
    states = slurm_cluster.run("squeue", "-h", "-t", "all", "-j", app_id, "-o", "%T")
    assert states.stdout.split() == ["CANCELLED", "CANCELLED"]


async def test_list_shows_only_the_apps_of_its_own_session(
    slurm: SlurmScheduler, slurm_cluster: Cluster
) -> None:
    first = await slurm.submit(_app("first", "true"))
    async with SlurmScheduler(
        "other",
        slurm_conf=str(slurm_cluster.conf),
        state_dir=slurm.registry.path.rsplit("/slurm/", 1)[0],
    ) as other:
        second = await other.submit(_app("second", "exit 1"))
        await other.wait(second, timeout=SETTLE)
        listed_by_other = {a.app_id: a for a in await other.list()}
    await slurm.wait(first, timeout=SETTLE)
    listed = {a.app_id: a for a in await slurm.list()}
    assert set(listed) == {first}
    assert (listed[first].name, listed[first].state) == ("first", AppState.SUCCEEDED)
    assert set(listed_by_other) == {second}
    assert listed_by_other[second].name == "second"
    assert listed_by_other[second].state == AppState.FAILED
