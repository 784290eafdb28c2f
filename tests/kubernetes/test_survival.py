"""The backend keeps the right answer when the API server misbehaves.

Faults come from the fake server's hooks (410 Expired watches, streams cut
mid-way, 500 bursts, 429 with Retry-After); the assertions are what a user
sees: ``wait`` returns the right final state, ``submit`` succeeds.
"""

from __future__ import annotations

import time

import anyio
import pytest
from kubernetes_asyncio import client

from asyncsched.errors import SubmitError
from asyncsched.schedulers.kubernetes._logs import _Position
from asyncsched.specs import AppState

from .fakeapi.env import KubeEnv
from .fakeapi.faults import Faults, RequestLog
from .helpers import cfg_for, make_app, scheduler

pytestmark = pytest.mark.usefixtures("kube_controller")


def fake_only(env: KubeEnv) -> tuple[Faults, RequestLog]:
    if env.faults is None or env.requests is None:
        pytest.skip("needs the fake server's fault hooks and request counters")
    return env.faults, env.requests


@pytest.mark.fake_api
@pytest.mark.parametrize("abrupt", [True, False], ids=["reset", "clean-eof"])
async def test_wait_survives_dropped_watches_then_expired_versions(
    kube_env: KubeEnv, abrupt: bool
) -> None:
    faults, requests = fake_only(kube_env)
    for _ in range(3):  # each cache's first watch is cut after one event ...
        faults.drop_next_watch(after_events=1, abrupt=abrupt)
    faults.expire_next_watch(times=3)  # ... and its reconnect finds 410 Gone
    async with scheduler(kube_env) as sched:
        # both replicas run to their own end (no fail-fast stop of the second)
        app_id = await sched.submit(
            make_app("echo a; sleep 0.5; exit 4", replicas=2),
            {**cfg_for(kube_env, "volcano"), "fail_fast": False},
        )
        desc = await sched.wait(app_id, timeout=20)
    assert desc is not None
    assert desc.state == AppState.FAILED
    assert [r.exit_code for r in desc.roles_statuses[0].replicas] == [4, 4]
    assert faults.drops == []
    assert faults.expire_watches == 0
    # each 410 makes a cache list again instead of retrying the stale version:
    # 3 first lists + one per expired watch
    assert requests.count("list") >= 3 + 3


@pytest.mark.fake_api
async def test_watch_expiring_mid_wait_relists_and_wait_finishes(
    kube_env: KubeEnv,
) -> None:
    faults, requests = fake_only(kube_env)
    # 1-second watches: the next reconnects happen while we wait
    async with scheduler(kube_env, watch_timeout=1) as sched:
        app_id = await sched.submit(
            make_app("sleep 1.5; echo done"), cfg_for(kube_env, "indexed")
        )
        lists_before = requests.count("list")
        faults.expire_next_watch(times=3)
        desc = await sched.wait(app_id, timeout=20)
    assert desc is not None
    assert desc.state == AppState.SUCCEEDED
    assert faults.expire_watches == 0
    assert requests.count("list") > lists_before


@pytest.mark.fake_api
async def test_500_burst_is_retried(kube_env: KubeEnv) -> None:
    faults, _ = fake_only(kube_env)
    faults.fail_next(500, verb="list", times=2)
    faults.fail_next(503, verb="create", times=2)
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(make_app("echo ok"), cfg_for(kube_env, "volcano"))
        desc = await sched.wait(app_id, timeout=20)
    assert desc is not None
    assert desc.state == AppState.SUCCEEDED
    assert faults.rules == []


@pytest.mark.fake_api
async def test_429_is_retried_after_retry_after(kube_env: KubeEnv) -> None:
    faults, requests = fake_only(kube_env)
    async with scheduler(kube_env) as sched:
        await sched.list()  # caches up
        faults.fail_next(429, verb="create", retry_after=1)
        started = time.monotonic()
        app_id = await sched.submit(make_app("echo ok"), cfg_for(kube_env, "volcano"))
        waited = time.monotonic() - started
        desc = await sched.wait(app_id, timeout=20)
    assert desc is not None
    assert desc.state == AppState.SUCCEEDED
    assert requests.count("create", "jobs") == 2
    assert waited >= 0.9  # the server asked for one second


