"""The local backend runs on asyncio and trio; a scheduler on the wrong loop says so."""

from __future__ import annotations

from pathlib import Path

import anyio
import psutil
import pytest

from asyncsched.errors import SchedulerUnavailableError
from asyncsched.runner import Runner
from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState
from asyncsched.sync import SyncRunner
from tests.local.conftest import app_of, py_role, sh_role


def test_local_capabilities_name_both_event_loops() -> None:
    assert set(LocalScheduler.capabilities.event_loops) == {"asyncio", "trio"}


@pytest.mark.anyio
async def test_scheduler_works_without_async_with(
    anyio_backend: str, log_dir: Path
) -> None:
    sched = LocalScheduler("loops", close_grace=0.5)
    try:
        app_id = await sched.submit(
            app_of(sh_role("echo hi")), {"log_dir": str(log_dir)}
        )
        desc = await sched.wait(app_id, timeout=10)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
        assert [line async for line in sched.log_iter(app_id, "worker")] == ["hi\n"]
    finally:
        await sched.aclose()


@pytest.mark.anyio
async def test_cancel_retries_and_tailing(anyio_backend: str, log_dir: Path) -> None:
    cfg = {"log_dir": str(log_dir)}
    async with LocalScheduler("loops", cancel_grace=2, close_grace=0.5) as sched:
        flaky = await sched.submit(
            app_of(py_role("import sys; sys.exit(3)", max_retries=1)), cfg
        )
        slow = await sched.submit(
            app_of(sh_role("echo up; sleep 60"), name="slow"), cfg
        )
        lines = sched.log_iter(slow, "worker", should_tail=True)
        with anyio.fail_after(10):
            assert await anext(lines) == "up\n"
        await lines.aclose()
        await sched.cancel(slow)
        desc = await sched.wait(slow, timeout=10)
        assert desc is not None
        assert desc.state == AppState.CANCELLED
        desc = await sched.wait(flaky, timeout=10)
        assert desc is not None
        assert desc.state == AppState.FAILED
        assert desc.num_restarts == 1


@pytest.mark.anyio
async def test_closing_cancels_running_apps(anyio_backend: str, log_dir: Path) -> None:
    sched = LocalScheduler("loops", close_grace=0.5)
    async with sched:
        app_id = await sched.submit(
            app_of(sh_role("sleep 60", replicas=2)), {"log_dir": str(log_dir)}
        )
        desc = await sched.describe(app_id)
        assert desc is not None
        pids = [r.pid for s in desc.roles_statuses for r in s.replicas]

    with anyio.fail_after(5):
        while any(p and psutil.pid_exists(p) for p in pids):
            await anyio.sleep(0.02)


async def test_docker_scheduler_under_trio_raises_a_clear_error() -> None:
    async def main() -> None:
        async with DockerScheduler("loops", docker_host="unix:///nonexistent.sock"):
            pass  # pragma: no cover - refused on entry

    with pytest.raises(SchedulerUnavailableError, match="trio"):
        await anyio.to_thread.run_sync(lambda: anyio.run(main, backend="trio"))


@pytest.mark.anyio
async def test_runner_without_async_with(anyio_backend: str, tmp_path: Path) -> None:
    runner = Runner("loops", scheduler_params={"state_dir": str(tmp_path / "st")})
    try:
        handle = await runner.run(app_of(sh_role("exit 0")), "local_cwd")
        status = await runner.wait(handle, timeout=10)
        assert status is not None
        assert status.state == AppState.SUCCEEDED
    finally:
        await runner.aclose()


def test_sync_facade_on_trio_runs_local_apps(tmp_path: Path) -> None:
    params = {"state_dir": str(tmp_path / "st")}
    with SyncRunner("loops", scheduler_params=params, event_loop="trio") as runner:
        handle = runner.run(app_of(sh_role("echo hi")), "local_cwd")
        status = runner.wait(handle, timeout=10)
        assert status is not None
        assert status.state == AppState.SUCCEEDED
