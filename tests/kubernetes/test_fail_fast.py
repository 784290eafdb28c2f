"""Fail-fast on Volcano: a replica that fails for good stops its siblings
(default), or lets them run to their end with ``fail_fast=False``."""

from __future__ import annotations

import anyio
import pytest

from asyncsched.schedulers.kit import AppEvent, ReplicaSnapshot
from asyncsched.schedulers.shared.event_stream import EventStream
from asyncsched.specs import AppDef, AppState, Resource, Role, StatusReason, is_terminal

from .fakeapi.env import KubeEnv
from .helpers import (
    IMAGE,
    cfg_for,
    deliver_lagging_watches,
    let_sleeps_end,
    scheduler,
    volcano_phase_reached,
)

pytestmark = pytest.mark.usefixtures("kube_controller")


def _app(long_seconds: int) -> AppDef:
    """Role ``bad`` fails once both run (Volcano starts the gang together)."""

    def role(name: str, script: str) -> Role:
        return Role(
            name,
            image=IMAGE,
            entrypoint="sh",
            args=["-c", script],
            resource=Resource(cpu=1, gpu=0, memMB=128),
        )

    return AppDef(
        "ff",
        roles=[role("bad", "sleep 2; exit 3"), role("long", f"sleep {long_seconds}")],
    )


@pytest.mark.manual_clock
async def test_a_failed_replica_stops_its_siblings(kube_env: KubeEnv) -> None:
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(_app(300), cfg_for(kube_env, "volcano"))
        await let_sleeps_end(kube_env, 2, 2)  # "bad" exits 3
        desc = await sched.wait(app_id, timeout=120)
    assert desc is not None
    assert desc.state == AppState.FAILED
    assert desc.msg == "replica bad/0 exited with code 3"
    [failed], [sibling] = (role.replicas for role in desc.roles_statuses)
    assert (failed.state, failed.exit_code) == (AppState.FAILED, 3)
    assert sibling.state == AppState.CANCELLED
    assert sibling.reason == StatusReason.CANCELLED
    assert sibling.exit_code in (143, 137)  # SIGTERM, or the grace ran out
    assert sibling.message == "stopped: another replica failed"


@pytest.mark.manual_clock
async def test_fail_fast_off_lets_the_siblings_run_to_their_end(
    kube_env: KubeEnv,
) -> None:
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(
            _app(6), {**cfg_for(kube_env, "volcano"), "fail_fast": False}
        )
        await let_sleeps_end(kube_env, 2, 2, 4)  # "bad" exits 3, then "long" ends
        desc = await sched.wait(app_id, timeout=120)
    assert desc is not None
    assert desc.state == AppState.FAILED
    states = [
        (r.state, r.exit_code) for role in desc.roles_statuses for r in role.replicas
    ]
    assert states == [(AppState.FAILED, 3), (AppState.SUCCEEDED, 0)]


#: replica 1 fails once both run; replica 0 would run for long
_REPLICA_1_FAILS = 'sleep 2; test "$ASYNCSCHED_REPLICA_ID" = 1 && exit 3; sleep 300'
#: seconds the fake server's pods watch lags behind the Jobs' one
_PODS_LAG = 5.0


async def _move_time(env: KubeEnv, app_id: str) -> None:
    """On the fake server's manual clock: end both replicas' ``sleep 2``,
    then, once the server holds the Job ended, let the lagging pods watch
    deliver, one lag at a time (until cancelled). On a real cluster time
    moves by itself: returns at once."""
    if env.clock is None:
        return
    await let_sleeps_end(env, 2, 2)  # replica 1 exits 3
    await volcano_phase_reached(env, app_id, {"Failed", "Terminated", "Aborted"})
    await deliver_lagging_watches(env, _PODS_LAG)


@pytest.mark.manual_clock
async def test_the_failed_replica_keeps_its_exit_code_in_wait_describe_and_events(
    kube_env: KubeEnv,
) -> None:
    """The default fail-fast stops replica 0 as soon as replica 1 exits 3:
    whatever order the Job's and the pods' changes arrive in, every view
    reports replica 1 FAILED with its exit code. On the fake server the
    pods' watch lags 5 s behind the Jobs' (as under load): the Job is
    Terminated before the client has seen any of its pods (its clock stands
    still until then)."""
    if kube_env.server is not None:
        kube_env.server.faults.delay_watch("pods", _PODS_LAG)
    app = AppDef(
        "ffx",
        roles=[
            Role(
                "worker",
                image=IMAGE,
                entrypoint="sh",
                args=["-c", _REPLICA_1_FAILS],
                num_replicas=2,
                resource=Resource(cpu=1, gpu=0, memMB=128),
            )
        ],
    )
    seen: list[AppEvent] = []
    told = anyio.Event()  # the app's end and replica 1's failure were told

    async def follow(stream: EventStream) -> None:
        async for event in stream:
            seen.append(event)
            if any(e.state == AppState.FAILED for e in seen) and any(
                _failed_with_3(r) for e in seen for r in _replicas(e)
            ):
                told.set()

    async with scheduler(kube_env) as sched, sched.events() as stream:
        async with anyio.create_task_group() as tg:
            tg.start_soon(follow, stream)
            app_id = await sched.submit(app, cfg_for(kube_env, "volcano"))
            tg.start_soon(_move_time, kube_env, app_id)
            final = await sched.wait(app_id, timeout=180)
            described = await sched.describe(app_id)
            with anyio.move_on_after(60):
                await told.wait()
            tg.cancel_scope.cancel()
    for desc in (final, described):
        assert desc is not None
        assert desc.state == AppState.FAILED
        [role] = desc.roles_statuses
        by_id = {r.id: r for r in role.replicas}
        assert (by_id[1].state, by_id[1].exit_code) == (AppState.FAILED, 3)
        assert by_id[0].state == AppState.CANCELLED
        assert desc.msg == "replica worker/1 exited with code 3"
    # the stream told replica 1's failure, and no other outcome of it
    assert told.is_set(), seen
    ends = [
        r
        for e in seen
        if e.app_id == app_id
        for r in _replicas(e)
        if r.id == 1 and is_terminal(r.state)
    ]
    assert all(_failed_with_3(r) for r in ends), ends


def _replicas(event: AppEvent) -> list[ReplicaSnapshot]:
    """The replicas an event tells of (a REPLICA event's own, or all)."""
    return [event.replica] if event.replica is not None else list(event.replicas)


def _failed_with_3(replica: ReplicaSnapshot | None) -> bool:
    return (
        replica is not None
        and replica.id == 1
        and (replica.state, replica.exit_code) == (AppState.FAILED, 3)
    )
