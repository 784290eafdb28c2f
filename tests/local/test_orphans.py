"""No replica or grandchild outlives its owner, however the owner goes away."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from asyncsched.schedulers.local_scheduler import LocalScheduler

from .conftest import alive, app_of, group_pids, sh_role

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = "sleep 100 & sleep 100"


async def all_pids(leaders: list[int]) -> set[int]:
    """Leaders plus their grandchildren, once each group holds both sleeps."""
    with anyio.fail_after(10):
        while True:
            # one look at each group: the pids returned are the ones checked
            groups = [group_pids(leader) for leader in leaders]
            if all(len(group) >= 2 for group in groups):
                return set().union(*groups)
            await anyio.sleep(0.02)


async def assert_all_gone(pids: set[int], within: float = 5.0) -> None:
    with anyio.fail_after(within):
        while alive(pids):
            await anyio.sleep(0.02)


async def submit_sleepers(sched: LocalScheduler, log_dir: Path) -> set[int]:
    app_id = await sched.submit(
        app_of(sh_role(SCRIPT, replicas=2)), {"log_dir": str(log_dir)}
    )
    desc = await sched.describe(app_id)
    assert desc is not None
    leaders = [r.pid for r in desc.roles_statuses[0].replicas if r.pid]
    pids = await all_pids(leaders)
    assert len(pids) >= 4
    return pids


async def test_cancelling_the_awaiting_task(log_dir: Path) -> None:
    pids: set[int] = set()
    with anyio.move_on_after(1.5) as scope:
        async with LocalScheduler("o", close_grace=0.5) as sched:
            pids = await submit_sleepers(sched, log_dir)
            await sched.wait(next(iter(sched._table.apps)))
    assert scope.cancelled_caught
    assert pids
    await assert_all_gone(pids, within=0.1)


async def test_aclose(log_dir: Path) -> None:
    sched = LocalScheduler("o", close_grace=0.5)  # not entered: hosted task group
    pids = await submit_sleepers(sched, log_dir)
    await sched.aclose()
    await assert_all_gone(pids, within=0.1)


async def test_exception_in_callers_task_group(log_dir: Path) -> None:
    pids: set[int] = set()

    async def body() -> None:
        nonlocal pids
        async with LocalScheduler("o", close_grace=0.5) as sched:
            pids = await submit_sleepers(sched, log_dir)
            async with anyio.create_task_group() as tg:
                tg.start_soon(sched.wait, next(iter(sched._table.apps)))
                raise RuntimeError("caller failed")

    with pytest.raises(ExceptionGroup) as info:
        await body()
    assert info.group_contains(RuntimeError, match="caller failed")
    await assert_all_gone(pids, within=0.1)


async def owner(
    log_dir: Path, script: str = SCRIPT, replicas: int = 2
) -> AsyncIterator[tuple[subprocess.Popen[bytes], dict[str, object]]]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.local._owner",
            str(log_dir),
            script,
            str(replicas),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = await anyio.to_thread.run_sync(proc.stdout.readline)
        yield proc, json.loads(line)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name
)
async def test_signal_to_owning_process(log_dir: Path, sig: signal.Signals) -> None:
    async for proc, info in owner(log_dir):
        leaders = info["pids"]
        assert isinstance(leaders, list)
        pids = await all_pids(leaders)
        os.kill(proc.pid, sig)
        await anyio.to_thread.run_sync(proc.wait)
        await assert_all_gone(pids)
        if sig == signal.SIGKILL:
            # the record outlives the owner: another process sees a dead supervisor
            async with LocalScheduler("owned") as sched:
                desc = await sched.describe(str(info["app_id"]))
                assert desc is not None
                assert desc.state.name == "FAILED"
                assert "supervisor" in desc.msg
