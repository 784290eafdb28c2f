"""Multi-replica apps on a real cluster: identity, per-replica failure, retries."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.specs import AppDef, AppState, Resource, Role, StatusReason

from .cluster import KILL_WAIT, Cluster
from .conftest import MIXED_RESULT_SCRIPT, SETTLE, assert_own_results

pytestmark = [pytest.mark.slurm, pytest.mark.anyio]


def _app(script: str, replicas: int, **role_kwargs: object) -> AppDef:
    role = Role(
        "worker",
        image="/",
        entrypoint="sh",
        args=["-c", script],
        num_replicas=replicas,
        resource=Resource(cpu=1, gpu=0, memMB=64),
        **role_kwargs,  # type: ignore[arg-type]
    )
    return AppDef("replicas", roles=[role])


async def _lines(sched: SlurmScheduler, app_id: str, k: int) -> list[str]:
    return [line async for line in sched.log_iter(app_id, "worker", k)]


async def test_each_replica_sees_its_identity_variables(slurm: SlurmScheduler) -> None:
    script = (
        "echo id=$ASYNCSCHED_REPLICA_ID n=$ASYNCSCHED_NUM_REPLICAS"
        " role=$ASYNCSCHED_ROLE_NAME app=$ASYNCSCHED_APP_ID macro=${replica_id}"
        " job=$TORCHX_JOB_ID"
    )
    app = _app(script, 3, env={"TORCHX_JOB_ID": "slurm://s/${app_id}"})
    app_id = await slurm.submit(app)
    desc = await slurm.wait(app_id, timeout=SETTLE)
    assert desc is not None
    assert desc.state == AppState.SUCCEEDED
    [role] = desc.roles_statuses
    assert [(r.id, r.state, r.exit_code) for r in role.replicas] == [
        (k, AppState.SUCCEEDED, 0) for k in range(3)
    ]
    assert len({r.hostname for r in role.replicas}) == 3  # one node per component
    for k in range(3):
        assert await _lines(slurm, app_id, k) == [
            f"id={k} n=3 role=worker app={app_id} macro={k} job=slurm://s/{app_id}\n"
        ]


async def test_failing_replica_fails_app_with_its_exit_code(
    slurm: SlurmScheduler,
) -> None:
    # replica 1 fails only once replica 0 runs: srun's kill for a component
    # whose step does not exist yet is lost ("StepId=0 not found"), and that
    # replica then runs to its own end (exit 0 after 30 s), as Slurm reports
    script = (
        "f=started-$ASYNCSCHED_APP_ID;"
        ' if [ "$ASYNCSCHED_REPLICA_ID" = 1 ]; then'
        " while [ ! -e $f ]; do sleep 0.05; done; exit 3; fi;"
        " touch $f; sleep 30"
    )
    app_id = await slurm.submit(_app(script, 2))
    desc = await slurm.wait(app_id, timeout=SETTLE)
    assert desc is not None
    assert desc.state == AppState.FAILED
    # the same words as the other backends: the replica that failed, its code
    assert desc.msg == "replica worker/1 exited with code 3"
    replicas = {r.id: r for r in desc.roles_statuses[0].replicas}
    assert replicas[1].exit_code == 3
    assert replicas[1].state == AppState.FAILED
    # srun --kill-on-bad-exit stops the healthy replica (fail-fast): it was
    # stopped, not failed -- and wait returned once it had stopped
    assert replicas[0].state == AppState.CANCELLED, replicas[0]
    assert replicas[0].exit_code == 128 + 15
    assert replicas[0].reason == StatusReason.CANCELLED


async def test_replica_that_exits_0_succeeds_while_its_peer_fails_the_app(
    slurm: SlurmScheduler, slurm_cluster: Cluster, tmp_path: Path
) -> None:
    app_id = await slurm.submit(_app(MIXED_RESULT_SCRIPT, 2))
    waited = await slurm.wait(app_id, timeout=SETTLE)
    async with SlurmScheduler(
        "fresh", slurm_conf=str(slurm_cluster.conf), state_dir=str(tmp_path / "state")
    ) as fresh:
        described = await fresh.describe(app_id)
    for desc in (waited, described):
        assert desc is not None
        assert desc.state == AppState.FAILED
        [role] = desc.roles_statuses
        assert [(r.id, r.state, r.exit_code) for r in role.replicas] == [
            (0, AppState.SUCCEEDED, 0),
            (1, AppState.FAILED, 3),
        ]
        assert desc.msg == "replica worker/1 exited with code 3"
        assert role.replicas[1].message == "exited with code 3"


async def test_failed_run_is_requeued_while_retries_remain(
    slurm: SlurmScheduler,
) -> None:
    # Slurm delays the restart of a requeued job (BeginTime), so the test
    # checks the requeue itself: the app is not failed, it has one restart
    app_id = await slurm.submit(_app("exit 4", 1, max_retries=1))
    with anyio.fail_after(SETTLE):
        while True:
            desc = await slurm.describe(app_id)
            assert desc is not None
            assert desc.state != AppState.FAILED
            if desc.num_restarts == 1:
                break
            await anyio.sleep(0.1)
    assert desc.state in (AppState.PENDING, AppState.RUNNING)
    await slurm.cancel(app_id)
    final = await slurm.wait(app_id, timeout=SETTLE)
    assert final is not None
    assert final.state == AppState.CANCELLED


async def test_fail_fast_false_lets_the_other_replicas_run_to_their_end(
    slurm: SlurmScheduler, slurm_cluster: Cluster
) -> None:
    # replica 1 fails once replica 0 runs; replica 0 ends on its own only
    # after that failure (with fail-fast, srun would stop it: 143)
    script = (
        "s=started-$ASYNCSCHED_APP_ID; f=failed-$ASYNCSCHED_APP_ID;"
        ' if [ "$ASYNCSCHED_REPLICA_ID" = 1 ]; then'
        " while [ ! -e $s ]; do sleep 0.05; done; touch $f; exit 3; fi;"
        " touch $s; while [ ! -e $f ]; do sleep 0.05; done; sleep 3; echo lived"
    )
    app_id = await slurm.submit(_app(script, 2), {"fail_fast": False})
    desc = await slurm.wait(app_id, timeout=SETTLE)
    assert desc is not None
    assert desc.state == AppState.FAILED
    assert_own_results(
        desc,
        [(AppState.SUCCEEDED, 0), (AppState.FAILED, 3)],
        may_be_lost=not slurm_cluster.accounting,
    )
    assert await _lines(slurm, app_id, 0) == ["lived\n"]


async def test_fail_fast_stops_the_other_replicas_through_their_sigterm_trap(
    slurm: SlurmScheduler, slurm_cluster: Cluster
) -> None:
    # replica 1 fails once replica 0 has set its trap; replica 0's trap takes
    # longer than the cluster's KillWait and must still run to its end:
    # fail-fast gives it SIGTERM and its grace, as a cancel does
    script = (
        "s=started-$ASYNCSCHED_APP_ID;"
        ' if [ "$ASYNCSCHED_REPLICA_ID" = 1 ]; then'
        " while [ ! -e $s ]; do sleep 0.05; done; exit 3; fi;"
        f" trap 'echo stopping; sleep {KILL_WAIT + 2}; echo stopped; exit 143' TERM;"
        " touch $s; sleep 60 & wait"
    )
    app_id = await slurm.submit(_app(script, 2))
    desc = await slurm.wait(app_id, timeout=SETTLE)
    assert desc is not None
    assert desc.state == AppState.FAILED
    # (after the line slurmstepd writes when it signals a step)
    lines = await _lines(slurm, app_id, 0)
    assert [x for x in lines if not x.startswith("slurmstepd")] == [
        "stopping\n",
        "stopped\n",
    ]
    assert_own_results(
        desc,
        [(AppState.CANCELLED, 143), (AppState.FAILED, 3)],
        may_be_lost=not slurm_cluster.accounting,
    )
