"""An app's life: states, describe and list, cancel, fail-fast, close."""

from __future__ import annotations

import time
from contextlib import aclosing
from pathlib import Path

import anyio
import pytest

from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState

from ._helpers import lines, run
from .conftest import app_of, py_role, sh_role

pytestmark = pytest.mark.anyio


async def test_failed_replica_reports_exit_code(
    sched: LocalScheduler, log_dir: Path
) -> None:
    app_id, state = await run(
        sched, app_of(py_role("raise SystemExit(3)")), {"log_dir": str(log_dir)}
    )
    assert state == AppState.FAILED
    desc = await sched.describe(app_id)
    assert desc is not None
    [replica] = desc.roles_statuses[0].replicas
    assert replica.exit_code == 3
    assert replica.state == AppState.FAILED
    assert replica.pid is not None
    assert "exited with code 3" in desc.msg


async def test_two_roles_and_describe_lifecycle(
    sched: LocalScheduler, log_dir: Path
) -> None:
    app = app_of(sh_role("echo a", name="a"), sh_role("echo b", name="b", replicas=2))
    app_id, state = await run(sched, app, {"log_dir": str(log_dir)})
    assert state == AppState.SUCCEEDED
    assert await sched.describe("nope-bcdfg") is None
    app_id = await sched.submit(app_of(sh_role("sleep 30")), {"log_dir": str(log_dir)})
    desc = await sched.describe(app_id)
    assert desc is not None
    assert desc.state == AppState.RUNNING
    assert desc.roles[0].name == "worker"
    assert await sched.exists(app_id)
    t0 = time.monotonic()
    await sched.cancel(app_id)
    assert time.monotonic() - t0 < 0.5  # does not block for the grace
    desc = await sched.describe(app_id)
    assert desc is not None
    assert desc.state == AppState.CANCELLED
    assert await sched.exists(app_id)
    await sched.cancel(app_id)  # idempotent


async def test_cancel_escalates_to_sigkill_after_grace(log_dir: Path) -> None:
    code = "import signal, time, sys; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    async with LocalScheduler("s", cancel_grace=0.3) as s:
        app_id = await s.submit(app_of(py_role(code)), {"log_dir": str(log_dir)})
        async with aclosing(s.log_iter(app_id, "worker", should_tail=True)) as it:
            assert await anext(it) == "ready\n"
        await s.cancel(app_id)
        app = s._table.apps[app_id]
        with anyio.fail_after(5):
            await app.finished.wait()
        desc = await s.describe(app_id)
        assert desc is not None
        assert (
            desc.roles_statuses[0].replicas[0].exit_code == 137
        )  # 128 + SIGKILL, as a shell reports it


async def test_list_returns_known_apps(sched: LocalScheduler, log_dir: Path) -> None:
    a, _ = await run(
        sched, app_of(sh_role("exit 0"), name="one"), {"log_dir": str(log_dir)}
    )
    b, _ = await run(
        sched, app_of(sh_role("exit 1"), name="two"), {"log_dir": str(log_dir)}
    )
    listed = {x.app_id: x for x in await sched.list()}
    assert listed[a].state == AppState.SUCCEEDED
    assert listed[a].name == "one"
    assert listed[b].state == AppState.FAILED


async def test_cancelling_wait_does_not_kill_the_app(
    sched: LocalScheduler, log_dir: Path
) -> None:
    app_id = await sched.submit(
        app_of(sh_role("sleep 0.5; echo survived")), {"log_dir": str(log_dir)}
    )
    with anyio.move_on_after(0.1):
        await sched.wait(app_id)
    desc = await sched.wait(app_id, timeout=10)
    assert desc is not None
    assert desc.state == AppState.SUCCEEDED
    assert await lines(sched, app_id) == ["survived\n"]


async def test_fail_fast_terminates_the_others(
    sched: LocalScheduler, log_dir: Path
) -> None:
    app = app_of(sh_role("exit 2", name="bad"), sh_role("sleep 30", name="slow"))
    t0 = time.monotonic()
    app_id, state = await run(sched, app, {"log_dir": str(log_dir)})
    assert state == AppState.FAILED
    assert time.monotonic() - t0 < 10
    with anyio.fail_after(5):
        app_in_memory = sched._table.apps.get(app_id)  # None: finished, compact
        if app_in_memory is not None:
            await app_in_memory.finished.wait()
    desc = await sched.describe(app_id)
    assert desc is not None
    by_role = {rs.role: rs.replicas[0] for rs in desc.roles_statuses}
    assert by_role["bad"].state == AppState.FAILED
    assert by_role["slow"].state == AppState.CANCELLED


async def test_without_fail_fast_the_others_finish(
    sched: LocalScheduler, log_dir: Path, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    slow = f"while [ ! -e {go} ]; do sleep 0.01; done; echo done"
    app = app_of(sh_role("exit 2", name="bad"), sh_role(slow, name="slow"))
    app_id = await sched.submit(app, {"log_dir": str(log_dir), "fail_fast": False})
    with anyio.fail_after(10):
        while True:  # poll until the bad replica has failed
            desc = await sched.describe(app_id)
            assert desc is not None
            states = {rs.role: rs.replicas[0].state for rs in desc.roles_statuses}
            if states["bad"] == AppState.FAILED:
                break
            await anyio.sleep(0.01)
    assert desc.state == AppState.RUNNING
    go.touch()
    desc = await sched.wait(app_id, timeout=10)
    assert desc is not None
    assert desc.state == AppState.FAILED
    by_role = {rs.role: rs.replicas[0] for rs in desc.roles_statuses}
    assert by_role["slow"].state == AppState.SUCCEEDED
    assert await lines(sched, app_id, "slow") == ["done\n"]


async def test_grandchildren_left_behind_are_killed_when_replica_exits(
    sched: LocalScheduler, log_dir: Path
) -> None:
    code = "import subprocess, sys; p = subprocess.Popen(['sleep', '30']); print(p.pid)"
    app_id, state = await run(sched, app_of(py_role(code)), {"log_dir": str(log_dir)})
    assert state == AppState.SUCCEEDED
    from .conftest import alive

    [pid] = [int(x) for x in await lines(sched, app_id)]
    with anyio.fail_after(5):
        while alive({pid}):
            await anyio.sleep(0.02)


async def test_close_kills_every_replica(log_dir: Path) -> None:
    from .conftest import alive

    pids: set[int] = set()
    async with LocalScheduler("s", close_grace=0.5) as s:
        for _ in range(2):
            app_id = await s.submit(
                app_of(sh_role("sleep 30", replicas=4)), {"log_dir": str(log_dir)}
            )
            desc = await s.describe(app_id)
            assert desc is not None
            pids |= {r.pid for r in desc.roles_statuses[0].replicas if r.pid}
        assert len(alive(pids)) == 8
        await s.aclose()
        assert alive(pids) == set()
        await s.aclose()
