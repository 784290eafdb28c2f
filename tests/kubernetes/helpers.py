"""Shared pieces of the Kubernetes backend tests (not fixtures: see conftest)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Collection
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from asyncsched import AppEvent, EventKind
from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler
from asyncsched.specs import AppDef, CfgVal, Resource, Role

from .fakeapi.controller import KUBELET_SLEEP
from .fakeapi.env import KubeEnv
from .fakeapi.kinds import KINDS
from .fakeapi.server import WATCH_LAG

IMAGE = "busybox:1.36"
JOB_APIS = ("volcano", "indexed")


#: the fake server's kind of Volcano Jobs
VOLCANO_JOBS = KINDS[("batch.volcano.sh", "v1alpha1", "jobs")]


def make_app(
    script: str, *, replicas: int = 1, name: str = "app", retries: int = 0
) -> AppDef:
    """One role ``worker`` running ``sh -c script`` (``retries``: its
    ``max_retries``)."""
    return AppDef(
        name,
        roles=[
            Role(
                "worker",
                image=IMAGE,
                entrypoint="sh",
                args=["-c", script],
                num_replicas=replicas,
                max_retries=retries,
                resource=Resource(cpu=1, gpu=0, memMB=128),
            )
        ],
    )


def cfg_for(env: KubeEnv, job_api: str) -> dict[str, CfgVal]:
    """The run cfg of a test; skips ``indexed`` where the server has no Indexed Jobs."""
    if job_api == "indexed" and not env.indexed_jobs:
        skip_without_indexed_jobs()
    return {
        "namespace": env.namespace,
        "queue": "default",
        "job_api": job_api,
        **env.run_cfg,
    }


def skip_without_indexed_jobs() -> None:
    pytest.skip(
        "Kubernetes 1.20 has no Indexed Jobs nor Job suspend (1.21+):"
        " job_api=indexed is refused there (see test_realcluster.py)"
    )


async def let_sleeps_end(env: KubeEnv, sleepers: int, *steps: float) -> None:
    """In a ``manual_clock`` test on the fake server: wait until ``sleepers``
    containers run ``sleep``, then move the clock on by each of ``steps`` in
    turn (each wakes the sleeps due by then). Elsewhere real time does it:
    returns at once."""
    clock = env.clock
    if clock is None:
        return
    await clock.wait_sleepers(sleepers, KUBELET_SLEEP)
    for seconds in steps:
        await clock.advance(seconds)


async def volcano_phase_reached(
    env: KubeEnv, app_id: str, phases: Collection[str], timeout: float = 30
) -> None:
    """On the fake server: wait until the Volcano Job of ``app_id`` is in one
    of ``phases`` as the server stores it (woken by each change it stores)."""
    store = env.fake_server().store
    name = app_id.partition(":")[2]
    with anyio.fail_after(timeout):
        while True:
            job = store.get(VOLCANO_JOBS, env.namespace, name) or {}
            if (job.get("status") or {}).get("state", {}).get("phase") in phases:
                return
            await store.changed.wait()


async def deliver_lagging_watches(env: KubeEnv, lag: float) -> None:
    """On the fake server's manual clock: let the watches a
    ``faults.delay_watch(..., lag)`` holds back deliver, one lag at a time
    (until cancelled)."""
    clock = env.clock
    assert clock is not None
    while True:
        await clock.wait_sleepers(1, WATCH_LAG, timeout=600)
        await clock.advance(lag)


@asynccontextmanager
async def scheduler(env: KubeEnv, **kwargs: Any) -> AsyncIterator[KubernetesScheduler]:
    kwargs.setdefault("namespace", env.namespace)
    async with KubernetesScheduler(
        "k8s-test", kubeconfig=env.kubeconfig, context=env.context, **kwargs
    ) as sched:
        yield sched


async def events_until(
    sched: KubernetesScheduler,
    since: str | None,
    done: Callable[[AppEvent], bool],
    timeout: float = 30,
) -> list[AppEvent]:
    """Events from ``since`` up to and including the first ``done`` one."""
    got: list[AppEvent] = []
    with anyio.fail_after(timeout):
        async with sched.events(since=since) as stream:
            async for event in stream:
                got.append(event)
                if done(event):
                    return got
    raise AssertionError(f"stream ended before the awaited event: {got}")


def app_ended(app_id: str) -> Callable[[AppEvent], bool]:
    """The app's own terminal change (a replica's change that ends the app
    comes first, with a cursor that replays the whole change)."""
    return lambda e: e.app_id == app_id and e.kind == EventKind.APP and e.terminal


async def expired_watch_status(core: Any, namespace: str, version: str) -> Any:
    """The Status of the ERROR event that a watch of ``namespace``'s pods from
    ``version`` starts with, checked to be 410 Expired (``core``: CoreV1Api)."""
    resp = await core.list_namespaced_pod(
        namespace, watch=True, resource_version=version, _preload_content=False
    )
    try:
        line = json.loads(await resp.content.readline())
    finally:
        resp.release()
    assert line["type"] == "ERROR", line
    status = line["object"]
    assert (status["code"], status["reason"]) == (410, "Expired"), status
    return status
