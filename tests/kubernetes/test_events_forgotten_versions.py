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

import itertools
import json
from typing import Any

import anyio
import pytest
from kubernetes_asyncio import client

from asyncsched import AppEvent, EventKind
from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler
from asyncsched.specs import AppState

from .fakeapi.env import KubeEnv
from .helpers import app_ended, cfg_for, events_until, make_app, scheduler

pytestmark = pytest.mark.usefixtures("kube_controller")

#: seconds to wait for what a stream should tell (pods start one after the
#: other on the real test node, on a machine shared by several test runs)
WAIT = 120


async def _version_now(env: KubeEnv) -> str:
    """The server's resourceVersion now (a list of the namespace's pods)."""
    async with await env.api_client() as api:
        pods = await client.CoreV1Api(api).list_namespaced_pod(env.namespace)
    return str(pods.metadata.resource_version)


async def _expect_forgotten(env: KubeEnv, version: str, *, compacted: bool) -> None:
    """A watch from ``version`` answers an ERROR event carrying a 410 Status;
    an exact list at it answers HTTP 410 once etcd compacted it, else the
    objects as they were (what the event source relies on, on either path)."""
    async with await env.api_client() as api:
        core = client.CoreV1Api(api)
        if compacted:
            with pytest.raises(client.ApiException) as refused:
                await _exact_list(core, env.namespace, version)
            assert refused.value.status == 410
            status = json.loads(refused.value.body or b"{}")
            assert (status["kind"], status["reason"], status["code"]) == (
                "Status",
                "Expired",
                410,
            )
            assert (
                status["message"]
                == "The resourceVersion for the provided list is too old."
            )
        else:
            listed = await _exact_list(core, env.namespace, version)
            assert listed.metadata.resource_version == version
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


async def _exact_list(core: client.CoreV1Api, namespace: str, version: str) -> Any:
    return await core.list_namespaced_pod(
        namespace, resource_version=version, resource_version_match="Exact"
    )


class _Reader:
    """What one resumed reader got so far; ``told`` is set once CURRENT of
    every one of ``apps`` came, ``progress`` at each event."""

    def __init__(self, apps: set[str]) -> None:
        self.apps = apps
        self.got: list[AppEvent] = []
        self.told = anyio.Event()
        self.progress = anyio.Event()

    async def follow(self, sched: KubernetesScheduler, since: str) -> None:
        async with sched.events(since=since) as stream:
            async for event in stream:
                self.got.append(event)
                if {e.app_id for e in self.got if e.kind == EventKind.CURRENT} >= (
                    self.apps
                ):
                    self.told.set()
                self.progress.set()
                self.progress = anyio.Event()
        raise AssertionError(f"the stream ended: {self.got}")

    def told_end_of(self, live: str) -> bool:
        """True once the last word on ``live`` is its end, and no RESYNC burst
        is half told (a burst after ``live``'s submit tells it too)."""
        mine = [e for e in self.got if e.app_id == live]
        if not mine or not mine[-1].terminal:
            return False
        resyncs = [i for i, e in enumerate(self.got) if e.kind == EventKind.RESYNC]
        after = self.got[resyncs[-1] + 1 :] if resyncs else []
        if any(e.kind != EventKind.CURRENT for e in after):
            return True  # the last burst is over
        return {e.app_id for e in after} >= self.apps | {live}


def _check_resumed(
    got: list[AppEvent], ended: dict[str, AppState], failed: str, live: str
) -> None:
    """RESYNC first; each RESYNC followed by CURRENT of every app (its end;
    the failed replica's exit code); then the live app's changes to its end.

    A server restart answers 410 on each resource kind's watch, so a stream
    that was watching may tell RESYNC once per kind (at-least-once)."""
    assert got[0].kind == EventKind.RESYNC, got[:3]
    for at in [i for i, e in enumerate(got) if e.kind == EventKind.RESYNC]:
        current = list(
            itertools.takewhile(lambda e: e.kind == EventKind.CURRENT, got[at + 1 :])
        )
        # (the live app among them when the burst came after its submit)
        assert {e.app_id: e.state for e in current if e.app_id != live} == ended
        (failure,) = [e for e in current if e.app_id == failed]
        assert [r.exit_code for r in failure.replicas] == [3], failure
    mine = [e for e in got if e.app_id == live]
    # SUBMITTED, or CURRENT from a RESYNC burst that came after the submit
    assert mine[0].kind in (EventKind.SUBMITTED, EventKind.CURRENT), mine
    assert mine[-1].state == AppState.SUCCEEDED, mine


#: an API server restart on the loaded test machine takes up to a minute
@pytest.mark.timeout(600)
async def test_cursors_the_server_forgot_give_resync_every_app_then_live_changes(
    kube_env: KubeEnv,
) -> None:
    cfg = cfg_for(kube_env, "volcano")
    # a reader follows until its app ends, keeps the cursor and stops
    async with scheduler(kube_env) as sched:
        first = await sched.submit(make_app("exit 0", name="first"), cfg)
        old = (await events_until(sched, None, app_ended(first), WAIT))[-1].cursor
    old_version = await _version_now(kube_env)
    # apps change while no reader exists: one ends, one fails, one is cancelled
    async with scheduler(kube_env) as sched:
        ok = await sched.submit(make_app("exit 0", name="ok"), cfg)
        failed = await sched.submit(make_app("exit 3", name="failed"), cfg)
        cancelled = await sched.submit(make_app("sleep 600", name="cancelled"), cfg)
        await events_until(
            sched,
            None,
            lambda e: e.app_id == cancelled and e.state == AppState.RUNNING,
            WAIT,
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
    # etcd forgets the old cursor's versions; a second reader then reads
    # every app's state and stops (its versions outlive the compaction)
    await kube_env.compact()
    told: set[str] = set()

    def all_told(event: AppEvent) -> bool:
        if event.kind == EventKind.CURRENT:
            told.add(event.app_id)
        return told >= set(ended)

    async with scheduler(kube_env) as sched:
        recent = (await events_until(sched, None, all_told, WAIT))[-1].cursor
    recent_version = await _version_now(kube_env)
    async with await kube_env.api_client() as api:
        # any later write: the restarted server's watch cache starts after it
        await client.CoreV1Api(api).patch_namespace(
            kube_env.namespace, {"metadata": {"labels": {"written": "after"}}}
        )
    # the API server restarts: its new watch cache starts empty
    await kube_env.restart_api_server()
    await _expect_forgotten(kube_env, old_version, compacted=True)
    await _expect_forgotten(kube_env, recent_version, compacted=False)

    # new schedulers (as new processes would) resume from either cursor: the
    # old one's exact list answers 410, the recent one's watch does
    both = {"compacted": old, "restarted": recent}
    readers = {name: _Reader(set(ended)) for name in both}

    async def resume(name: str, since: str) -> None:
        async with scheduler(kube_env) as sched:
            await readers[name].follow(sched, since)

    with anyio.fail_after(WAIT):
        async with anyio.create_task_group() as tg:
            for name, since in both.items():
                tg.start_soon(resume, name, since)
            for reader in readers.values():
                await reader.told.wait()
            async with scheduler(kube_env) as sched:
                live = await sched.submit(make_app("exit 0", name="live"), cfg)
            # its end may come as an APP event or within a RESYNC burst (a
            # watch of another resource kind answering 410 later), even
            # before submit returned here
            for reader in readers.values():
                while not reader.told_end_of(live):
                    await reader.progress.wait()
            tg.cancel_scope.cancel()
    for reader in readers.values():
        _check_resumed(reader.got, ended, failed, live)
