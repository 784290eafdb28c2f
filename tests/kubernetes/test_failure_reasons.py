"""Replicas carry the typed reason a kubelet's (or scheduler's) status gives."""

from __future__ import annotations

import pytest

from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler
from asyncsched.specs import AppState, Resource, StatusReason
from asyncsched.testing import wait_for_state

from .fakeapi.env import KubeEnv
from .helpers import JOB_APIS, cfg_for, make_app, scheduler

pytestmark = pytest.mark.usefixtures("kube_controller")


async def _replica_reason(
    sched: KubernetesScheduler, app_id: str, want: StatusReason
) -> tuple[AppState, str]:
    desc = await wait_for_state(
        sched,
        app_id,
        lambda d: d.roles_statuses[0].replicas[0].reason == want,
        timeout=30,
    )
    replica = desc.roles_statuses[0].replicas[0]
    return replica.state, replica.message


@pytest.mark.parametrize("job_api", JOB_APIS)
async def test_a_failed_exit_and_a_signal_death_read_as_such(
    kube_env: KubeEnv, job_api: str
) -> None:
    cfg = cfg_for(kube_env, job_api)
    async with scheduler(kube_env) as sched:
        failed = await sched.submit(make_app("exit 3"), cfg)
        desc = await sched.wait(failed, timeout=60)
        assert desc is not None
        assert desc.state == AppState.FAILED
        replica = desc.roles_statuses[0].replicas[0]
        assert (replica.reason, replica.exit_code) == (StatusReason.EXIT_CODE, 3)
        assert desc.reason == StatusReason.EXIT_CODE


@pytest.mark.fake_api
@pytest.mark.parametrize("job_api", JOB_APIS)
async def test_pending_replicas_say_why_they_wait(
    kube_env: KubeEnv, job_api: str
) -> None:
    if kube_env.real:
        pytest.skip("relies on the fake kubelet's image and node model")
    cfg = cfg_for(kube_env, job_api)
    async with scheduler(kube_env) as sched:
        bad_image = make_app("echo x")
        bad_image.roles[0].image = "registry.example/does-not-exist:1"
        too_big = make_app("echo x")
        too_big.roles[0].resource = Resource(cpu=1000, gpu=0, memMB=128)
        pull_id = await sched.submit(bad_image, cfg)
        big_id = await sched.submit(too_big, cfg)
        state, message = await _replica_reason(sched, pull_id, StatusReason.IMAGE_PULL)
        assert state in (AppState.PENDING, AppState.SUBMITTED)
        assert "does-not-exist" in message
        state, message = await _replica_reason(
            sched, big_id, StatusReason.UNSCHEDULABLE
        )
        assert state in (AppState.PENDING, AppState.SUBMITTED)
        assert "Insufficient cpu" in message
        desc = await sched.describe(big_id)
        assert desc is not None
        assert desc.reason == StatusReason.UNSCHEDULABLE
