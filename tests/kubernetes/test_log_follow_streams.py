"""Followed logs: their own connection pool, no polling while a pod is
Pending, and a bounded retry of 429/5xx answers."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from kubernetes_asyncio import client, config

from asyncsched.schedulers.kubernetes._client import KubernetesApiError
from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler
from asyncsched.specs import AppState
from asyncsched.testing import wait_for_state

from .fakeapi.controller import FakeController
from .fakeapi.env import KubeEnv
from .helpers import cfg_for, make_app, scheduler

#: connections of the ordinary-request pool in the starvation test
POOL = 4


async def _small_pool_client(env: KubeEnv) -> client.ApiClient:
    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=env.kubeconfig,
        context=env.context,
        client_configuration=configuration,
        persist_config=False,
    )
    configuration.connection_pool_maxsize = POOL
    return client.ApiClient(configuration=configuration)


async def test_more_followers_than_the_pool_holds_do_not_block_requests(
    kube_env: KubeEnv, kube_controller: FakeController
) -> None:
    if not kube_env.logs_available:
        pytest.skip("pods cannot run on this API server")
    followers = POOL + 2
    api = await _small_pool_client(kube_env)
    try:
        async with KubernetesScheduler(
            "k8s-test", client=api, namespace=kube_env.namespace
        ) as sched:
            cfg = cfg_for(kube_env, "volcano")
            app_id = await sched.submit(
                make_app("echo tick; sleep 60", replicas=followers), cfg
            )
            ticks = 0
            async with anyio.create_task_group() as tg:

                async def follow(k: int) -> None:
                    nonlocal ticks
                    async for line in sched.log_iter(
                        app_id, "worker", k, should_tail=True
                    ):
                        assert line == "tick\n"
                        ticks += 1

                for k in range(followers):
                    tg.start_soon(follow, k)
                with anyio.fail_after(30):
                    while ticks < followers:  # every follower holds a stream
                        await anyio.sleep(0.05)
                # the user's configuration is left as it was
                assert api.configuration.connection_pool_maxsize == POOL
                # ordinary requests still get a connection at once
                with anyio.fail_after(15):
                    other = await sched.submit(make_app("echo other"), cfg)
                    assert await sched.describe(f"{kube_env.namespace}:nope") is None
                    await sched.cancel(other)
                    await sched.cancel(app_id)
                tg.cancel_scope.cancel()
    finally:
        await api.close()


@pytest.mark.fake_api
async def test_a_log_answered_503_once_is_read_on_retry(
    kube_env: KubeEnv, kube_controller: FakeController
) -> None:
    server = kube_env.fake_server()
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(
            make_app("echo hello"), cfg_for(kube_env, "volcano")
        )
        status = await sched.wait(app_id, timeout=30)
        assert status is not None
        assert status.state == AppState.SUCCEEDED
        server.requests.reset()
        server.faults.fail_next(503, resource="pods/log")
        lines = [line async for line in sched.log_iter(app_id, "worker")]
    assert lines == ["hello\n"]
    assert server.requests.count("log", "pods/log") == 2


@pytest.mark.fake_api
async def test_a_followed_log_answered_429_waits_its_retry_after(
    kube_env: KubeEnv, kube_controller: FakeController
) -> None:
    server = kube_env.fake_server()
    async with scheduler(kube_env) as sched:
        server.faults.fail_next(429, resource="pods/log", retry_after=1)
        app_id = await sched.submit(
            make_app("echo one; echo two"), cfg_for(kube_env, "volcano")
        )
        with anyio.fail_after(30):
            lines = [
                line
                async for line in sched.log_iter(app_id, "worker", should_tail=True)
            ]
    assert lines == ["one\n", "two\n"]


@pytest.mark.fake_api
async def test_a_log_refused_with_5xx_again_and_again_gives_up(
    kube_env: KubeEnv, kube_controller: FakeController
) -> None:
    server = kube_env.fake_server()
    async with scheduler(kube_env, max_retries=2) as sched:
        app_id = await sched.submit(
            make_app("echo hello"), cfg_for(kube_env, "volcano")
        )
        await sched.wait(app_id, timeout=30)
        server.requests.reset()
        server.faults.fail_next(500, resource="pods/log", times=100)
        with pytest.raises(KubernetesApiError, match="500"):
            async for _ in sched.log_iter(app_id, "worker"):
                pass
    assert server.requests.count("log", "pods/log") == 3  # 1 + max_retries


@pytest.mark.fake_api
async def test_a_pending_pod_is_not_polled_for_its_log(
    kube_env: KubeEnv, tmp_path: Path
) -> None:
    server = kube_env.fake_server()
    # the kubelet takes seconds to start the container: the pod stays Pending
    async with (
        FakeController(kube_env.kubeconfig, kube_env.namespace, start_delay=3.0),
        scheduler(kube_env) as sched,
    ):
        app_id = await sched.submit(
            make_app("echo started; sleep 60"), cfg_for(kube_env, "volcano")
        )
        lines = sched.log_iter(app_id, "worker", should_tail=True)
        with anyio.fail_after(30):
            assert await anext(lines) == "started\n"
        # one request: the follow opened once the cache saw the container run
        assert server.requests.count("log", "pods/log") == 1
        await lines.aclose()
        await sched.cancel(app_id)


@pytest.mark.fake_api
async def test_a_follow_of_a_pod_that_never_starts_ends_when_the_app_does(
    kube_env: KubeEnv, kube_controller: FakeController
) -> None:
    server = kube_env.fake_server()
    async with scheduler(kube_env) as sched:
        app = make_app("echo never")
        app.roles[0].image = "registry.example/does-not-exist:1"
        app_id = await sched.submit(app, cfg_for(kube_env, "volcano"))
        got: list[str] = []
        done = anyio.Event()

        async def follow() -> None:
            lines = sched.log_iter(app_id, "worker", should_tail=True)
            got.extend([line async for line in lines])
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(follow)
            # the pod waits on its image for ever
            await wait_for_state(
                sched, app_id, lambda d: "ImagePull" in d.msg, timeout=15
            )
            await sched.cancel(app_id)
            with anyio.fail_after(15):
                await done.wait()
    assert got == []
    # at most the last plain read once the pod ended: no polling meanwhile
    assert server.requests.count("log", "pods/log") <= 1
