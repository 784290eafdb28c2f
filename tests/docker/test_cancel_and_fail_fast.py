"""Cancel asks and returns; fail-fast stops the siblings; stopped replicas keep codes.

Every test runs on the real engine. Replicas that must outlive SIGTERM ignore
it (PID 1 without a handler), so the daemon's SIGKILL ends them after the grace.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiodocker
import anyio
import pytest

from asyncsched.schedulers.api import DescribeAppResponse
from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.specs import AppDef, AppState, ReplicaStatus, StatusReason

from .conftest import NETWORK, SESSION, Engine, sweep
from .helpers import sh_app

pytestmark = pytest.mark.docker

#: a replica that ignores SIGTERM, and says when it runs: the shell is PID 1 of
#: its container and sets no handler, so the kernel drops SIGTERM
IGNORES_TERM = "echo started; sleep 60 & wait"
#: the grace of the scheduler under test: long enough to tell a blocking cancel
#: (one that takes over 2 s)
GRACE = 3


@pytest.fixture
async def graced(docker_ready: Engine) -> AsyncIterator[DockerScheduler]:
    """A scheduler whose cancel grace is :data:`GRACE` seconds."""
    scheduler = DockerScheduler(SESSION, network=NETWORK, stop_timeout=GRACE)
    try:
        yield scheduler
    finally:
        await scheduler.aclose()
        await sweep(docker_ready.host)


def roles_app(scripts: dict[str, str]) -> AppDef:
    """One single-replica role per ``{role: script}``."""
    app = AppDef(name="app")
    for name, script in scripts.items():
        [role] = sh_app(script).roles
        role.name = name
        app.roles.append(role)
    return app


async def wait_logged(
    sched: DockerScheduler, app_id: str, role: str = "worker", k: int = 0
) -> None:
    """Wait until the replica printed ``started`` (its trap is set)."""
    with anyio.fail_after(30):
        while "started\n" not in [
            line async for line in sched.log_iter(app_id, role, k)
        ]:
            await anyio.sleep(0.05)


def replicas(desc: DescribeAppResponse) -> dict[tuple[str, int], ReplicaStatus]:
    return {(s.role, r.id): r for s in desc.roles_statuses for r in s.replicas}


async def test_cancel_returns_at_once_and_wait_sees_the_sigkill(
    graced: DockerScheduler,
) -> None:
    app_id = await graced.submit(sh_app(IGNORES_TERM, replicas=2), {})
    for k in range(2):
        await wait_logged(graced, app_id, k=k)
    started = anyio.current_time()
    await graced.cancel(app_id)
    took = anyio.current_time() - started
    assert took < 2, f"cancel blocked {took:.1f}s (the grace is {GRACE}s)"
    desc = await graced.describe(app_id)
    assert desc is not None
    assert desc.state == AppState.CANCELLED  # at once, while replicas still stop
    desc = await graced.wait(app_id, timeout=30)
    waited = anyio.current_time() - started
    assert desc is not None
    assert desc.state == AppState.CANCELLED
    assert waited >= GRACE - 0.5, waited  # wait returned once the KILL ended them
    for replica in desc.roles_statuses[0].replicas:
        assert replica.state == AppState.CANCELLED, replica
        assert replica.exit_code == 137, replica  # SIGKILL after the grace
        assert replica.reason == StatusReason.CANCELLED, replica
        assert replica.message == "cancelled by the user", replica


async def test_cancel_then_close_still_stops_the_containers(
    docker_ready: Engine, graced: DockerScheduler
) -> None:
    """The grace is the daemon's: closing the scheduler does not cut it short."""
    app_id = await graced.submit(sh_app(IGNORES_TERM), {})
    await wait_logged(graced, app_id)
    await graced.cancel(app_id)
    with anyio.fail_after(5):
        await graced.aclose()
    async with DockerScheduler(SESSION, network=NETWORK) as fresh:
        desc = await fresh.wait(app_id, timeout=30)
    assert desc is not None
    assert desc.state == AppState.CANCELLED
    [replica] = desc.roles_statuses[0].replicas
    assert (replica.state, replica.exit_code) == (AppState.CANCELLED, 137)


