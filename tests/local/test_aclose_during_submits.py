"""aclose() while submits are in flight: every returned id is supervised, nothing leaks."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import anyio
import psutil
import pytest

from asyncsched.errors import SchedulerClosedError
from asyncsched.schedulers.local_scheduler import LocalScheduler

from ._helpers import IGNORES_TERM, exists, nfds, record
from .conftest import app_of, sh_role

pytestmark = pytest.mark.anyio


# aclose while submits are in flight
@pytest.mark.parametrize("delay", [0.0, 0.003, 0.01, 0.03])
async def test_aclose_during_concurrent_submits(log_dir: Path, delay: float) -> None:
    cfg = {"log_dir": str(log_dir)}
    fds = nfds()
    s = LocalScheduler("s", close_grace=0.5)
    ok: list[tuple[str, bool]] = []
    errors: list[BaseException] = []

    async def submit(i: int) -> None:
        try:
            ok.append((await s.submit(app_of(sh_role(IGNORES_TERM)), cfg), s.closed))
        except Exception as exc:  # noqa: BLE001 -- any other error is the bug
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        for i in range(12):
            tg.start_soon(submit, i)
        await anyio.sleep(delay)
        await s.aclose()
    assert all(isinstance(e, SchedulerClosedError) for e in errors), errors
    assert len(ok) + len(errors) == 12
    app_dir = log_dir / "s"
    dirs = sorted(os.listdir(app_dir)) if app_dir.exists() else []
    assert dirs == sorted(app_id for app_id, _ in ok)  # no dir without its app
    for app_id in dirs:
        rec = record(app_dir / app_id)
        assert rec["finished"], rec
        assert rec["state"] == "CANCELLED", rec
        trapped = (app_dir / app_id / "worker" / "0" / "stdout.log").read_text()
        for r in rec["roles"]["worker"]:
            assert not exists(r["pid"])
            if trapped == "ready\n":
                # it ignored SIGTERM: it was killed after close_grace
                assert r["exit_code"] == 137  # 128 + SIGKILL
            else:  # closed before its trap was set: SIGTERM ended it
                assert r["exit_code"] in (137, 143)
    assert nfds() == fds


async def test_aclose_while_spawning_undoes_the_submit(log_dir: Path) -> None:
    fds = nfds()
    spawning = threading.Event()  # replica 0 runs, replica 1 is about to start
    closing = threading.Event()  # the scheduler is closed: let the spawn go on
    others: set[int] = set()  # this process's children before the replicas
    spawned: list[int] = []

    def before_spawn(role: str, replica_id: int) -> None:
        # (spawner thread) hold the start of replica 1 until aclose has begun
        if replica_id == 0:
            others.update(_children())
        else:
            spawned.extend(_children() - others)
            spawning.set()
            closing.wait(30)

    s = LocalScheduler("s", close_grace=0.5, before_spawn=before_spawn)

    async def close_while_spawning() -> None:
        assert await anyio.to_thread.run_sync(spawning.wait, 30)
        tg.start_soon(s.aclose)
        with anyio.fail_after(10):
            while not s.closed:  # aclose is under way
                await anyio.sleep(0.01)
        closing.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(close_while_spawning)
        with pytest.raises(SchedulerClosedError):
            await s.submit(
                app_of(sh_role("sleep 30", replicas=2)), {"log_dir": str(log_dir)}
            )
    assert len(spawned) == 1  # replica 0 had started before aclose
    assert not any(exists(pid) for pid in spawned)  # killed and reaped
    assert _children() - others == set()  # replica 1 too
    assert os.listdir(log_dir / "s") == []
    assert nfds() == fds


def _children() -> set[int]:
    """The pids of this process's children (zombies too: not reaped yet)."""
    return {child.pid for child in psutil.Process().children()}
