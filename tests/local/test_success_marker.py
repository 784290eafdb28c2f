"""The SUCCESS file exists as soon as the local backend reports an app terminal.

TorchX writes ``<log_dir>/<session>/<app_id>/SUCCESS`` when an app ends; code
migrating from TorchX checks for it right after ``describe``/``wait`` return a
terminal state, so it must never lag behind the state.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest

from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState

from .conftest import app_of, sh_role

pytestmark = pytest.mark.anyio


def success_path(log_dir: Path, session: str, app_id: str) -> Path:
    return log_dir / session / app_id / "SUCCESS"


async def test_success_file_exists_when_wait_returns_succeeded(
    sched: LocalScheduler, log_dir: Path
) -> None:
    cfg = {"log_dir": str(log_dir)}
    app_ids = [
        await sched.submit(app_of(sh_role("true"), name=f"quick{i}"), cfg)
        for i in range(20)
    ]
    missing: list[str] = []

    async def check(app_id: str) -> None:
        desc = await sched.wait(app_id, timeout=30)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
        if not os.path.exists(success_path(log_dir, "test", app_id)):
            missing.append(app_id)

    async with anyio.create_task_group() as tg:
        for app_id in app_ids:
            tg.start_soon(check, app_id)
    assert missing == []


async def test_success_file_exists_when_describe_first_reports_succeeded(
    sched: LocalScheduler, log_dir: Path
) -> None:
    cfg = {"log_dir": str(log_dir)}
    app_ids = [
        await sched.submit(app_of(sh_role("true"), name=f"poll{i}"), cfg)
        for i in range(20)
    ]
    missing: list[str] = []

    async def poll(app_id: str) -> None:
        with anyio.fail_after(30):
            while True:
                desc = await sched.describe(app_id)
                assert desc is not None
                if desc.state == AppState.SUCCEEDED:
                    break
                await anyio.sleep(0)  # poll as fast as the loop allows
        if not os.path.exists(success_path(log_dir, "test", app_id)):
            missing.append(app_id)

    async with anyio.create_task_group() as tg:
        for app_id in app_ids:
            tg.start_soon(poll, app_id)
    assert missing == []


async def test_success_file_records_final_state_and_replicas(
    sched: LocalScheduler, log_dir: Path
) -> None:
    app_id = await sched.submit(
        app_of(sh_role("exit 0", replicas=2), name="rec"), {"log_dir": str(log_dir)}
    )
    desc = await sched.describe(app_id)
    with anyio.fail_after(30):
        while desc is None or desc.state != AppState.SUCCEEDED:
            await anyio.sleep(0.01)
            desc = await sched.describe(app_id)
    data = json.loads(success_path(log_dir, "test", app_id).read_text())
    assert data["app_id"] == app_id
    assert data["final_state"] == "SUCCEEDED"
    assert [r["exitcode"] for r in data["roles"]["worker"]] == [0, 0]


async def test_success_file_exists_when_another_scheduler_sees_succeeded(
    sched: LocalScheduler, log_dir: Path
) -> None:
    cfg = {"log_dir": str(log_dir)}
    app_ids = [
        await sched.submit(app_of(sh_role("true"), name=f"remote{i}"), cfg)
        for i in range(20)
    ]
    missing: list[str] = []
    async with LocalScheduler("test") as observer:  # reads the records on disk

        async def poll(app_id: str) -> None:
            with anyio.fail_after(30):
                while True:
                    desc = await observer.describe(app_id)
                    if desc is not None and desc.state == AppState.SUCCEEDED:
                        break
                    await anyio.sleep(0.001)
            if not os.path.exists(success_path(log_dir, "test", app_id)):
                missing.append(app_id)

        async with anyio.create_task_group() as tg:
            for app_id in app_ids:
                tg.start_soon(poll, app_id)
    assert missing == []


async def test_list_reports_succeeded_only_with_the_success_file(
    sched: LocalScheduler, log_dir: Path
) -> None:
    app_id = await sched.submit(
        app_of(sh_role("true"), name="listed"), {"log_dir": str(log_dir)}
    )
    with anyio.fail_after(30):
        while True:
            rows = [r for r in await sched.list() if r.app_id == app_id]
            if rows and rows[0].state == AppState.SUCCEEDED:
                break
            await anyio.sleep(0)
    assert success_path(log_dir, "test", app_id).exists()
