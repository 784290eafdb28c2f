"""A Kubernetes reader that stops inside the CURRENT burst resumes without a gap."""

from __future__ import annotations

import pytest

from asyncsched.specs import AppState
from tests.events.burst import check_resume_inside_burst

from .fakeapi.env import KubeEnv
from .helpers import cfg_for, make_app, scheduler

pytestmark = [pytest.mark.usefixtures("kube_controller"), pytest.mark.fake_api]


async def test_resuming_from_a_current_event_but_the_last_sends_every_app_again(
    kube_env: KubeEnv,
) -> None:
    cfg = cfg_for(kube_env, "volcano")
    async with scheduler(kube_env) as sched:
        ids = [
            await sched.submit(make_app("exit 0", name=f"burst{i}"), cfg)
            for i in range(3)
        ]
        for app_id in ids:
            await sched.wait(app_id, timeout=30)
        states = dict.fromkeys(ids, AppState.SUCCEEDED)

        async def submit() -> str:
            return await sched.submit(make_app("exit 0", name="later"), cfg)

        await check_resume_inside_burst(sched, states, submit, k=2)
