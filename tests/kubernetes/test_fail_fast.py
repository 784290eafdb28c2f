"""Fail-fast on Volcano: a replica that fails for good stops its siblings
(default), or lets them run to their end with ``fail_fast=False``."""

from __future__ import annotations

import pytest

from asyncsched.specs import AppState, StatusReason

from .fakeapi.env import KubeEnv
from .helpers import cfg_for, make_app, scheduler

pytestmark = pytest.mark.usefixtures("kube_controller")

# replica 0 fails once both run (Volcano starts the gang together)
SCRIPT = 'if [ "$ASYNCSCHED_REPLICA_ID" = 0 ]; then sleep 2; exit 3; fi; sleep {}'


async def test_a_failed_replica_stops_its_siblings(kube_env: KubeEnv) -> None:
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(
            make_app(SCRIPT.format(300), replicas=2), cfg_for(kube_env, "volcano")
        )
        desc = await sched.wait(app_id, timeout=120)
    assert desc is not None
    assert desc.state == AppState.FAILED
    assert desc.msg == "replica worker/0 exited with code 3"
    failed, sibling = desc.roles_statuses[0].replicas
    assert (failed.state, failed.exit_code) == (AppState.FAILED, 3)
    assert sibling.state == AppState.CANCELLED
    assert sibling.reason == StatusReason.CANCELLED
    assert sibling.exit_code in (143, 137)  # SIGTERM, or the grace ran out
    assert sibling.message == "stopped: another replica failed"


async def test_fail_fast_off_lets_the_siblings_run_to_their_end(
    kube_env: KubeEnv,
) -> None:
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(
            make_app(SCRIPT.format(6), replicas=2),
            {**cfg_for(kube_env, "volcano"), "fail_fast": False},
        )
        desc = await sched.wait(app_id, timeout=120)
    assert desc is not None
    assert desc.state == AppState.FAILED
    states = [(r.state, r.exit_code) for r in desc.roles_statuses[0].replicas]
    assert states == [(AppState.FAILED, 3), (AppState.SUCCEEDED, 0)]
