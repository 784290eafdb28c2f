"""Chaos for Docker event readers: the reader process SIGKILLed at random while
50 apps run (and, separately, the daemon restarted under it); every change a
user relies on still arrives, in order, duplicated only at resume boundaries.
"""

from __future__ import annotations

import random
from functools import partial
from pathlib import Path

import anyio
import pytest

from asyncsched.schedulers.api import DescribeAppResponse
from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.specs import AppDef, AppState
from tests.events.chaos import (
    TERMINAL,
    ChaosReader,
    check_delivery,
    kill_at_random,
    until_delivered,
)

from .conftest import SESSION, Engine
from .helpers import sh_app

pytestmark = pytest.mark.docker

#: what each kind of app runs, and its max_retries
KINDS = {
    "ok": ("sleep 0.3; exit 0", 0),
    "fail": ("sleep 0.3; exit 3", 0),
    "retry": ("sleep 0.2; exit 5", 2),
    "cancel": ("sleep 600", 0),
}


def mixed_apps(n: int) -> list[tuple[str, AppDef]]:
    """``n`` apps cycling through succeed, fail, restart-then-fail and cancel."""
    kinds = list(KINDS)
    out = []
    for i in range(n):
        kind = kinds[i % len(kinds)]
        script, retries = KINDS[kind]
        out.append((kind, sh_app(script, name=f"chaos-{kind}", max_retries=retries)))
    return out


async def running(sched: DockerScheduler, app_id: str) -> None:
    """Wait (on the scheduler's change signal) until the app runs."""
    with anyio.fail_after(120):
        while True:
            changed = sched.changed(app_id)
            status = await sched.describe(app_id)
            if status is not None and status.state == AppState.RUNNING:
                return
            await changed.wait()


async def run_apps(
    sched: DockerScheduler, apps: list[tuple[str, AppDef]], seed: int
) -> dict[str, str]:
    """Submit the apps in small waves, cancel the ``cancel`` ones once they
    run; return app id -> kind once every app is terminal."""
    rng = random.Random(seed)
    kinds: dict[str, str] = {}

    async def one(kind: str, app: AppDef) -> None:
        app_id = await sched.submit(app)
        kinds[app_id] = kind
        if kind == "cancel":
            await running(sched, app_id)
            await anyio.sleep(rng.uniform(0, 0.5))  # a random moment of its run
            await sched.cancel(app_id)
        with anyio.fail_after(180):
            await sched.wait(app_id)

    async with anyio.create_task_group() as tg:
        for kind, app in apps:
            tg.start_soon(one, kind, app)
            await anyio.sleep(rng.uniform(0.05, 0.25))
    return kinds


async def ended(sched: DockerScheduler, app_id: str) -> DescribeAppResponse:
    """The app once describe says it is terminal (``wait`` may return at a
    failure the daemon then restarts)."""
    with anyio.fail_after(120):
        while True:
            changed = sched.changed(app_id)
            status = await sched.describe(app_id)
            if status is not None and status.state.name in TERMINAL:
                return status
            await changed.wait()


async def expectations(
    sched: DockerScheduler, app_ids: list[str]
) -> tuple[dict[str, str], dict[str, set[tuple[str, int]]], dict[str, int]]:
    """What describe says at the end: terminal states, replicas that ended
    non-zero, restart counts."""
    final: dict[str, str] = {}
    failed: dict[str, set[tuple[str, int]]] = {}
    restarts: dict[str, int] = {}
    for app_id in app_ids:
        status = await ended(sched, app_id)
        final[app_id] = status.state.name
        replicas = [r for role in status.roles_statuses for r in role.replicas]
        failed[app_id] = {
            (r.role, r.id) for r in replicas if r.exit_code not in (None, 0)
        }
        restarts[app_id] = max(r.num_restarts for r in replicas)
    return final, failed, restarts


async def test_every_change_arrives_while_the_reader_is_killed_at_random(
    sched: DockerScheduler, swept: Engine, tmp_path: Path
) -> None:
    reader = ChaosReader(
        "local_docker", SESSION, tmp_path, params={"docker_host": swept.host}
    )
    await reader.start()
    try:
        quiet = anyio.Event()  # no change to come: kills stop waiting for one
        async with anyio.create_task_group() as tg:
            # once the apps are done a resumed reader catches up within a
            # few tenths of a second: the kills left then land in that
            kills = partial(
                kill_at_random, reader, 12, quiet=quiet, quiet_every=(0.05, 0.4)
            )
            tg.start_soon(kills)
            kinds = await run_apps(sched, mixed_apps(50), seed=31)
            quiet.set()
        final, failed, restarts = await expectations(sched, list(kinds))
        await until_delivered(reader, final, failed, timeout=120)
    finally:
        await reader.stop()
    assert reader.kills == 12
    assert sorted(final.values()).count("CANCELLED") >= 12
    assert any(restarts.values())
    check_delivery(
        reader.events(),
        list(kinds),
        final_states=final,
        failed_replicas=failed,
        restarts=restarts,
    )


async def test_a_daemon_restart_under_the_reader_resyncs_without_a_gap(
    sched: DockerScheduler, swept: Engine, tmp_path: Path
) -> None:
    if not swept.started:
        pytest.skip("the daemon is not this test run's own: it is not restarted")
    reader = ChaosReader(
        "local_docker", SESSION, tmp_path, params={"docker_host": swept.host}
    )
    await reader.start()
    try:
        before = await run_apps(sched, mixed_apps(8), seed=5)
        # these run when the daemon goes down: its shutdown stops them
        doomed = [
            await sched.submit(sh_app("trap 'exit 0' TERM; sleep 600 & wait", name="d"))
            for _ in range(3)
        ]
        for app_id in doomed:
            await running(sched, app_id)
        await anyio.to_thread.run_sync(swept.restart)
        # the same reader process reconnects and says it may have missed some
        with anyio.fail_after(60):
            while not any(e["kind"] == "resync" for e in reader.events()):
                await anyio.sleep(0.2)
        await reader.kill_and_restart()
        after = await run_apps(sched, mixed_apps(8), seed=6)
        await reader.kill_and_restart()
        app_ids = [*before, *doomed, *after]
        final, failed, restarts = await expectations(sched, app_ids)
        await until_delivered(reader, final, failed, timeout=120)
    finally:
        await reader.stop()
    events = reader.events()
    first_run = {e["pid"] for e in events[:1]}
    assert any(e["kind"] == "resync" and e["pid"] in first_run for e in events)
    check_delivery(
        events, app_ids, final_states=final, failed_replicas=failed, restarts=restarts
    )
