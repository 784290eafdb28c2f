"""``detach``: apps that outlive the process that submitted them, and only those."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from asyncsched.schedulers.kit import EventKind
from asyncsched.schedulers.local import LocalScheduler
from asyncsched.specs import AppDef, AppState, Role

from ._helpers import lines
from .conftest import alive

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


async def until_gone(pids: set[int], timeout: float = 10) -> None:
    with anyio.fail_after(timeout):
        while alive(pids):
            await anyio.sleep(0.05)


async def test_a_detached_app_outlives_its_killed_orchestrator_and_is_waited_and_cancelled_from_a_new_process(
    tmp_path: Path,
) -> None:
    release = tmp_path / "release"
    with subprocess.Popen(
        [sys.executable, "-m", "tests.local._detached_owner", str(release)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
    ) as owner:
        try:
            assert owner.stdout is not None
            with anyio.fail_after(60):
                line = await anyio.to_thread.run_sync(owner.stdout.readline)
            apps = json.loads(line)  # every app runs
        finally:
            owner.kill()  # SIGKILL: no cleanup of any kind
            owner.wait()
    waits, long, attached = (apps[k] for k in ("waits", "long", "attached"))
    # the default stays orphan-proof; detached replicas keep running
    await until_gone({attached[1]})
    assert alive({waits[1], long[1]}) == {waits[1], long[1]}
    async with LocalScheduler("det", cancel_grace=1.0) as sched:
        desc = await sched.describe(waits[0])
        assert desc is not None
        assert desc.state == AppState.RUNNING
        release.touch()
        desc = await sched.wait(waits[0], timeout=30)
        assert desc is not None
        assert desc.state == AppState.FAILED
        assert desc.roles_statuses[0].replicas[0].exit_code == 5
        await sched.cancel(long[0])
        desc = await sched.wait(long[0], timeout=30)
        assert desc is not None
        assert desc.state == AppState.CANCELLED
        await until_gone({long[1]})
        # the detached supervisor journaled both ends
        async with sched.events([waits[0], long[0]]) as stream:
            current = {}
            async for event in stream:
                assert event.kind == EventKind.CURRENT
                current[event.app_id] = event.state
                if len(current) == 2:
                    break
        assert current == {waits[0]: AppState.FAILED, long[0]: AppState.CANCELLED}
        assert await lines(sched, waits[0], "w") == []


async def test_detach_is_a_documented_run_option() -> None:
    opt = LocalScheduler("x").run_opts().get("detach")
    assert opt is not None
    assert opt.default is False


async def test_every_reader_of_a_process_sees_the_changes_another_process_makes(
    sched: LocalScheduler,
) -> None:
    ends: dict[int, AppState] = {}

    async def follow(k: int, app_id: str) -> None:
        async with sched.events([app_id]) as stream:
            async for event in stream:
                if event.terminal:
                    ends[k] = event.state
                    return

    role = Role("w", image="/", entrypoint="sh", args=["-c", "sleep 0.5; exit 2"])
    # supervised by a detached process: these readers learn of it from the journal
    app_id = await sched.submit(AppDef("elsewhere", roles=[role]), {"detach": True})
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for k in range(100):
                tg.start_soon(follow, k, app_id)
    assert ends == dict.fromkeys(range(100), AppState.FAILED)
