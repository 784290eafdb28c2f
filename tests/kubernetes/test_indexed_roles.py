"""Indexed apps with several roles: a failed role stops the others.

Each role is its own batch/v1 Job; without gang scheduling nothing on the
cluster stops the other roles when one fails, so their pods would keep their
nodes (and GPUs) until they end on their own.
"""

from __future__ import annotations

import anyio
import pytest
from kubernetes_asyncio import client

from asyncsched.specs import AppDef, AppState, Resource, Role

from .fakeapi.env import KubeEnv
from .helpers import IMAGE, cfg_for, scheduler

pytestmark = pytest.mark.usefixtures("kube_controller")


def _role(name: str, script: str) -> Role:
    return Role(
        name,
        image=IMAGE,
        entrypoint="sh",
        args=["-c", script],
        resource=Resource(cpu=1, gpu=0, memMB=128),
    )


async def test_a_failed_role_suspends_the_roles_still_running(
    kube_env: KubeEnv,
) -> None:
    app = AppDef(
        "two", roles=[_role("fails", "sleep 0.5; exit 2"), _role("slow", "sleep 60")]
    )
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(app, cfg_for(kube_env, "indexed"))
        final = await sched.wait(app_id, timeout=30)
        assert final is not None
        assert final.state == AppState.FAILED
    async with await kube_env.api_client() as api:
        batch = client.BatchV1Api(api)
        with anyio.fail_after(15):
            while True:
                jobs = (
                    await batch.list_namespaced_job(
                        kube_env.namespace,
                        label_selector="asyncsched.io/role-name=slow",
                    )
                ).items
                if jobs and all(j.spec.suspend for j in jobs):
                    break
                await anyio.sleep(0.1)
