"""``wait`` after ``cancel`` (or fail-fast) returns once every replica is over.

Users free GPUs, ports and output dirs as soon as ``wait`` returns: the app it
returns has no replica process left, every replica reads a terminal state
with the exit code the process really had (128 + N for a signal).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from asyncsched.errors import WaitTimeoutError
from asyncsched.runner import Runner
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppDef, AppState, Role, StatusReason

from ._helpers import running
from .conftest import alive, app_of, group_pids, py_role, sh_role
from .test_orphans import owner

pytestmark = pytest.mark.anyio

#: a replica that takes a second to shut down on SIGTERM, then exits 5;
#: it touches READY (argv[1]) once its handler is set
SLOW_STOP = """
import os, signal, sys, time
def stop(*_):
    time.sleep(1)
    os._exit(5)
signal.signal(signal.SIGTERM, stop)
open(sys.argv[1], "w").close()
time.sleep(60)
"""


def slow_stopper(ready: Path, *, name: str = "worker", replicas: int = 1) -> Role:
    role = py_role(SLOW_STOP, name=name, replicas=replicas)
    role.args.append(str(ready) + "-${replica_id}")
    return role


async def until_exists(*paths: Path) -> None:
    with anyio.fail_after(15):
        while not all(p.exists() for p in paths):
            await anyio.sleep(0.02)


async def test_wait_after_cancel_returns_once_the_replica_process_has_exited(
    tmp_path: Path, log_dir: Path
) -> None:
    ready = tmp_path / "ready"
    async with LocalScheduler("t", cancel_grace=10.0) as sched:
        app_id = await sched.submit(
            app_of(slow_stopper(ready, replicas=2)), {"log_dir": str(log_dir)}
        )
        await until_exists(tmp_path / "ready-0", tmp_path / "ready-1")
        desc = await sched.describe(app_id)
        assert desc is not None
        pids = {r.pid for r in desc.roles_statuses[0].replicas if r.pid}
        assert len(pids) == 2
        await sched.cancel(app_id)
        desc = await sched.wait(app_id, timeout=30)
        # nothing of the app runs any more when wait returns
        assert not {pid for pid in pids if running(pid)}
        assert desc is not None
        assert desc.state == AppState.CANCELLED
        for replica in desc.roles_statuses[0].replicas:
            assert replica.state == AppState.CANCELLED
            assert replica.exit_code == 5  # what the process exited with
            assert replica.reason == StatusReason.CANCELLED


async def test_wait_with_a_timeout_shorter_than_the_grace_raises(
    tmp_path: Path, log_dir: Path
) -> None:
    """A cancelled app whose replicas still stop has not ended: a timeout
    that runs out first raises instead of returning CANCELLED."""
    ready = tmp_path / "ready"
    async with LocalScheduler("t", cancel_grace=10.0) as sched:
        app_id = await sched.submit(
            app_of(slow_stopper(ready)), {"log_dir": str(log_dir)}
        )
        await until_exists(tmp_path / "ready-0")
        await sched.cancel(app_id)
        described = await sched.describe(app_id)
        assert described is not None
        assert described.state == AppState.CANCELLED  # decided at once
        with pytest.raises(WaitTimeoutError) as info:
            await sched.wait(app_id, timeout=0)
        assert str(info.value) == (
            f"app {app_id!r} did not reach a terminal state within 0s (it is"
            " CANCELLED but replicas still stop: worker/0)"
        )
        desc = await sched.wait(app_id, timeout=30)
        assert desc is not None
        assert desc.roles_statuses[0].replicas[0].exit_code == 5


async def test_wait_after_fail_fast_returns_every_replica_final(
    tmp_path: Path, log_dir: Path
) -> None:
    ready = tmp_path / "ready"
    bad = sh_role(f"while [ ! -e {ready}-0 ]; do sleep 0.02; done; exit 3", name="bad")
    async with LocalScheduler("t", cancel_grace=10.0) as sched:
        app_id = await sched.submit(
            app_of(bad, slow_stopper(ready, name="long")), {"log_dir": str(log_dir)}
        )
        desc = await sched.wait(app_id, timeout=30)
        assert desc is not None
        assert desc.state == AppState.FAILED
        replicas = {r.role: r.replicas[0] for r in desc.roles_statuses}
        assert (replicas["bad"].state, replicas["bad"].exit_code) == (
            AppState.FAILED,
            3,
        )
        long = replicas["long"]
        assert (long.state, long.exit_code, long.reason) == (
            AppState.CANCELLED,
            5,
            StatusReason.CANCELLED,
        )
        assert long.pid is not None
        assert not running(long.pid)


async def test_wait_all_after_cancelling_many_apps_returns_once_all_have_exited(
    tmp_path: Path,
) -> None:
    """The 99-trials report: wait_all said CANCELLED while every process ran on."""
    ready = tmp_path / "ready"
    count = 8
    apps = [
        AppDef(f"trial{i}", roles=[slow_stopper(Path(f"{ready}{i}"))])
        for i in range(count)
    ]
    params = {"state_dir": str(tmp_path / "state"), "cancel_grace": 10.0}
    async with Runner("t", scheduler_params=params) as runner:
        handles = await runner.run_many(
            apps, "local_cwd", {"log_dir": str(tmp_path / "logs")}
        )
        await until_exists(*(Path(f"{ready}{i}-0") for i in range(count)))
        pids: set[int] = set()
        for handle in handles:
            status = await runner.status(handle)
            assert status is not None
            pids.update(r.pid for r in status.roles[0].replicas if r.pid)
        assert len(pids) == count
        for handle in handles:
            await runner.cancel(handle)
        results = await runner.wait_all(handles, timeout=30)
        assert not {pid for pid in pids if running(pid)}
        for status in results.values():
            assert status is not None
            assert status.state == AppState.CANCELLED
            assert [r.exit_code for r in status.roles[0].replicas] == [5]


async def test_a_grandchild_of_a_cancelled_replica_is_gone_when_wait_returns(
    log_dir: Path,
) -> None:
    async with LocalScheduler("t", cancel_grace=10.0) as sched:
        app_id = await sched.submit(
            app_of(sh_role("sleep 100 & echo ready; wait")), {"log_dir": str(log_dir)}
        )
        with anyio.fail_after(15):
            while True:
                desc = await sched.describe(app_id)
                assert desc is not None
                [replica] = desc.roles_statuses[0].replicas
                if replica.pid and len(group_pids(replica.pid)) >= 2:
                    break
                await anyio.sleep(0.02)
        pids = group_pids(replica.pid)
        await sched.cancel(app_id)
        await sched.wait(app_id, timeout=30)
        assert not alive(pids)


async def test_wait_after_a_cancel_from_another_process_returns_once_all_exited(
    log_dir: Path,
) -> None:
    """The app runs under another process; this one cancels and waits."""
    script = "trap 'sleep 0.5; exit 5' TERM; echo started; sleep 100 & wait"
    async for _proc, info in owner(log_dir, script, replicas=2):
        pids = info["pids"]
        assert isinstance(pids, list)
        outs = [log_dir / "owned" / str(info["app_id"]) / "w" / str(k) for k in (0, 1)]
        with anyio.fail_after(15):  # each replica has set its trap
            while not all(
                (out / "stdout.log").exists()
                and "started" in (out / "stdout.log").read_text()
                for out in outs
            ):
                await anyio.sleep(0.02)
        async with LocalScheduler("owned") as sched:
            app_id = str(info["app_id"])
            await sched.cancel(app_id)
            desc = await sched.wait(app_id, timeout=30)
            assert not [pid for pid in pids if running(pid)]
        assert desc is not None
        assert desc.state == AppState.CANCELLED
        for replica in desc.roles_statuses[0].replicas:
            assert (replica.state, replica.exit_code) == (AppState.CANCELLED, 5)
