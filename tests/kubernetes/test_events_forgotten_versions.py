"""Kubernetes events resumed from a cursor whose versions the server forgot.

A reader saves its cursor and stops; apps then end, fail with a code and are
cancelled while no reader runs; then the server forgets those versions: on
the test cluster etcd is compacted at its current revision and the API
server restarted (its new watch cache starts empty), on the fake the history
is compacted. A reader resumed from the old cursor is told so: RESYNC, then
CURRENT of every app with its terminal state and its failed replica's exit
code (no silent gap), then live changes. Both servers answer a forgotten
version alike: 410 Expired as the HTTP status of an exact list, and as an
ERROR event in the stream of a watch.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from kubernetes_asyncio import client

from asyncsched import AppEvent, EventKind
from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler
from asyncsched.specs import AppState

from .fakeapi.env import KubeEnv
from .helpers import cfg_for, make_app, scheduler

pytestmark = pytest.mark.usefixtures("kube_controller")

#: seconds to wait for what a stream should tell (pods start one after the
#: other on the real test node, on a machine shared by several test runs)
WAIT = 120


async def _until(
    sched: KubernetesScheduler, since: str | None, done: Callable[[AppEvent], bool]
) -> list[AppEvent]:
    """Events from ``since`` up to and including the first ``done`` one."""
    got: list[AppEvent] = []
    with anyio.fail_after(WAIT):
        async with sched.events(since=since) as stream:
            async for event in stream:
                got.append(event)
                if done(event):
                    return got
    raise AssertionError(f"stream ended before the awaited event: {got}")


def _ends(event: AppEvent, app_id: str) -> bool:
    """The app's own terminal change (its replica's may come first)."""
    return event.app_id == app_id and event.kind == EventKind.APP and event.terminal


async def _version_now(env: KubeEnv) -> str:
    """The server's resourceVersion now (a list of the namespace's pods)."""
    async with await env.api_client() as api:
        pods = await client.CoreV1Api(api).list_namespaced_pod(env.namespace)
    return str(pods.metadata.resource_version)


async def _expect_forgotten(env: KubeEnv, version: str) -> None:
    """``version`` is gone: an exact list answers HTTP 410, a watch from it
    an ERROR event carrying a 410 Status (what the event source turns into
    RESYNC, on either path)."""
    async with await env.api_client() as api:
        core = client.CoreV1Api(api)
        with pytest.raises(client.ApiException) as refused:
            await core.list_namespaced_pod(
                env.namespace, resource_version=version, resource_version_match="Exact"
            )
        assert refused.value.status == 410
        status = json.loads(refused.value.body or b"{}")
        assert (status["kind"], status["reason"], status["code"]) == (
            "Status",
            "Expired",
            410,
        )
        assert (
            status["message"] == "The resourceVersion for the provided list is too old."
        )
        # unread (no preload): the raw aiohttp response, its lines as sent
        resp: Any = await core.list_namespaced_pod(
            env.namespace,
            watch=True,
            resource_version=version,
            timeout_seconds=5,
            _preload_content=False,
        )
        try:
            assert resp.status == 200
            lines = (await resp.read()).splitlines()
        finally:
            resp.release()
    first = json.loads(lines[0])
    assert first["type"] == "ERROR", lines
    error = first["object"]
    assert (error["kind"], error["reason"], error["code"]) == ("Status", "Expired", 410)
    assert error["message"].startswith(f"too old resource version: {version} ("), error


async def test_a_cursor_the_server_forgot_gives_resync_every_app_then_live_changes(
    kube_env: KubeEnv,
) -> None:
    cfg = cfg_for(kube_env, "volcano")
    # a reader follows until its app ends, keeps the cursor and stops
    async with scheduler(kube_env) as sched:
        first = await sched.submit(make_app("exit 0", name="first"), cfg)
        cursor = (
            await _until(sched, None, lambda e: e.app_id == first and e.terminal)
        )[-1].cursor
    saved = await _version_now(kube_env)
    # apps change while no reader exists: one ends, one fails, one is cancelled
    async with scheduler(kube_env) as sched:
        ok = await sched.submit(make_app("exit 0", name="ok"), cfg)
        failed = await sched.submit(make_app("exit 3", name="failed"), cfg)
        cancelled = await sched.submit(make_app("sleep 600", name="cancelled"), cfg)
        await _until(
            sched, None, lambda e: e.app_id == cancelled and e.state == AppState.RUNNING
        )
        await sched.cancel(cancelled)
        for app_id in (ok, failed, cancelled):
            await sched.wait(app_id, timeout=WAIT)
    ended = {
        first: AppState.SUCCEEDED,
        ok: AppState.SUCCEEDED,
        failed: AppState.FAILED,
        cancelled: AppState.CANCELLED,
    }
    await kube_env.forget_history()
    await _expect_forgotten(kube_env, saved)

    # a new scheduler (as a new process would) resumes from the old cursor
    got: list[AppEvent] = []
    live = ""
    async with scheduler(kube_env) as sched:
        with anyio.fail_after(WAIT):
            async with sched.events(since=cursor) as stream:
                async for event in stream:
                    got.append(event)
                    told = {e.app_id for e in got if e.kind == EventKind.CURRENT}
                    if not live and told >= set(ended):
                        live = await sched.submit(make_app("exit 0", name="live"), cfg)
                    if live and _ends(event, live):
                        break

    burst = len(ended) + 1
    assert got[0].kind == EventKind.RESYNC, got[:3]
    current = got[1:burst]
    assert [e.kind for e in current] == [EventKind.CURRENT] * len(ended), got[:burst]
    assert {e.app_id: e.state for e in current} == ended
    (failure,) = [e for e in current if e.app_id == failed]
    assert [r.exit_code for r in failure.replicas] == [3], failure
    # then live changes, from the new list's version: no second RESYNC
    after = got[burst:]
    assert EventKind.RESYNC not in [e.kind for e in after], after
    mine = [e for e in after if e.app_id == live]
    assert mine[0].kind == EventKind.SUBMITTED, mine
    assert mine[-1].state == AppState.SUCCEEDED, mine
