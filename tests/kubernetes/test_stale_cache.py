"""A refused re-list does not make live apps vanish.

Real clusters answer a re-list 401/403/404 for a moment (RBAC propagation,
an authorizer webhook blip, a token rotation, a CRD re-install). Once a list
has succeeded the caches keep what they knew, marked stale, and lookups read
the objects by GET meanwhile: only a 404 on the object itself means it is gone.
"""

from __future__ import annotations

import anyio
import pytest

from asyncsched.specs import AppState
from asyncsched.testing import wait_for_state

from .fakeapi.env import KubeEnv
from .helpers import JOB_APIS, cfg_for, make_app, scheduler

pytestmark = pytest.mark.usefixtures("kube_controller")


@pytest.mark.fake_api
@pytest.mark.parametrize("job_api", JOB_APIS)
async def test_apps_survive_a_refused_relist(kube_env: KubeEnv, job_api: str) -> None:
    server = kube_env.fake_server()
    faults, requests = server.faults, server.requests
    async with scheduler(kube_env, resync=1.0) as sched:
        await sched.list()  # the caches run (a describe alone starts none)
        app_id = await sched.submit(
            make_app("sleep 2; echo done"), cfg_for(kube_env, job_api)
        )
        await wait_for_state(sched, app_id, AppState.RUNNING)
        lists = requests.count("list", "jobs")
        faults.fail_next(403, verb="list", resource="jobs", times=1_000_000)
        with anyio.fail_after(15):  # both job caches had a re-list refused
            while requests.count("list", "jobs") < lists + 4:
                await anyio.sleep(0.05)
        desc = await sched.describe(app_id)
        assert desc is not None
        assert desc.state in (AppState.RUNNING, AppState.SUCCEEDED)
        assert app_id in [a.app_id for a in await sched.list()]
        final = await sched.wait(app_id, timeout=30)
        assert final is not None
        assert final.state == AppState.SUCCEEDED
        # gone for real: the GET of the object answers 404
        await sched.delete(app_id)
        with anyio.fail_after(15):
            while await sched.describe(app_id) is not None:
                await anyio.sleep(0.1)


@pytest.mark.fake_api
async def test_delete_returns_at_once_while_a_relist_is_refused(
    kube_env: KubeEnv,
) -> None:
    server = kube_env.fake_server()
    faults, requests = server.faults, server.requests
    async with scheduler(kube_env, resync=1.0) as sched:
        await sched.list()  # the caches run
        app_id = await sched.submit(make_app("sleep 30"), cfg_for(kube_env, "indexed"))
        await wait_for_state(sched, app_id, AppState.RUNNING)
        lists = requests.count("list", "jobs")
        faults.fail_next(403, verb="list", resource="jobs", times=1_000_000)
        with anyio.fail_after(15):  # both job caches had a re-list refused
            while requests.count("list", "jobs") < lists + 4:
                await anyio.sleep(0.05)
        # no watch runs to confirm the deletion: delete does not wait for one
        with anyio.fail_after(5):
            await sched.delete(app_id)
        assert await sched.describe(app_id) is None
