"""A failing background task fails only its own app; the scheduler stays usable.

Failures are injected through the backend's fault seam, ``LocalFaults`` (never
the OS, a dependency or the backend's internals): the replica reaper's exit,
the log reader, the spawner's completion dispatcher, the record writer. Every
test runs on asyncio and on trio.
"""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

import anyio
import psutil
import pytest

from asyncsched.errors import InvalidArgumentError
from asyncsched.schedulers.local import LocalFaults, LocalScheduler
from asyncsched.specs import AppState
from tests.local.conftest import app_of, sh_role

pytestmark = pytest.mark.anyio


def _scheduler(faults: LocalFaults) -> LocalScheduler:
    return LocalScheduler("contain", cancel_grace=2.0, close_grace=0.5, faults=faults)


async def test_a_raising_reaper_fails_only_its_app(
    log_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def before_exit(app_id: str, role: str, replica_id: int) -> None:
        if app_id.startswith("bad-"):
            raise RuntimeError("reaper exploded")

    cfg = {"log_dir": str(log_dir)}
    caplog.set_level(logging.ERROR)
    async with _scheduler(LocalFaults(before_exit=before_exit)) as sched:
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
    log_dir: Path,
) -> None:
    def before_log(path: str) -> None:
        if f"{os.sep}bad{os.sep}" in path:
            raise OSError(errno.ENOSPC, "No space left on device")

    cfg = {"log_dir": str(log_dir)}
    async with _scheduler(LocalFaults(before_log=before_log)) as sched:
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
    log_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    crashes: list[int] = []

    def before_dispatch() -> None:
        if not crashes:
            crashes.append(1)
            raise RuntimeError("dispatcher exploded")

    caplog.set_level(logging.ERROR)
    cfg = {"log_dir": str(log_dir)}
    async with _scheduler(LocalFaults(before_dispatch=before_dispatch)) as sched:
        with anyio.fail_after(15):  # a dead dispatcher would hang this submit
            app_id = await sched.submit(app_of(sh_role("exit 0")), cfg)
            desc = await sched.wait(app_id)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
    assert crashes == [1]
    assert any("restarting" in r.getMessage() for r in caplog.records)


async def test_a_record_that_cannot_be_written_fails_only_its_app(
    log_dir: Path,
) -> None:
    def before_record(path: str) -> None:
        if f"{os.sep}bad-" in path:
            raise OSError(errno.ENOSPC, "No space left on device")

    cfg = {"log_dir": str(log_dir)}
    async with _scheduler(LocalFaults(before_record=before_record)) as sched:
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


def test_before_spawn_given_twice_is_refused() -> None:
    def hook(role: str, replica_id: int) -> None:
        pass

    with pytest.raises(InvalidArgumentError, match="not both"):
        LocalScheduler("s", before_spawn=hook, faults=LocalFaults(before_spawn=hook))
