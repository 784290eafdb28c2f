"""A replica Volcano is about to restart does not end its app.

The failed pod reaches the watch a moment before the Job turns
``Restarting``: ``wait`` (and the events) must not read the app as FAILED in
between, then RUNNING again.
"""

from __future__ import annotations

import pytest

from asyncsched.specs import AppDef, AppState, Resource, Role

from .fakeapi.env import KubeEnv
from .helpers import IMAGE, cfg_for, scheduler

pytestmark = pytest.mark.usefixtures("kube_controller")


async def test_wait_returns_after_the_retry_of_a_failed_replica(
    kube_env: KubeEnv,
) -> None:
    role = Role(
        "worker",
        image=IMAGE,
        entrypoint="sh",
        args=["-c", "sleep 1; exit 4"],
        max_retries=1,
        resource=Resource(cpu=1, gpu=0, memMB=128),
    )
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(
            AppDef("retried", roles=[role]), cfg_for(kube_env, "volcano")
        )
        final = await sched.wait(app_id, timeout=120)
    assert final is not None
    assert final.state == AppState.FAILED
    assert final.num_restarts == 1  # not the first attempt's failure
    replica = final.roles_statuses[0].replicas[0]
    assert replica.state == AppState.FAILED
    assert replica.exit_code == 4