async def test_a_replica_that_fails_for_good_stops_the_others(
    sched: DockerScheduler,
) -> None:
    # (the 1 s grace of ``sched``: the stop's SIGKILL comes sooner)
    app = roles_app({"long": IGNORES_TERM, "bad": "sleep 1; exit 3"})
    app.roles[1].max_retries = 1
    app_id = await sched.submit(app, {})
    started = anyio.current_time()
    desc = await sched.wait(app_id, timeout=40)
    assert desc is not None
    assert anyio.current_time() - started < 30  # long sleeps 60 s: it was stopped
    assert desc.state == AppState.FAILED
    found = replicas(desc)
    bad, long = found["bad", 0], found["long", 0]
    assert (bad.state, bad.exit_code, bad.num_restarts) == (AppState.FAILED, 3, 1)
    assert (long.state, long.exit_code) == (AppState.CANCELLED, 137)
    assert long.reason == StatusReason.CANCELLED
    assert long.message == "stopped: another replica failed"


async def test_fail_fast_false_lets_the_others_run_to_their_end(
    graced: DockerScheduler,
) -> None:
    app = roles_app({"long": "echo started; sleep 3; exit 0", "bad": "exit 3"})
    app_id = await graced.submit(app, {"fail_fast": False})
    desc = await graced.wait(app_id, timeout=40)
    assert desc is not None
    assert desc.state == AppState.FAILED
    found = replicas(desc)
    assert (found["bad", 0].state, found["bad", 0].exit_code) == (AppState.FAILED, 3)
    assert (found["long", 0].state, found["long", 0].exit_code) == (
        AppState.SUCCEEDED,
        0,
    )


async def test_fail_fast_is_done_by_any_scheduler_that_looks(
    docker_ready: Engine, graced: DockerScheduler
) -> None:
    """The submitter is gone when the replica fails: the next look stops the rest."""
    app = roles_app({"long": IGNORES_TERM, "bad": "echo started; sleep 60 & wait"})
    app_id = await graced.submit(app, {})
    await wait_logged(graced, app_id, "bad")
    await graced.aclose()
    # the replica fails while no scheduler watches
    async with aiodocker.Docker(url=docker_ready.host) as docker:
        await docker.containers.container(f"{app_id}-bad-0").kill(signal="SIGKILL")
    async with DockerScheduler(SESSION, network=NETWORK, stop_timeout=1) as later:
        desc = await later.wait(app_id, timeout=30)
    assert desc is not None
    assert desc.state == AppState.FAILED
    found = replicas(desc)
    assert (found["bad", 0].state, found["bad", 0].exit_code) == (AppState.FAILED, 137)
    assert found["long", 0].state == AppState.CANCELLED
    assert found["long", 0].exit_code == 137


async def test_a_replica_cancelled_between_retries_keeps_its_exit_code(
    graced: DockerScheduler,
) -> None:
    """Stopped while Docker waits to restart it: CANCELLED, its last exit code."""
    app_id = await graced.submit(sh_app("exit 3", max_retries=20), {})
    with anyio.fail_after(30):
        while True:  # restarts back off (0.1 s doubling): it mostly waits now
            desc = await graced.describe(app_id)
            assert desc is not None
            if desc.roles_statuses[0].replicas[0].num_restarts >= 4:
                break
            await anyio.sleep(0.05)
    started = anyio.current_time()
    await graced.cancel(app_id)
    assert anyio.current_time() - started < 2
    desc = await graced.wait(app_id, timeout=30)
    assert desc is not None
    assert desc.state == AppState.CANCELLED
    [replica] = desc.roles_statuses[0].replicas
    assert (replica.state, replica.exit_code) == (AppState.CANCELLED, 3), replica
