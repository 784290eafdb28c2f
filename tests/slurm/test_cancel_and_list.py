"""Cancel and list on a real cluster; list shows its own session's apps only."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.specs import AppDef, AppState, CfgVal, Resource, Role

from .cluster import Cluster
from .conftest import SETTLE

pytestmark = [pytest.mark.slurm, pytest.mark.anyio]


def _app(name: str, script: str, replicas: int = 1, max_retries: int = 0) -> AppDef:
    role = Role(
        "worker",
        image="/",
        entrypoint="sh",
        args=["-c", script],
        num_replicas=replicas,
        resource=Resource(cpu=1, gpu=0, memMB=64),
        max_retries=max_retries,
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


async def _started(sched: SlurmScheduler, app_id: str, replicas: int) -> None:
    """Until every replica printed ``started`` (its trap is set)."""
    with anyio.fail_after(SETTLE):
        for k in range(replicas):
            while "started\n" not in [
                line async for line in sched.log_iter(app_id, "worker", k)
            ]:
                await anyio.sleep(0.1)


async def test_cancel_runs_the_replicas_term_traps_and_keeps_their_codes(
    slurm: SlurmScheduler,
) -> None:
    # retries left: a cancelled job must not be requeued as if it had failed;
    # no fail-fast: srun's --kill-on-bad-exit would end the other replica's
    # trap once the first one exited 7
    script = "trap 'sleep 1; echo stopped; exit 7' TERM; echo started; sleep 300 & wait"
    app = _app("graced", script, 2, max_retries=1)
    app_id = await slurm.submit(app, {"fail_fast": False})
    await _started(slurm, app_id, 2)
    cancelled_at = anyio.current_time()
    await slurm.cancel(app_id)
    desc = await slurm.wait(app_id, timeout=SETTLE)
    assert anyio.current_time() - cancelled_at >= 1.0  # the traps' second
    assert desc is not None
    assert desc.state == AppState.CANCELLED
    assert desc.num_restarts == 0
    [role] = desc.roles_statuses
    assert [(r.state, r.exit_code) for r in role.replicas] == [
        (AppState.CANCELLED, 7)
    ] * 2
    for k in range(2):
        lines = [line async for line in slurm.log_iter(app_id, "worker", k)]
        assert lines[0] == "started\n"
        assert lines[-1] == "stopped\n"  # after Slurm's note of the step's end


async def test_cancel_ends_replicas_that_ignore_term_after_the_grace(
    slurm_cluster: Cluster, tmp_path: Path
) -> None:
    async with SlurmScheduler(
        "pytest",
        slurm_conf=str(slurm_cluster.conf),
        state_dir=str(tmp_path / "state"),
        cancel_grace=1.0,
    ) as sched:
        script = "trap '' TERM; echo started; sleep 300"
        app_id = await sched.submit(
            _app("stubborn", script, 1), {"job_dir": str(tmp_path / "job")}
        )
        await _started(sched, app_id, 1)
        await sched.cancel(app_id)
        desc = await sched.wait(app_id, timeout=SETTLE)
    assert desc is not None
    assert desc.state == AppState.CANCELLED


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


async def test_a_cancel_from_a_process_that_exits_at_once_keeps_the_grace_and_ends_the_job(
    slurm_cluster: Cluster, tmp_path: Path
) -> None:
    # `asyncsched cancel` exits right after it asked: the job's script alone
    # gives replica 0 its trap and replica 1 (which ignores SIGTERM) its grace,
    # then ends the job (no fail-fast: srun would end replica 1 itself)
    state = tmp_path / "state"
    script = (
        'if [ "$ASYNCSCHED_REPLICA_ID" = 0 ]; then trap "sleep 1; echo stopped; exit 7" TERM;'
        " else trap '' TERM; fi; echo started; sleep 300 & wait"
    )
    async with SlurmScheduler(
        "pytest",
        slurm_conf=str(slurm_cluster.conf),
        state_dir=str(state),
        cancel_grace=3.0,
        min_interval=0.2,
        max_interval=1.0,
    ) as sched:
        cfg: dict[str, CfgVal] = {"job_dir": str(tmp_path / "job"), "fail_fast": False}
        app_id = await sched.submit(_app("cli-cancelled", script, 2), cfg)
        await _started(sched, app_id, 2)
        cancelled_at = anyio.current_time()
        cli = await anyio.run_process(
            [sys.executable, "-m", "asyncsched", "cancel", f"slurm://pytest/{app_id}"],
            env={**os.environ, **slurm_cluster.env, "ASYNCSCHED_STATE_DIR": str(state)},
            check=False,
        )
        assert cli.returncode == 0, cli.stderr
        desc = await sched.wait(app_id, timeout=SETTLE)
        took = anyio.current_time() - cancelled_at
        lines = [line async for line in sched.log_iter(app_id, "worker", 0)]
    assert desc is not None
    assert desc.state == AppState.CANCELLED
    assert 3.0 <= took < 60, took  # the grace, not the replica's 300 s
    [role] = desc.roles_statuses
    # every replica stopped; replica 0 ran its trap to its end (its exit code
    # is not asserted: when srun kills the replica left at the end of the
    # grace, accounting was seen to keep no code for replica 0's step)
    assert [r.state for r in role.replicas] == [AppState.CANCELLED] * 2, desc.msg
    assert "stopped\n" in lines