@pytest.mark.fake_api
async def test_waiting_on_many_apps_costs_no_requests_per_app(
    kube_env: KubeEnv,
) -> None:
    _, requests = fake_only(kube_env)
    n = 12
    async with scheduler(kube_env) as sched:
        ids = [
            await sched.submit(make_app("sleep 0.8"), cfg_for(kube_env, "volcano"))
            for _ in range(n)
        ]
        before = requests.snapshot()
        results = {}

        async def wait_one(app_id: str) -> None:
            results[app_id] = await sched.wait(app_id, timeout=20)

        async with anyio.create_task_group() as tg:
            for app_id in ids:
                tg.start_soon(wait_one, app_id)
        after = requests.snapshot()
    assert all(
        d is not None and d.state == AppState.SUCCEEDED for d in results.values()
    )
    spent = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    reads = sum(v for k, v in spent.items() if k.split()[0] in ("get", "list"))
    # everything came from the open watches: no get/list per app
    assert reads < n / 2, spent


def test_resumed_stream_skips_lines_already_yielded() -> None:
    pos = _Position(since=None)
    pos.begin()
    assert [pos.accept(ts) for ts in (10, 20, 20)] == [True, True, True]
    # the stream drops; the resumed one starts over at second 20's lines
    pos.begin()
    assert [pos.accept(ts) for ts in (20, 20, 20, 30)] == [
        False,
        False,
        True,
        True,
    ]


@pytest.mark.fake_api
@pytest.mark.parametrize("status", [403, 500])
async def test_refused_watch_reconnects_and_wait_finishes(
    kube_env: KubeEnv, status: int
) -> None:
    faults, _ = fake_only(kube_env)
    async with scheduler(kube_env, watch_timeout=1) as sched:
        await sched.list()  # caches up; their watches end after a second
        faults.fail_next(status, verb="watch", times=3)
        app_id = await sched.submit(
            make_app("sleep 1.2; echo done"), cfg_for(kube_env, "volcano")
        )
        desc = await sched.wait(app_id, timeout=20)
    assert desc is not None
    assert desc.state == AppState.SUCCEEDED
    assert faults.rules == []  # every refusal was met, and survived


@pytest.mark.fake_api
async def test_retried_create_that_had_landed_is_not_a_conflict(
    kube_env: KubeEnv,
) -> None:
    faults, _ = fake_only(kube_env)
    async with scheduler(kube_env) as sched:
        info = await sched.submit_dryrun(
            make_app("echo x"), cfg_for(kube_env, "volcano")
        )
        # the first create lands but its answer is lost: emulated by creating
        # the very manifest first and failing the scheduler's first attempt
        async with await kube_env.api_client() as api:
            await client.CustomObjectsApi(api).create_namespaced_custom_object(
                "batch.volcano.sh",
                "v1alpha1",
                kube_env.namespace,
                "jobs",
                info.request.manifests[0],
            )
        faults.fail_next(504, verb="create", resource="jobs")
        app_id = await sched.schedule(info)
        desc = await sched.wait(app_id, timeout=20)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
        # a genuine duplicate submission is still refused
        with pytest.raises(SubmitError, match="already exists"):
            await sched.schedule(info)


@pytest.mark.fake_api
async def test_cancelled_submit_leaves_nothing_behind(kube_env: KubeEnv) -> None:
    faults, requests = fake_only(kube_env)
    # the delete that undoes the Service waits for the throttle: max_hold
    async with scheduler(kube_env, max_hold=0.5) as sched:
        await sched.list()
        # the Service is made, then the Job create is told to come back in 30 s
        faults.fail_next(429, verb="create", resource="jobs", retry_after=30)
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(
                    sched.submit, make_app("echo x"), cfg_for(kube_env, "indexed")
                )
                while requests.count("create", "jobs") < 1:
                    await anyio.sleep(0.01)
                tg.cancel_scope.cancel()
        assert await sched.list() == []
    async with await kube_env.api_client() as api:
        services = await client.CoreV1Api(api).list_namespaced_service(
            kube_env.namespace
        )
    assert services.items == []
    assert requests.count("delete", "services") == 1
