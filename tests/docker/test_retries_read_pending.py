"""A replica that its on-failure policy restarts never reads terminal early.

Docker sends ``die`` for every failed attempt; until the daemon says whether
it restarts the container, the replica keeps its last known state, and an
attempt Docker restarts reads PENDING (restarting). Only the last attempt's
exit is final.
"""

from __future__ import annotations

from pathlib import Path

import aiodocker
import anyio
import pytest

from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.specs import AppState, BindMount, is_terminal

from .helpers import sh_app

pytestmark = pytest.mark.docker

#: fails (exit 1) until its attempt (lines in /m/attempts) reaches $OK_AT
COUNTING = 'echo x >> /m/attempts; [ "$(wc -l < /m/attempts)" -ge "$OK_AT" ] || exit 1'


def attempts(tmp_path: Path) -> int:
    """Attempts started so far."""
    path = tmp_path / "attempts"
    return len(path.read_text().splitlines()) if path.exists() else 0


async def states_until_terminal(
    sched: DockerScheduler, app_id: str, tmp_path: Path
) -> list[tuple[AppState, int]]:
    """(app state, attempts started by then) at every change the scheduler
    signals, and every 5 ms in between (a state held only while a ``die`` is
    being looked into lasts a few ms), until the app is terminal."""
    reads: list[tuple[AppState, int]] = []
    with anyio.fail_after(90):
        while True:
            changed = sched.changed(app_id)
            # the attempts counter is read first: a terminal read with fewer
            # attempts than the last one is early for sure
            started = attempts(tmp_path)
            desc = await sched.describe(app_id)
            assert desc is not None
            reads.append((desc.state, started))
            if is_terminal(desc.state):
                return reads
            with anyio.move_on_after(0.005):
                await changed.wait()


@pytest.mark.parametrize("run", range(4))
async def test_retried_replica_never_reads_failed_before_its_last_attempt(
    sched: DockerScheduler, tmp_path: Path, run: int
) -> None:
    del run  # a race: repeated
    app = sh_app(
        COUNTING,
        max_retries=3,
        env={"OK_AT": "3"},
        mounts=[BindMount(str(tmp_path), "/m")],
    )
    app_id = await sched.submit(app, {})
    waited: list[AppState] = []

    async def wait() -> None:
        desc = await sched.wait(app_id, timeout=90)
        assert desc is not None
        waited.append(desc.state)

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait)
        reads = await states_until_terminal(sched, app_id, tmp_path)
    # it succeeds in the end: no read may ever say FAILED
    assert [r for r in reads if is_terminal(r[0])] == [(AppState.SUCCEEDED, 3)]
    assert waited == [AppState.SUCCEEDED]
    desc = await sched.describe(app_id)
    assert desc is not None
    [replica] = desc.roles_statuses[0].replicas
    assert (replica.num_restarts, replica.exit_code) == (2, 0)


async def test_replica_fails_for_good_once_its_retries_are_used_up(
    sched: DockerScheduler, tmp_path: Path
) -> None:
    app = sh_app(
        COUNTING,
        max_retries=1,
        env={"OK_AT": "99"},
        mounts=[BindMount(str(tmp_path), "/m")],
    )
    app_id = await sched.submit(app, {})
    reads = await states_until_terminal(sched, app_id, tmp_path)
    assert [r for r in reads if is_terminal(r[0]) and r[1] < 2] == []
    desc = await sched.wait(app_id, timeout=60)
    assert desc is not None
    assert desc.state == AppState.FAILED, desc
    [replica] = desc.roles_statuses[0].replicas
    assert (replica.num_restarts, replica.exit_code) == (1, 1)


async def test_fail_fast_spares_siblings_while_the_failed_replica_has_retries(
    sched: DockerScheduler, tmp_path: Path
) -> None:
    # replica 0 fails twice, then succeeds; replica 1 runs until replica 0 did
    script = (
        'if [ "$ASYNCSCHED_REPLICA_ID" = 0 ]; then ' + COUNTING + "; touch /m/done; "
        "else while [ ! -e /m/done ]; do sleep 0.1; done; fi"
    )
    app = sh_app(
        script,
        replicas=2,
        max_retries=2,
        env={"OK_AT": "3"},
        mounts=[BindMount(str(tmp_path), "/m")],
    )
    app_id = await sched.submit(app, {})
    desc = await sched.wait(app_id, timeout=90)
    assert desc is not None
    replicas = desc.roles_statuses[0].replicas
    assert [(r.state, r.exit_code) for r in replicas] == [(AppState.SUCCEEDED, 0)] * 2
    assert desc.state == AppState.SUCCEEDED


async def test_a_stopped_container_with_retries_left_is_final(
    sched: DockerScheduler, raw_docker: aiodocker.Docker
) -> None:
    # `docker stop` (as a daemon shutdown does): Docker never restarts it
    app_id = await sched.submit(sh_app("sleep 600", max_retries=3), {})
    with anyio.fail_after(60):
        while True:
            changed = sched.changed(app_id)
            desc = await sched.describe(app_id)
            if desc is not None and desc.state == AppState.RUNNING:
                break
            await changed.wait()
    [container] = await raw_docker.containers.list(
        filters={"label": [f"asyncsched.io/app-id={app_id}"]}
    )
    await container.stop(t=0)  # (no grace: it ignores SIGTERM anyway)
    desc = await sched.wait(app_id, timeout=60)
    assert desc is not None
    [replica] = desc.roles_statuses[0].replicas
    # sh as PID 1 ignores SIGTERM: the daemon kills it after the grace
    assert (desc.state, replica.exit_code, replica.num_restarts) == (
        AppState.FAILED,
        137,
        0,
    )
