"""A replica that its on-failure policy restarts never reads terminal early.

Docker sends ``die`` for every failed attempt; until the daemon says whether
it restarts the container, the replica keeps its last known state, and an
attempt Docker restarts reads PENDING (restarting). Only the last attempt's
exit is final.
"""

from __future__ import annotations

from pathlib import Path

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
