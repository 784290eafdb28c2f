"""What the caches cost: a one-shot lookup opens none, lists come in pages,
cached objects are slim, finished apps leave the cache after a while.

A ``describe`` (a CLI ``status``) with no cache running reads the app with a
GET (or a labelled list) instead of listing and watching the namespace; the
first ``wait``/``list`` starts the caches, which then stay. Lists are
paginated and a continue token that expired restarts the list. The caches
hold no ``managedFields`` nor pod specs. An app finished for longer than the
retention is read from the server again, and ``list`` still shows it.
"""

from __future__ import annotations

import time

import anyio
import pytest

from asyncsched.schedulers.kubernetes import KubernetesScheduler
from asyncsched.specs import AppState
from asyncsched.testing import wait_for_state

from .fakeapi.env import KubeEnv
from .helpers import JOB_APIS, cfg_for, make_app, scheduler

pytestmark = pytest.mark.usefixtures("kube_controller")


def _live(sched: KubernetesScheduler, env: KubeEnv) -> bool:
    return sched._registry.running(env.namespace) is not None


@pytest.mark.fake_api
@pytest.mark.parametrize("job_api", JOB_APIS)
async def test_a_one_shot_describe_opens_no_watch_and_lists_nothing_whole(
    kube_env: KubeEnv, job_api: str
) -> None:
    requests = kube_env.fake_server().requests
    async with scheduler(kube_env) as submitter:
        app_id = await submitter.submit(make_app("echo hi"), cfg_for(kube_env, job_api))
        assert await submitter.wait(app_id, timeout=20) is not None
    async with scheduler(kube_env) as sched:  # a fresh process: `status`
        requests.reset()
        desc = await sched.describe(app_id)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
        assert [r.exit_code for r in desc.roles_statuses[0].replicas] == [0]
        assert requests.count("watch") == 0
        assert not _live(sched, kube_env)
        # one GET or labelled list per kind read, not three namespace lists
        assert requests.count("get") + requests.count("list") <= 3, requests.snapshot()
        assert await sched.describe(f"{kube_env.namespace}:no-such-app") is None
        assert requests.count("watch") == 0


@pytest.mark.fake_api
async def test_wait_starts_the_caches_once_and_they_stay(kube_env: KubeEnv) -> None:
    requests = kube_env.fake_server().requests
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(make_app("sleep 0.5"), cfg_for(kube_env, "volcano"))
        assert not _live(sched, kube_env)  # submit starts no cache
        final = await sched.wait(app_id, timeout=20)
        assert final is not None
        assert final.state == AppState.SUCCEEDED
        assert _live(sched, kube_env)
        assert requests.count("watch") >= 3
        before = requests.count("get") + requests.count("list")
        assert await sched.describe(app_id) is not None  # from the cache now
        assert requests.count("get") + requests.count("list") == before


@pytest.mark.fake_api
async def test_lists_come_in_pages_and_restart_when_the_token_expired(
    kube_env: KubeEnv,
) -> None:
    server = kube_env.fake_server()
    async with scheduler(kube_env, list_page_size=2) as sched:
        ids = [
            await sched.submit(make_app("echo hi"), cfg_for(kube_env, "volcano"))
            for _ in range(5)
        ]
        server.expire_next_continue()  # the versions were compacted mid-list
        server.requests.reset()
        listed = {a.app_id for a in await sched.list()}
        assert set(ids) <= listed
        # jobs: 3 pages, the second refused (410) and the list started over
        assert server.requests.count("list", "jobs", group="batch.volcano.sh") >= 5
        assert server.expire_continues_left == 0


