"""A failing background task fails only its own app; the scheduler stays usable.

Failures are injected through asyncsched's own private seams (never the OS or
a dependency): the replica reaper's exit hook, the log pump, the spawner's
completion dispatcher. Every test runs on asyncio and on trio.
"""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from asyncsched.schedulers.local import _local_app as _supervisor, _spawner
from asyncsched.schedulers.local._local_app import LocalApp
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState
from tests.local.conftest import app_of, sh_role

pytestmark = pytest.mark.anyio


def _scheduler() -> LocalScheduler:
    return LocalScheduler("contain", cancel_grace=2.0, close_grace=0.5)


async def test_a_raising_reaper_fails_only_its_app(
    log_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    original = LocalApp._on_exit

    def on_exit(self: LocalApp, *args: Any) -> None:
        if self.name == "bad":
            raise RuntimeError("reaper exploded")
        original(self, *args)

    monkeypatch.setattr(LocalApp, "_on_exit", on_exit)
    cfg = {"log_dir": str(log_dir)}
    caplog.set_level(logging.ERROR)
    async with _scheduler() as sched:
        good = await sched.submit(
            app_of(sh_role("sleep 1; echo done", replicas=2), name="good"), cfg
        )
        bad = await sched.submit(app_of(sh_role("exit 0"), name="bad"), cfg)
        desc = await sched.wait(bad, timeout=10)
        assert desc is not None
        assert desc.state == AppState.FAILED
        assert "reaper exploded" in desc.msg
        assert any("reaper exploded" in str(r.exc_info) for r in caplog.records)
        # the watchers of the other app were not cancelled: it finishes normally
        desc = await sched.describe(good)
        assert desc is not None
        assert desc.state == AppState.RUNNING
        desc = await sched.wait(good, timeout=10)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
        lines = [line async for line in sched.log_iter(good, "worker", 1)]
        assert lines == ["done\n"]
        # and the scheduler still works
        after = await sched.submit(app_of(sh_role("exit 0"), name="after"), cfg)
        desc = await sched.wait(after, timeout=10)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED


async def test_a_replica_whose_log_cannot_be_written_fails_its_app_and_is_killed(
    log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = _supervisor.pump  # type: ignore[attr-defined]

    async def pump(fd: int, log: Any, stream: str) -> None:
        if "/bad/" in log.paths["stdout"]:
            os.close(fd)  # as the real pump does, whatever happens
            raise OSError(errno.ENOSPC, "No space left on device")
        await original(fd, log, stream)

    monkeypatch.setattr(_supervisor, "pump", pump)
    cfg = {"log_dir": str(log_dir)}
    async with _scheduler() as sched:
        good = await sched.submit(app_of(sh_role("sleep 1"), name="good"), cfg)
        bad = await sched.submit(
            app_of(sh_role("sleep 60", name="bad", replicas=2), name="bad"), cfg
        )
        desc = await sched.wait(bad, timeout=10)
        assert desc is not None
        assert desc.state == AppState.FAILED
        assert "No space left on device" in desc.msg
        pids = {r.pid for s in desc.roles_statuses for r in s.replicas if r.pid}
        assert len(pids) == 2
        with anyio.fail_after(5):  # killed (SIGTERM, then SIGKILL) and reaped
            while any(psutil.pid_exists(p) for p in pids):
                await anyio.sleep(0.02)
        desc = await sched.wait(good, timeout=10)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED


async def test_a_crashed_host_service_is_restarted_and_submit_still_works(
    log_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    original = _spawner.Spawner._complete
    crashes: list[int] = []

    def complete(self: _spawner.Spawner) -> None:
        if not crashes:
            crashes.append(1)
            raise RuntimeError("dispatcher exploded")
        original(self)

    monkeypatch.setattr(_spawner.Spawner, "_complete", complete)
    caplog.set_level(logging.ERROR)
    cfg = {"log_dir": str(log_dir)}
    async with _scheduler() as sched:
        with anyio.fail_after(15):  # a dead dispatcher would hang this submit
            app_id = await sched.submit(app_of(sh_role("exit 0")), cfg)
            desc = await sched.wait(app_id)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
    assert crashes == [1]
    assert any("restarting" in r.getMessage() for r in caplog.records)


async def test_a_record_that_cannot_be_written_fails_only_its_app(
    log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = _supervisor.write_json_atomic  # type: ignore[attr-defined]

    def write_json_atomic(path: str, data: Any) -> None:
        if f"{os.sep}bad-" in path:
            raise OSError(errno.ENOSPC, "No space left on device")
        original(path, data)

    monkeypatch.setattr(_supervisor, "write_json_atomic", write_json_atomic)
    cfg = {"log_dir": str(log_dir)}
    async with _scheduler() as sched:
        good = await sched.submit(app_of(sh_role("sleep 1"), name="good"), cfg)
        bad = await sched.submit(app_of(sh_role("sleep 60"), name="bad"), cfg)
        desc = await sched.wait(bad, timeout=10)
        assert desc is not None
        assert desc.state == AppState.FAILED
        assert "No space left on device" in desc.msg
        desc = await sched.wait(good, timeout=10)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
        assert (log_dir / "contain" / good / "SUCCESS").exists()
