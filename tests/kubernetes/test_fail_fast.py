"""Fail-fast on Volcano: a replica that fails for good stops its siblings
(default), or lets them run to their end with ``fail_fast=False``."""

from __future__ import annotations

import pytest

from asyncsched.specs import AppDef, AppState, Resource, Role, StatusReason

from .fakeapi.env import KubeEnv
from .helpers import IMAGE, cfg_for, scheduler

pytestmark = pytest.mark.usefixtures("kube_controller")


def _app(long_seconds: int) -> AppDef:
    """Role ``bad`` fails once both run (Volcano starts the gang together)."""

    def role(name: str, script: str) -> Role:
        return Role(
            name,
            image=IMAGE,
            entrypoint="sh",
            args=["-c", script],
            resource=Resource(cpu=1, gpu=0, memMB=128),
        )

    return AppDef(
        "ff",
        roles=[role("bad", "sleep 2; exit 3"), role("long", f"sleep {long_seconds}")],
    )


async def test_a_failed_replica_stops_its_siblings(kube_env: KubeEnv) -> None:
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(_app(300), cfg_for(kube_env, "volcano"))
        desc = await sched.wait(app_id, timeout=120)
    assert desc is not None
    assert desc.state == AppState.FAILED
    assert desc.msg == "replica bad/0 exited with code 3"
    [failed], [sibling] = (role.replicas for role in desc.roles_statuses)
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
            _app(6), {**cfg_for(kube_env, "volcano"), "fail_fast": False}
        )
        desc = await sched.wait(app_id, timeout=120)
    assert desc is not None
    assert desc.state == AppState.FAILED
    states = [
        (r.state, r.exit_code) for role in desc.roles_statuses for r in role.replicas
    ]
    assert states == [(AppState.FAILED, 3), (AppState.SUCCEEDED, 0)]
