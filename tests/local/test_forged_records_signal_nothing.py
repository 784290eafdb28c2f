"""A record names the processes that ``cancel`` signals; an edited one (by a
replica, by hand, or left by a crashed run whose pids were reused) must never
turn ``cancel`` into ``kill(-1)``, a kill of the caller's own group, or a kill
of an unrelated process."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from asyncsched.errors import InvalidArgumentError, SchedulerError
from asyncsched.schedulers.local._process import _GUARDIAN_CODE, signal_group
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState

from .conftest import alive, app_of, sh_role

ROOT = Path(__file__).resolve().parents[2]
#: above any Linux pid_max (2**22): a supervisor that is surely gone
GONE_PID = 2**22 + 1


async def _running_record(state_dir: Path) -> tuple[str, Path]:
    """An app of session "s" whose record says it runs and its supervisor died."""
    async with LocalScheduler("s") as sched:
        app_id = await sched.submit(app_of(sh_role("true")), {})
        desc = await sched.wait(app_id, timeout=60)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
    (path,) = (state_dir / "logs" / "s").glob(f"{app_id}/app.json")
    record: dict[str, Any] = json.loads(path.read_text())
    record["state"] = "RUNNING"
    record.pop("finished", None)
    record["supervisor"]["pid"] = GONE_PID
    for reps in record["roles"].values():
        for r in reps:
            r["state"] = "RUNNING"
            r["exit_code"] = None
    path.write_text(json.dumps(record))
    return app_id, path


def _sandbox() -> list[str] | None:
    """A PID namespace of its own (``kill(-1)`` stays inside), if this host allows."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    argv = [unshare, "--pid", "--fork", "--mount-proc", "--kill-child"]
    probe = subprocess.run(
        [*argv, "true"], capture_output=True, timeout=30, check=False
    )
    return argv if probe.returncode == 0 else None


@pytest.mark.parametrize("case", ["0", "1", "-1", "own-group", "caller-group"])
async def test_cancel_refuses_a_record_naming_pid_0_1_negative_or_its_own_group(
    case: str, state_dir: Path
) -> None:
    sandbox = _sandbox()
    if sandbox is None:
        # never run a kill(-1) candidate outside a PID namespace
        pytest.skip("needs `unshare --pid` (root or user namespaces)")
    app_id, path = await _running_record(state_dir)
    # sh stays pid 1 of the namespace (the ``; exit`` keeps it from exec'ing)
    script = '"$@"; exit $?'
    argv = [sys.executable, "-m", "tests.local._forged_cancel", "s", app_id]
    done = subprocess.run(
        [*sandbox, "sh", "-c", script, "sh", *argv, str(path), case],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        start_new_session=True,  # whatever happens inside never reaches pytest
    )
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    lines = done.stdout.splitlines()
    assert lines[0].startswith("outcome: refused:"), done.stdout
    assert "nothing was signalled" in lines[0] or "not a process id" in lines[0]
    assert str(path) in lines[0]  # names the record
    assert lines[1] == "canary: alive"


@pytest.mark.parametrize("start_time", [None, "other"])
async def test_cancel_never_signals_a_pid_whose_start_time_is_not_the_recorded_one(
    start_time: str | None, state_dir: Path
) -> None:
    # the pid of a crashed run's replica, now some other session leader
    victim = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        app_id, path = await _running_record(state_dir)
        record = json.loads(path.read_text())
        for reps in record["roles"].values():
            for r in reps:
                r["pid"] = victim.pid
                r["start_time"] = None if start_time is None else 12345
        path.write_text(json.dumps(record))
        async with LocalScheduler("s") as sched:
            await sched.cancel(app_id)
            desc = await sched.wait(app_id, timeout=30)
        assert desc is not None
        assert desc.state == AppState.CANCELLED
        with pytest.raises(subprocess.TimeoutExpired):
            victim.wait(timeout=0.5)
        assert alive({victim.pid}) == {victim.pid}
    finally:
        victim.kill()
        victim.wait()


@pytest.mark.parametrize("pgid", [0, 1, -1, "own"])
def test_signal_group_refuses_groups_that_reach_everyone_or_the_caller(
    pgid: int | str,
) -> None:
    target = os.getpgrp() if pgid == "own" else int(pgid)
    with pytest.raises(InvalidArgumentError, match="refusing to signal"):
        signal_group(target, 0)  # signal 0: harmless even where not refused


async def test_describe_names_a_record_whose_supervisor_pid_is_1(
    state_dir: Path,
) -> None:
    app_id, path = await _running_record(state_dir)
    record = json.loads(path.read_text())
    record["supervisor"]["pid"] = 1
    path.write_text(json.dumps(record))
    async with LocalScheduler("s") as sched:
        with pytest.raises(
            SchedulerError, match=r"supervisor\.pid is not a process id"
        ):
            await sched.describe(app_id)


def test_the_guardian_never_kills_group_1_or_its_own() -> None:
    sandbox = _sandbox()
    if sandbox is None:
        pytest.skip("needs `unshare --pid` (root or user namespaces)")
    # a guardian told to protect groups 1 and 0 and its owner's own group,
    # then orphaned (its pipe closes): it must kill none of them
    code = (
        "import os, subprocess, sys\n"
        "os.setsid()\n"
        "canary = subprocess.Popen(['sleep', '60'])\n"
        f"g = subprocess.Popen([sys.executable, '-c', {_GUARDIAN_CODE!r}],"
        " stdin=subprocess.PIPE)\n"
        "g.stdin.write(b'+1\\n+0\\n+%d\\n' % os.getpgrp())\n"
        "g.stdin.close()\n"
        "g.wait()\n"
        "try:\n"
        "    canary.wait(timeout=0.5)\n"
        "    print('canary: dead')\n"
        "except subprocess.TimeoutExpired:\n"
        "    print('canary: alive')\n"
        "canary.kill()\n"
    )
    done = subprocess.run(
        [*sandbox, "sh", "-c", '"$@"; exit $?', "sh", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        start_new_session=True,
    )
    assert done.stdout.strip() == "canary: alive", (done.stdout, done.stderr)


@pytest.mark.skipif(
    os.geteuid() != 0, reason="giving a file to another user needs root"
)
async def test_a_record_owned_by_another_user_is_never_trusted(
    state_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # e.g. planted in a log_dir others can write to: it names a real leader
    victim = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        app_id, path = await _running_record(state_dir)
        record = json.loads(path.read_text())
        for reps in record["roles"].values():
            for r in reps:
                r["pid"] = victim.pid
                r["start_time"] = _start_time(victim.pid)
        path.write_text(json.dumps(record))
        os.chown(path, 65534, 65534)
        async with LocalScheduler("s") as sched:
            with caplog.at_level(logging.WARNING):
                assert await sched.describe(app_id) is None
            assert any(
                str(path) in r.getMessage() and "uid 65534" in r.getMessage()
                for r in caplog.records
            )
            await sched.cancel(app_id)  # an unknown app: a no-op
            assert [a.app_id for a in await sched.list()] == []
        with pytest.raises(subprocess.TimeoutExpired):
            victim.wait(timeout=0.5)
    finally:
        victim.kill()
        victim.wait()


def _start_time(pid: int) -> int:
    data = Path(f"/proc/{pid}/stat").read_bytes()
    return int(data[data.rfind(b")") + 2 :].split()[19])
