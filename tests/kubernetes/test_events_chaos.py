"""Kubernetes events survive their reader's SIGKILLs (and an API server restart).

A reader process follows a namespace's events and is SIGKILLed at random
moments once it connected and delivered its first batch, each time resumed
from its saved cursor, while apps succeed, fail, retry and are cancelled
(they come in waves, one after each kill, made while no reader runs). Every app's terminal change and every replica
failure must reach it, in order per app, with duplicates only at the resume
boundaries (:func:`tests.events.chaos.check_delivery`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest

from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler
from asyncsched.specs import AppState, CfgVal

from ..events.chaos import (
    ChaosReader,
    check_delivery,
    kill_at_random,
    until_delivered,
)
from .fakeapi.env import KubeEnv
from .helpers import cfg_for, make_app, scheduler

pytestmark = pytest.mark.usefixtures("kube_controller")

#: seconds the fake server keeps watch history in these tests (a real
#: server's etcd keeps 5 minutes; the fixture's 5 s would turn a slow
#: restart of the reader into a RESYNC)
HISTORY_WINDOW = 120.0


#: (name, script, max_retries, cancelled): what each kind of app does
_KINDS = (
    ("ok", "sleep 1; echo ok", 0, False),
    ("fail", "sleep 1; exit 3", 0, False),
    ("retry", "sleep 1; exit 4", 1, False),
    ("cancel", "sleep 600", 0, True),
    ("ok", "echo fast", 0, False),
)


async def _run_apps(
    sched: KubernetesScheduler,
    cfg: dict[str, CfgVal],
    n: int,
    timeout: float,
    cancel_when: anyio.Event | None = None,
    wave: Callable[[int], Awaitable[None]] | None = None,
    server: anyio.Lock | None = None,
) -> tuple[dict[str, str], dict[str, set[tuple[str, int]]], dict[str, int]]:
    """Submit ``n`` apps of every kind (the ``i``-th once ``wave(i)``
    returned, each holding ``server``: a restart of the API server holds it
    meanwhile), cancel some (running, and once ``cancel_when`` is set), wait
    for all of them.

    Returns the final states, the replicas that failed and the restarts.
    """
    finals: dict[str, str] = {}
    failed: dict[str, set[tuple[str, int]]] = {}
    restarts: dict[str, int] = {}

    async def one(i: int) -> None:
        name, script, retries, cancel = _KINDS[i % len(_KINDS)]
        async with server or contextlib.nullcontext():
            app_id = await sched.submit(
                make_app(script, name=f"{name}{i}", retries=retries), cfg
            )
        if cancel:
            with anyio.fail_after(timeout):
                while True:
                    desc = await sched.describe(app_id)
                    if desc is not None and desc.state == AppState.RUNNING:
                        break
                    await anyio.sleep(0.2)
            if cancel_when is not None:
                await cancel_when.wait()
            await sched.cancel(app_id)
        final = await sched.wait(app_id, timeout=timeout)
        assert final is not None, app_id
        finals[app_id] = final.state.name
        if name in ("fail", "retry"):
            failed[app_id] = {("worker", 0)}
        if final.num_restarts:
            restarts[app_id] = final.num_restarts

    async with anyio.create_task_group() as tg:
        for i in range(n):
            if wave is not None:
                await wave(i)
            tg.start_soon(one, i)
            await anyio.sleep(0.05)
    return finals, failed, restarts


#: restarts the API server once the reader has read something, holding the
#: lock meanwhile (no app is submitted while the server is down)
Restart = Callable[[ChaosReader, anyio.Lock], Coroutine[Any, Any, None]]

#: seconds from a reader run's "open" (connected, first batch delivered) to
#: its kill: at once, inside the rest of its replay, up to a while of
#: following live changes
KILL_AFTER = (0.0, 0.6)

#: the API server restarts once the reader has told this many apps' changes
RESTART_AFTER_APPS = 5


async def _apps_seen(reader: ChaosReader, count: int, timeout: float) -> None:
    """Wait until the reader wrote changes of ``count`` apps (submitted or
    beyond: on the real node a short app may go from PENDING to its end
    between two reads, so RUNNING is not a change every app shows)."""
    with anyio.fail_after(timeout):
        while True:
            if len({e["app_id"] for e in reader.events() if e.get("app_id")}) >= count:
                return
            await anyio.sleep(0.2)  # the reader is another process: read its file


async def _after_kills(reader: ChaosReader, kills: int, n: int, i: int) -> None:
    """Wait until the ``i``-th of ``n`` apps is due: the apps are spread
    evenly over the reader's first ``kills`` runs."""
    await reader.killed(i * kills // n)


async def _chaos(
    kube_env: KubeEnv,
    tmp_path: Path,
    n: int,
    *,
    kills: int,
    timeout: float,
    restart_server: Restart | None = None,
) -> list[dict[str, Any]]:
    params = {"kubeconfig": kube_env.kubeconfig, "namespace": kube_env.namespace}
    reader = ChaosReader("kubernetes", "chaos", tmp_path, params)
    await reader.start()
    cfg = cfg_for(kube_env, "volcano")
    # with a server restart, the running apps are cancelled after it: changes
    # that only a reader that crossed the restart can deliver
    restarted = anyio.Event()
    # once every app ended, a resumed reader may have nothing left to read:
    # the kills then stop waiting for it to say "open"
    quiet = anyio.Event()
    server = anyio.Lock()  # held by a restart and by each submit

    async def restart(server_restart: Restart) -> None:
        await server_restart(reader, server)
        restarted.set()

    try:
        async with scheduler(kube_env) as sched:
            async with anyio.create_task_group() as tg:
                killer = partial(kill_at_random, reader, kills, every=KILL_AFTER)
                tg.start_soon(partial(killer, quiet=quiet))
                if restart_server is not None:
                    tg.start_soon(restart, restart_server)
                finals, failed, restarts = await _run_apps(
                    sched,
                    cfg,
                    n,
                    timeout,
                    restarted if restart_server else None,
                    # the apps come in waves, one after each kill: each
                    # resumed reader has their changes to read (made while
                    # no reader ran)
                    partial(_after_kills, reader, kills, n),
                    server,
                )
                quiet.set()
            await until_delivered(reader, finals, failed, timeout=90)
    finally:
        await reader.stop()
    events = reader.events()
    assert reader.kills >= kills
    # most kills hit a reader that was reading (it had delivered an event)
    opened = sorted(reader.open_after)
    print(  # noqa: T201 -- the counts, for a look at a run (pytest -rP)
        f"{reader.kills} kills, {reader.kills_reading} of a reading reader;"
        f" a run opened after {opened[len(opened) // 2]:.1f} s (median)"
    )
    assert reader.kills_reading > reader.kills // 2, (reader.kills_reading, kills)
    check_delivery(
        events,
        finals,
        final_states=finals,
        failed_replicas=failed,
        restarts=restarts,
    )
    assert set(finals.values()) >= {"SUCCEEDED", "FAILED", "CANCELLED"}
    assert restarts, "no app was retried"
    return events


@pytest.mark.fake_api
@pytest.mark.timeout(400)
async def test_a_reader_killed_eight_times_gets_every_change_of_50_apps(
    kube_env: KubeEnv, tmp_path: Path
) -> None:
    kube_env.fake_server().store.watch_window = HISTORY_WINDOW
    events = await _chaos(kube_env, tmp_path, 50, kills=8, timeout=120)
    # the history was kept: every resume was a watch from the saved versions
    assert not [e for e in events if e["kind"] == "resync"]


#: apps of the real-cluster runs: the single 2-core test node starts pods
#: one after the other (~1 s each, while eight engineers share the machine),
#: so 20 apps of the same kinds keep a run within a few minutes
REAL_APPS = 20
#: kills of the real-cluster runs: each waits until the resumed reader
#: connected and delivered (some 5 s a run on the loaded test machine)
REAL_KILLS = 6


@pytest.mark.parametrize("kube_server", ["real"], indirect=True)
@pytest.mark.timeout(600)
async def test_a_reader_killed_six_times_gets_every_change_on_a_real_cluster(
    kube_env: KubeEnv, tmp_path: Path
) -> None:
    await _chaos(kube_env, tmp_path, REAL_APPS, kills=REAL_KILLS, timeout=300)


@pytest.mark.parametrize("kube_server", ["real"], indirect=True)
@pytest.mark.timeout(600)
async def test_an_api_server_restart_gives_resync_and_no_gap(
    kube_env: KubeEnv, tmp_path: Path
) -> None:
    cluster = kube_env.cluster
    if cluster is None:
        pytest.skip("restarts the API server of the test cluster")

    #: how many events the reader had written when the server went down
    before: list[int] = []

    async def restart(reader: ChaosReader, server: anyio.Lock) -> None:
        # once apps are under way: their changes go on while the server is
        # down, and the running ones are cancelled once it is back
        await _apps_seen(reader, RESTART_AFTER_APPS, timeout=240)
        await server.acquire()
        before.append(len(reader.events()))
        # etcd moves on while the server is down (as the other API servers
        # of a highly available control plane write to it): else a version
        # that was etcd's newest at the stop is still served by the new
        # watch cache, whose watch replays the changes since without a 410
        stop = partial(cluster.restart_apiserver, 2.0, 240, etcd_moves=True)
        try:
            await anyio.to_thread.run_sync(stop)
        finally:
            server.release()

    events = await _chaos(
        kube_env,
        tmp_path,
        REAL_APPS,
        kills=REAL_KILLS,
        timeout=300,
        restart_server=restart,
    )
    # no gap (checked above): the cancellations made after the restart were
    # delivered by a reader that held versions from before it. The new
    # server's watch cache starts at etcd's revision of its start, which
    # moved on while it was down, so those versions were too old for it:
    # the reader was told so with a RESYNC
    # (or, resumed from inside a CURRENT burst, got that burst again; or,
    # started just before the restart, listed on the new server and told its
    # CURRENT burst from there), then the current state of every app
    crossed = events[before[0] :]
    firsts: dict[int, str] = {}  # reader run -> the kind it told first since
    for event in crossed:
        firsts.setdefault(event["pid"], event["kind"])
    resynced = any(e["kind"] == "resync" for e in crossed)
    burst = any(k == "current" for k in firsts.values())
    assert resynced or burst, firsts
    for i, event in enumerate(events[:-1]):
        follower = events[i + 1]
        # (a reader killed right after a RESYNC tells it again when resumed)
        if event["kind"] == "resync" and follower["pid"] == event["pid"]:
            assert follower["kind"] == "current", events[i : i + 3]
