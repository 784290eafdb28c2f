"""One reaper per scheduler serves every replica's exit and output.

Exits that come together are each recorded with their own code, a replica
killed from outside still gets its status, and one app's cancel leaves the
reaper serving the others. Every test runs on asyncio and on trio.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import sniffio

from asyncsched.schedulers.local import JournalBounds, LocalFaults, LocalScheduler
from asyncsched.schedulers.local._logs import ReplicaLog, create_log_files
from asyncsched.schedulers.local._open_files import OpenFiles
from asyncsched.schedulers.local._process import Child
from asyncsched.schedulers.local._reaper import Reaper, Watch
from asyncsched.specs import AppState, CfgVal
from tests.local._helpers import objects_per_finished_app
from tests.local.conftest import app_of, sh_role

pytestmark = pytest.mark.anyio

APPS = 4
REPLICAS = 50  # 200 exits at once


async def _wait_for_files(folder: Path, count: int, timeout: float = 60) -> None:
    with anyio.fail_after(timeout):
        while len(os.listdir(folder)) < count:
            await anyio.sleep(0.02)


class Gate:
    """A fifo replicas stop at until the test opens it: they all pass at once.

    Each replica marks its arrival with a file in ``ready``; the fifo is held
    open for writing, so replicas open it without blocking and all read EOF
    together when :meth:`open` closes it.
    """

    def __init__(self, folder: Path) -> None:
        self.fifo = folder / "go"
        os.mkfifo(self.fifo)
        self.ready = folder / "ready"
        self.ready.mkdir()
        self._hold = os.open(self.fifo, os.O_RDWR | os.O_NONBLOCK)

    def stop(self, mark: str) -> str:
        """Shell: mark the arrival as ``mark``, then wait for the gate to open."""
        return f"exec 3<{self.fifo}; touch {self.ready}/{mark}; read x <&3"

    async def arrived(self, count: int) -> None:
        """Wait until ``count`` arrivals are marked."""
        await _wait_for_files(self.ready, count)

    def open(self) -> None:
        """Let every replica waiting at the gate go on (idempotent)."""
        if self._hold >= 0:
            os.close(self._hold)
            self._hold = -1


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Gate]:
    gate = Gate(tmp_path)
    yield gate
    gate.open()


async def test_200_exits_at_once_are_each_recorded_with_their_own_code(
    log_dir: Path, gate: Gate
) -> None:
    cfg: dict[str, CfgVal] = {"log_dir": str(log_dir), "fail_fast": False}
    async with LocalScheduler("reap200", max_running_replicas=APPS * REPLICAS) as s:
        app_ids = []
        for a in range(APPS):
            script = (
                f"{gate.stop(f'{a}-$ASYNCSCHED_REPLICA_ID')};"
                f" echo bye {a}-$ASYNCSCHED_REPLICA_ID;"
                f" exit $(( (ASYNCSCHED_REPLICA_ID + {a}) % 4 * 3 ))"
            )
            role = sh_role(script, replicas=REPLICAS)
            app_ids.append(await s.submit(app_of(role, name=f"a{a}"), cfg))
        await gate.arrived(APPS * REPLICAS)
        gate.open()
        for a, app_id in enumerate(app_ids):
            desc = await s.wait(app_id, timeout=60)
            assert desc is not None
            replicas = desc.roles_statuses[0].replicas
            assert len(replicas) == REPLICAS
            for r in replicas:
                want = (r.id + a) % 4 * 3
                assert r.exit_code == want, (app_id, r.id)
                assert r.state == (AppState.SUCCEEDED if want == 0 else AppState.FAILED)
            # and each replica's last words made it into its log
            for k in (0, REPLICAS - 1):
                lines = [x async for x in s.log_iter(app_id, "worker", k)]
                assert lines == [f"bye {a}-{k}\n"]


async def test_a_replica_killed_from_outside_gets_its_status(
    sched: LocalScheduler, log_dir: Path, tmp_path: Path
) -> None:
    ready = tmp_path / "ready"
    ready.mkdir()
    role = sh_role(f"touch {ready}/up; exec sleep 300")
    app_id = await sched.submit(app_of(role), {"log_dir": str(log_dir)})
    await _wait_for_files(ready, 1)
    desc = await sched.describe(app_id)
    assert desc is not None
    pid = desc.roles_statuses[0].replicas[0].pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    desc = await sched.wait(app_id, timeout=30)
    assert desc is not None
    assert desc.state == AppState.FAILED
    replica = desc.roles_statuses[0].replicas[0]
    assert replica.exit_code == 128 + signal.SIGKILL
    assert "137" in desc.msg


async def test_one_apps_cancel_leaves_the_shared_reaper_serving_the_others(
    sched: LocalScheduler, log_dir: Path, gate: Gate
) -> None:
    cfg = {"log_dir": str(log_dir)}
    doomed = await sched.submit(
        app_of(sh_role(f"touch {gate.ready}/doomed; exec sleep 300"), name="doomed"),
        cfg,
    )
    others = []
    for i in range(3):
        script = f"echo before; {gate.stop(f'o{i}')}; seq 1 20000; exit 3"
        others.append(await sched.submit(app_of(sh_role(script), name=f"o{i}"), cfg))
    await gate.arrived(4)
    await sched.cancel(doomed)
    desc = await sched.wait(doomed, timeout=30)
    assert desc is not None
    assert desc.state == AppState.CANCELLED
    gate.open()
    for app_id in others:
        desc = await sched.wait(app_id, timeout=30)
        assert desc is not None
        assert desc.state == AppState.FAILED
        assert desc.roles_statuses[0].replicas[0].exit_code == 3
        lines = [x async for x in sched.log_iter(app_id, "worker", 0)]
        assert lines == ["before\n", *(f"{n}\n" for n in range(1, 20001))]


async def test_without_a_pidfd_the_reaper_still_sees_the_exit_and_the_output(
    tmp_path: Path,
) -> None:
    log = ReplicaLog(str(tmp_path), create_log_files(str(tmp_path)), OpenFiles(4))
    out_r, out_w = os.pipe()
    popen = subprocess.Popen(
        ["sh", "-c", "echo hello; exit 5"], stdout=out_w, start_new_session=True
    )
    os.close(out_w)
    child = Child(popen)
    child.close()  # no pidfd: as on systems without pidfd_open
    assert child.pidfd is None
    exited: list[Watch] = []
    reaper = Reaper()
    async with anyio.create_task_group() as tg:

        def spawn(func: Any, *args: Any, name: str | None = None) -> None:
            tg.start_soon(func, *args)

        reaper.set_spawner(spawn)
        tg.start_soon(reaper.run)
        w = reaper.watch(
            child, log, {"stdout": out_r}, exited.append, lambda w, e: None
        )
        with anyio.fail_after(30):
            await w.wait_drained()
            while not exited:
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    reaper.close()
    assert await child.reap() == 5
    log.close()
    assert Path(log.paths["stdout"]).read_bytes() == b"hello\n"


def _count_tasks() -> int:
    """Tasks alive in this event loop (asyncio or trio)."""
    if sniffio.current_async_library() == "asyncio":
        return len(asyncio.all_tasks())
    import trio

    def walk(task: trio.lowlevel.Task) -> int:
        return 1 + sum(walk(t) for n in task.child_nurseries for t in n.child_tasks)

    root = trio.lowlevel.current_root_task()
    assert root is not None
    return walk(root)


async def test_running_replicas_cost_no_task_each(
    sched: LocalScheduler, log_dir: Path, gate: Gate
) -> None:
    cfg = {"log_dir": str(log_dir)}

    def script(name: str) -> str:
        return f"{gate.stop(f'{name}-$ASYNCSCHED_REPLICA_ID')}; exit 0"

    # one replica running: the scheduler's own tasks are up
    first = await sched.submit(app_of(sh_role(script("f")), name="first"), cfg)
    await gate.arrived(1)
    before = _count_tasks()
    role = sh_role(script("m"), replicas=40)
    many = await sched.submit(app_of(role, name="many"), cfg)
    await gate.arrived(41)
    assert _count_tasks() - before < 5  # was 3 or more per replica
    gate.open()
    for app_id in (first, many):
        desc = await sched.wait(app_id, timeout=30)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED


async def test_a_crashed_reaper_is_restarted_and_loses_no_exit(
    log_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    crashes: list[int] = []

    def before_reaper_turn() -> None:
        if not crashes:
            crashes.append(1)
            raise RuntimeError("reaper exploded")

    caplog.set_level(logging.ERROR)
    faults = LocalFaults(before_reaper_turn=before_reaper_turn)
    cfg = {"log_dir": str(log_dir)}
    async with LocalScheduler("crash", faults=faults) as sched:
        app_id = await sched.submit(app_of(sh_role("echo out; exit 4")), cfg)
        desc = await sched.wait(app_id, timeout=30)
        assert desc is not None
        assert desc.state == AppState.FAILED
        assert desc.roles_statuses[0].replicas[0].exit_code == 4
        assert [x async for x in sched.log_iter(app_id, "worker")] == ["out\n"]
    assert crashes == [1]
    assert any("restarting" in r.getMessage() for r in caplog.records)


async def test_a_finished_app_keeps_few_objects_for_the_collector(
    log_dir: Path,
) -> None:
    apps = 50
    cfg = {"log_dir": str(log_dir)}
    role = sh_role("exit 0")
    # warm-up: enough finished apps (each appends at least one journal batch)
    # to fill the bounded tail of batches the journal keeps for its readers,
    # a constant cost that is not any one app's (a short tail: a short warm-up)
    warm = 16
    bounds = JournalBounds(tail_batches=warm)
    async with LocalScheduler(
        "objs", cache_size=apps + 2, journal_bounds=bounds
    ) as sched:
        async with anyio.create_task_group() as tg:
            for i in range(warm):
                tg.start_soon(
                    sched.wait, await sched.submit(app_of(role, name=f"w{i}"), cfg)
                )
        per_app = await objects_per_finished_app(
            sched, lambda name: app_of(role, name=name), cfg, apps
        )
    # the app, its replica and log, the submitted AppDef (38 before a
    # finished app dropped its spare event and callbacks)
    assert per_app < 36, per_app
