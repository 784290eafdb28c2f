"""The fake API server's clock: a test moves time instead of waiting it out."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes_asyncio import watch

from asyncsched.specs import AppState

from .fakeapi.clock import ManualClock
from .fakeapi.controller import KUBELET_SLEEP
from .fakeapi.env import KubeEnv
from .fakeapi.untyped import CoreV1Api
from .helpers import cfg_for, make_app, scheduler


async def test_sleepers_wake_in_deadline_order_only_when_advanced() -> None:
    clock = ManualClock()
    woke: list[str] = []

    async def nap(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append(name)

    tasks = [asyncio.create_task(nap(n, s)) for n, s in (("b", 20), ("a", 10))]
    await clock.wait_sleepers(2)
    await clock.advance(9.5)
    assert woke == []
    await clock.advance(1)
    assert woke == ["a"]
    await clock.advance(10)
    assert woke == ["a", "b"]
    await asyncio.gather(*tasks)


async def test_wait_for_times_out_when_the_clock_passes_the_timeout() -> None:
    clock = ManualClock()
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    waiting = asyncio.create_task(clock.wait_for(never, 5))
    await clock.wait_sleepers(1)
    assert not waiting.done()
    await clock.advance(5)
    with pytest.raises(TimeoutError):
        await waiting
    assert never.cancelled()


@pytest.mark.fake_api
@pytest.mark.manual_clock
async def test_a_watch_ends_at_its_timeout_seconds_of_the_servers_clock(
    kube_env: KubeEnv,
) -> None:
    clock = kube_env.fake_server().clock
    assert isinstance(clock, ManualClock)
    ended = asyncio.Event()

    async def follow(core: Any) -> None:
        async with watch.Watch() as w:
            async for _ in w.stream(
                core.list_namespaced_pod,
                kube_env.namespace,
                resource_version="1",
                timeout_seconds=3600,
            ):
                pass
        ended.set()

    async with await kube_env.api_client() as api:
        task = asyncio.create_task(follow(CoreV1Api(api)))
        # the stream waits for an event or its timeout: on the manual clock
        await clock.wait_sleepers(1)
        assert not ended.is_set()
        await clock.advance(3600)
        await asyncio.wait_for(ended.wait(), 30)
        await task


@pytest.mark.fake_api
@pytest.mark.manual_clock
@pytest.mark.usefixtures("kube_controller")
async def test_an_hour_long_replica_ends_when_the_clock_moves_an_hour(
    kube_env: KubeEnv,
) -> None:
    clock = kube_env.fake_server().clock
    assert isinstance(clock, ManualClock)
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(
            make_app("sleep 3600; echo done"), cfg_for(kube_env, "volcano")
        )
        async with sched.events([app_id]) as stream:
            async for event in stream:
                if event.state == AppState.RUNNING:
                    break
        await clock.wait_sleepers(1, KUBELET_SLEEP)  # the replica's "sleep 3600"
        await clock.advance(3600)
        final = await sched.wait(app_id, timeout=60)
    assert final is not None
    assert final.state == AppState.SUCCEEDED