@pytest.mark.parametrize("job_api", JOB_APIS)
async def test_cached_objects_keep_only_what_status_reads(
    kube_env: KubeEnv, job_api: str
) -> None:
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(make_app("echo hi"), cfg_for(kube_env, job_api))
        final = await sched.wait(app_id, timeout=20)
        assert final is not None
        assert final.state == AppState.SUCCEEDED
        # the server's objects carry managedFields and the whole pod spec ...
        stored = kube_env.fake_server().store.objects.values()
        assert all(o["metadata"].get("managedFields") for o in stored)
        # ... the cache keeps none of it
        ns = sched._registry.running(kube_env.namespace)
        assert ns is not None
        cached = [*ns.volcano.objects.values(), *ns.batch.objects.values()]
        pods = list(ns.pods.objects.values())
        assert cached
        assert pods
        for obj in [*cached, *pods]:
            assert "managedFields" not in obj["metadata"]
        for pod in pods:
            assert [set(c) for c in pod["spec"]["containers"]] == [{"name"}]
            assert "volumes" not in pod["spec"]
            assert pod["status"]["phase"] == "Succeeded"


@pytest.mark.parametrize("job_api", JOB_APIS)
async def test_finished_apps_leave_the_cache_but_not_describe_nor_list(
    kube_env: KubeEnv, job_api: str
) -> None:
    async with scheduler(kube_env, cache_retention=0.5) as sched:
        app_id = await sched.submit(
            make_app("echo hi", replicas=2), cfg_for(kube_env, job_api)
        )
        final = await sched.wait(app_id, timeout=20)
        assert final is not None
        assert final.state == AppState.SUCCEEDED
        ns = sched._registry.running(kube_env.namespace)
        assert ns is not None
        with anyio.fail_after(10):
            while ns.pods.with_key(app_id):  # its pods left the cache
                await anyio.sleep(0.05)
        assert ns.is_expired(app_id)
        desc = await sched.describe(app_id)  # read from the server again
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
        assert [r.exit_code for r in desc.roles_statuses[0].replicas] == [0, 0]
        assert (await sched.wait(app_id, timeout=5)) == desc
        listed = {a.app_id: a.state for a in await sched.list()}
        assert listed[app_id] == AppState.SUCCEEDED
        # a live app is never expired, however old the sweep believes it is
        other = await sched.submit(make_app("sleep 30"), cfg_for(kube_env, job_api))
        await wait_for_state(sched, other, AppState.RUNNING, timeout=20)
        ns.sweep(
            0.0, lambda kind, jobs: AppState.SUCCEEDED, now=time.monotonic() + 3600
        )
        assert not ns.is_expired(other)
        await sched.cancel(other)
        # wait returns once the pod has stopped: a real kubelet gives a PID 1
        # that ignores SIGTERM its 30 s grace
        assert (await sched.wait(other, timeout=60)) is not None
        # gone from the server: gone from list
        await sched.delete(app_id)
        with anyio.fail_after(10):
            while app_id in {a.app_id for a in await sched.list()}:
                await anyio.sleep(0.05)
        assert await sched.describe(app_id) is None


@pytest.mark.fake_api
async def test_reconnects_outside_the_watch_window_relist_and_wait_finishes(
    kube_env: KubeEnv,
) -> None:
    server = kube_env.fake_server()
    # a reconnect from before the last write gets 410 (the caches re-list)
    server.store.watch_window = 0.0
    async with scheduler(kube_env, watch_timeout=1) as sched:
        app_id = await sched.submit(
            make_app("sleep 2.5; exit 3"), cfg_for(kube_env, "volcano")
        )
        final = await sched.wait(app_id, timeout=30)
    assert final is not None
    assert final.state == AppState.FAILED
    assert [r.exit_code for r in final.roles_statuses[0].replicas] == [3]


@pytest.mark.parametrize("job_api", JOB_APIS)
async def test_ttl_after_finished_has_the_cluster_delete_the_app(
    kube_env: KubeEnv, job_api: str
) -> None:
    cfg = {**cfg_for(kube_env, job_api), "ttl_seconds_after_finished": 1}
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(make_app("echo hi"), cfg)
        final = await sched.wait(app_id, timeout=20)
        assert final is not None
        assert final.state == AppState.SUCCEEDED
        with anyio.fail_after(15):  # deleted by the cluster, pods with it
            while await sched.describe(app_id) is not None:
                await anyio.sleep(0.1)
        assert app_id not in {a.app_id for a in await sched.list()}
