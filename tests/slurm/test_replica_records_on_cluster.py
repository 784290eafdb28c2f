"""What the real cluster prints for each replica parses to that replica's own
result: ``squeue`` while the job is on the controller, then ``sacct -P``
(accounting, including its placeholder right after the job ends) or the job
completion log (``sacct -c``)."""

from __future__ import annotations

import anyio
import pytest

from asyncsched.schedulers.slurm._state import (
    SACCT_FIELDS,
    SQUEUE_FORMAT,
    AppView,
    group_components,
    parse_sacct,
    parse_squeue,
)
from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.specs import AppDef, AppState, Resource, Role, is_terminal

from .cluster import Cluster
from .conftest import MIXED_RESULT_SCRIPT, MIXED_RESULTS, SETTLE, assert_own_results

pytestmark = [pytest.mark.slurm, pytest.mark.anyio]


def _replicas(view: AppView) -> list[tuple[AppState, int | None]]:
    [role] = view.snapshot().role_statuses()
    return [(r.state, r.exit_code) for r in role.replicas]


async def test_every_record_of_a_finished_app_gives_each_replica_its_result(
    slurm: SlurmScheduler, slurm_cluster: Cluster
) -> None:
    role = Role(
        "worker",
        image="/",
        entrypoint="sh",
        args=["-c", MIXED_RESULT_SCRIPT],
        num_replicas=2,
        resource=Resource(cpu=1, gpu=0, memMB=64),
    )
    app_id = await slurm.submit(AppDef("records", roles=[role]))
    waited = await slurm.wait(app_id, timeout=SETTLE)
    assert waited is not None
    assert waited.state == AppState.FAILED

    out = slurm_cluster.run(
        "squeue", "-h", "-t", "all", "-j", app_id, "-O", SQUEUE_FORMAT
    )
    view = group_components(parse_squeue(out.stdout), source="squeue")[app_id]
    assert _replicas(view) == MIXED_RESULTS, out.stdout

    fields = ["-n", "-P", "-o", SACCT_FIELDS]
    if slurm_cluster.accounting:
        argv = ["sacct", *fields, "-j", app_id]
        leaders = None
    else:
        argv = ["sacct", "-c", *fields, "-j", f"{app_id},{int(app_id) + 1}"]
        leaders = {app_id: app_id, str(int(app_id) + 1): app_id}
    # accounting lags: a placeholder first, never to be read as a final result
    seen = []
    with anyio.fail_after(SETTLE):
        while True:
            out = slurm_cluster.run(*argv)
            views = group_components(parse_sacct(out.stdout, leaders), source="sacct")
            view = views.get(app_id, AppView(app_id))
            view.expected = 2
            seen.append(out.stdout)
            if view.settled:
                break
            assert not is_terminal(view.state), seen
            await anyio.sleep(0.2)
    assert view.state == AppState.FAILED, seen
    # accounting keeps every replica's code; the completion log may lose one
    assert_own_results(
        view.snapshot(),
        MIXED_RESULTS,
        may_be_lost=not slurm_cluster.accounting,
        context=str(seen),
    )
