"""Local replicas carry a typed reason for every non-success (real processes)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

import anyio
import pytest

from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState, StatusReason
from asyncsched.testing import wait_for_state

from .conftest import app_of, sh_role
from .test_orphans import owner

pytestmark = pytest.mark.anyio


async def _pid_when_ready(sched: LocalScheduler, app_id: str) -> int:
    lines = sched.log_iter(app_id, "worker", should_tail=True)
    async with contextlib.aclosing(lines):
        async for line in lines:
            assert line == "ready\n"
            break
    desc = await sched.describe(app_id)
    assert desc is not None
    pid = desc.roles_statuses[0].replicas[0].pid
    assert pid is not None
    return pid


async def test_a_replica_killed_from_outside_reads_signal_137(log_dir: Path) -> None:
    cfg = {"log_dir": str(log_dir)}
    async with LocalScheduler("reasons") as sched:
        app_id = await sched.submit(app_of(sh_role("echo ready; exec sleep 300")), cfg)
        os.kill(await _pid_when_ready(sched, app_id), signal.SIGKILL)
        desc = await sched.wait(app_id, timeout=30)
        # and the same read back from the record by another scheduler
        async with LocalScheduler("reasons") as other:
            again = await other.describe(app_id)
    for d in (desc, again):
        assert d is not None
        assert d.state == AppState.FAILED
        replica = d.roles_statuses[0].replicas[0]
        assert (replica.reason, replica.exit_code) == (StatusReason.SIGNAL, 137)
        assert "SIGKILL" in replica.message
        assert d.reason == StatusReason.SIGNAL


@pytest.mark.parametrize(
    ("script", "reason", "code"),
    [
        ("exit 3", StatusReason.EXIT_CODE, 3),
        ("./not-there", StatusReason.LAUNCH_FAILED, 127),
        ("/etc/passwd", StatusReason.LAUNCH_FAILED, 126),
    ],
)
async def test_exit_codes_and_commands_that_cannot_run(
    log_dir: Path, script: str, reason: StatusReason, code: int
) -> None:
    async with LocalScheduler("reasons") as sched:
        app_id = await sched.submit(app_of(sh_role(script)), {"log_dir": str(log_dir)})
        desc = await sched.wait(app_id, timeout=30)
    assert desc is not None
    assert desc.state == AppState.FAILED
    replica = desc.roles_statuses[0].replicas[0]
    assert (replica.reason, replica.exit_code) == (reason, code)
    assert desc.reason == reason
    assert "reason: " + reason.value in desc_format(desc)


def desc_format(desc: object) -> str:
    from asyncsched.runner._core import _to_status  # the status users print

    return _to_status(desc).format()  # type: ignore[arg-type]


async def test_cancel_reads_cancelled_and_fail_fast_names_the_failure(
    log_dir: Path,
) -> None:
    cfg = {"log_dir": str(log_dir)}
    async with LocalScheduler("reasons") as sched:
        app_id = await sched.submit(app_of(sh_role("echo ready; exec sleep 300")), cfg)
        await _pid_when_ready(sched, app_id)
        await sched.cancel(app_id)
        desc = await sched.wait(app_id, timeout=30)
        assert desc is not None
        assert desc.state == AppState.CANCELLED
        assert desc.reason == StatusReason.CANCELLED
        with anyio.fail_after(30):  # the replica exits once its SIGTERM lands
            while desc.roles_statuses[0].replicas[0].state == AppState.RUNNING:
                await anyio.sleep(0.02)
                desc = await sched.describe(app_id)
                assert desc is not None
        assert desc.roles_statuses[0].replicas[0].reason == StatusReason.CANCELLED
        # one replica fails, fail-fast stops the other: the app says why it failed
        script = 'if [ "$ASYNCSCHED_REPLICA_ID" = 0 ]; then exit 4; fi; exec sleep 300'
        mixed = await sched.submit(app_of(sh_role(script, replicas=2)), cfg)
        with anyio.fail_after(30):
            desc = await sched.wait(mixed)
            assert desc is not None
            while any(
                r.state == AppState.RUNNING for r in desc.roles_statuses[0].replicas
            ):
                await anyio.sleep(0.02)
                desc = await sched.describe(mixed)
                assert desc is not None
    assert desc.state == AppState.FAILED
    assert desc.reason == StatusReason.EXIT_CODE
    first, second = desc.roles_statuses[0].replicas
    assert (first.reason, first.exit_code) == (StatusReason.EXIT_CODE, 4)
    assert second.reason == StatusReason.CANCELLED
    assert "another replica failed" in second.message


async def test_the_app_message_gives_a_signal_death_as_its_replica_does(
    log_dir: Path,
) -> None:
    """One convention (128 + N) in the app message, the replica, the files."""
    cfg = {"log_dir": str(log_dir)}
    async with LocalScheduler("reasons") as sched:
        app_id = await sched.submit(app_of(sh_role("echo ready; exec sleep 300")), cfg)
        os.kill(await _pid_when_ready(sched, app_id), signal.SIGKILL)
        desc = await sched.wait(app_id, timeout=30)
    assert desc is not None
    replica = desc.roles_statuses[0].replicas[0]
    assert desc.msg == "replica worker/0 killed by SIGKILL (exit code 137)"
    assert replica.message == "killed by SIGKILL (exit code 137)"
    assert replica.exit_code == 137
    app_dir = log_dir / "reasons" / app_id
    record = json.loads((app_dir / "app.json").read_text())
    [recorded] = record["roles"]["worker"]
    assert recorded["exit_code"] == 137
    assert [a["exit_code"] for a in recorded["attempts"]] == [137]
    success = json.loads((app_dir / "SUCCESS").read_text())
    assert success["roles"]["worker"][0]["exitcode"] == 137


async def test_a_lost_supervisor_reads_node_failure_not_launch_failed(
    log_dir: Path,
) -> None:
    """Replicas that ran, then went down with their SIGKILLed supervisor."""
    async for proc, info in owner(log_dir, "echo started; sleep 100", replicas=1):
        with anyio.fail_after(15):  # the replica ran and printed
            while not list(log_dir.glob("owned/*/w/0/stdout.log")) or (
                "started"
                not in next(log_dir.glob("owned/*/w/0/stdout.log")).read_text()
            ):
                await anyio.sleep(0.02)
        proc.kill()
        await anyio.to_thread.run_sync(proc.wait)
        async with LocalScheduler("owned") as sched:
            app_id = str(info["app_id"])
            # until the guardian has stopped it
            await wait_for_state(sched, app_id, AppState.FAILED, timeout=15)
            final = await sched.wait(app_id, timeout=15)
    assert final is not None
    assert final.reason == StatusReason.NODE_FAILURE
    [replica] = final.roles_statuses[0].replicas
    assert replica.state == AppState.FAILED
    assert replica.reason == StatusReason.NODE_FAILURE
    assert f"the supervisor (pid {proc.pid}) died" in replica.message
    assert "LAUNCH_FAILED" not in desc_format(final)
