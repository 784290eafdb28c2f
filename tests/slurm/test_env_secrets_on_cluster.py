"""A replica's environment reaches it intact, yet no value is on any command line
on the node (``ps``) or in the job's output files; the values sit in owner-only
files that a retried run reads again and that go when the job succeeds or is
cancelled (a real cluster)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from asyncsched.schedulers.slurm._envdir import ENV_DIR_PREFIX
from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.specs import AppDef, AppState, Resource, Role, is_terminal

from .cluster import Cluster
from .conftest import SETTLE

pytestmark = [pytest.mark.slurm, pytest.mark.anyio]

#: recognisable by MARK wherever a piece of it lands
MARK = "tok-9c1e5b"
SECRET = f"{MARK} 'single' \"double\" $HOME `id`\nsecond line ünïcödé"

#: each replica dumps its environment, says it is running, and waits for the test
HOLD = (
    'env -0 >"env-$ASYNCSCHED_REPLICA_ID.tmp";'
    ' mv "env-$ASYNCSCHED_REPLICA_ID.tmp" "env-$ASYNCSCHED_REPLICA_ID";'
    " while [ ! -e release ]; do sleep 0.05; done"
)


def _app(replicas: int = 2) -> AppDef:
    role = Role(
        "w",
        image="/",
        entrypoint="sh",
        args=["-c", HOLD],
        env={"TOKEN": SECRET, "PLAIN": MARK},
        num_replicas=replicas,
        resource=Resource(cpu=1, gpu=0, memMB=32),
    )
    return AppDef("secret", roles=[role])


async def _submit(slurm: SlurmScheduler, job_dir: Path, replicas: int = 2) -> str:
    old = os.umask(0o022)  # a usual umask: files world-readable by default
    try:
        return await slurm.submit(_app(replicas), {"job_dir": str(job_dir)})
    finally:
        os.umask(old)


async def _until(condition: Callable[[], bool]) -> None:
    with anyio.fail_after(SETTLE):
        while not condition():
            await anyio.sleep(0.05)


def _command_lines_holding(mark: bytes) -> list[tuple[int, bytes]]:
    """Every process on this host whose command line holds ``mark``."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                cmdline = fh.read()
        except OSError:  # gone meanwhile
            continue
        if mark in cmdline:
            found.append((int(entry.name), cmdline))
    return found


def _env_of(data: bytes) -> dict[bytes, bytes]:
    pairs = (item.partition(b"=") for item in data.split(b"\0") if item)
    return {name: value for name, _, value in pairs}


async def test_env_secret_is_on_no_command_line_and_in_no_job_output_file(
    slurm: SlurmScheduler, slurm_cluster: Cluster, tmp_path: Path
) -> None:
    job_dir = tmp_path / "job"
    app_id = await _submit(slurm, job_dir)
    try:
        dumps = [job_dir / f"env-{k}" for k in range(2)]
        await _until(lambda: all(d.exists() for d in dumps))
        # both replicas (so srun and its tasks) are running now
        holders = await anyio.to_thread.run_sync(_command_lines_holding, MARK.encode())
        assert holders == []
        (env_dir,) = job_dir.glob(f"{ENV_DIR_PREFIX}*")
        assert stat.S_IMODE(env_dir.stat().st_mode) == 0o700
        files = sorted(env_dir.iterdir())
        assert [f.name for f in files] == ["w-0.env", "w-1.env"]
        for path in files:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
            assert path.stat().st_uid == os.geteuid()
            assert MARK.encode() in path.read_bytes()
        (job_dir / "release").touch()
        status = await slurm.wait(app_id, timeout=SETTLE)
    finally:
        slurm_cluster.run("scancel", app_id)  # never leave a job that blocks others
    assert status is not None
    assert status.state == AppState.SUCCEEDED, status
    for k, dump in enumerate(dumps):
        env = _env_of(dump.read_bytes())
        assert env[b"TOKEN"] == SECRET.encode()
        assert env[b"PLAIN"] == MARK.encode()
        assert env[b"ASYNCSCHED_REPLICA_ID"] == str(k).encode()
        assert env[b"ASYNCSCHED_APP_ID"] == app_id.encode()
    outputs = sorted(job_dir.glob("slurm-*"))
    assert f"slurm-{app_id}.out" in [p.name for p in outputs]  # the traced batch log
    for path in outputs:
        assert MARK.encode() not in path.read_bytes(), path
    # the job removed its environment files when it ended
    assert not list(job_dir.glob(f"{ENV_DIR_PREFIX}*"))


async def test_cancel_removes_the_env_files(
    slurm: SlurmScheduler, slurm_cluster: Cluster, tmp_path: Path
) -> None:
    job_dir = tmp_path / "job"
    app_id = await _submit(slurm, job_dir, replicas=1)
    try:
        await _until(lambda: (job_dir / "env-0").exists())
        assert list(job_dir.glob(f"{ENV_DIR_PREFIX}*"))
        await slurm.cancel(app_id)
        status = await slurm.wait(app_id, timeout=SETTLE)
        # the job's trap removes them once its replicas had their grace
        # (asyncsched does when it sees a job cancelled before it started)
        await _until(lambda: not list(job_dir.glob(f"{ENV_DIR_PREFIX}*")))
    finally:
        slurm_cluster.run("scancel", app_id)
    assert status is not None
    assert status.state == AppState.CANCELLED, status


async def test_a_job_cancelled_from_outside_loses_its_env_files_once_seen(
    slurm: SlurmScheduler, slurm_cluster: Cluster, tmp_path: Path
) -> None:
    job_dir = tmp_path / "job"
    app_id = await _submit(slurm, job_dir, replicas=1)
    try:
        await _until(lambda: (job_dir / "env-0").exists())
        done = slurm_cluster.run("scancel", app_id)
        assert done.returncode == 0, done.stderr
        status = await slurm.wait(app_id, timeout=SETTLE)
    finally:
        slurm_cluster.run("scancel", app_id)
    assert status is not None
    assert status.state == AppState.CANCELLED, status
    assert not list(job_dir.glob(f"{ENV_DIR_PREFIX}*"))


async def test_a_retried_run_reads_its_environment_again(
    slurm: SlurmScheduler, slurm_cluster: Cluster, tmp_path: Path
) -> None:
    # the first run fails and the script requeues the job: the environment
    # files stay for the second run, which gets the same values
    script = (
        'if [ "${SLURM_RESTART_COUNT:-0}" -ge 1 ]; then env -0 >env-retry; exit 0; fi;'
        ' echo "$SLURMD_NODENAME" >first-node; exit 4'
    )
    role = Role(
        "w",
        image="/",
        entrypoint="sh",
        args=["-c", script],
        env={"TOKEN": SECRET},
        max_retries=1,
        resource=Resource(cpu=1, gpu=0, memMB=32),
    )
    job_dir = tmp_path / "job"
    app_id = await slurm.submit(
        AppDef("retry", roles=[role]), {"job_dir": str(job_dir)}
    )
    try:
        with anyio.fail_after(SETTLE):
            while True:
                desc = await slurm.describe(app_id)
                assert desc is not None
                assert desc.state != AppState.FAILED
                if desc.num_restarts == 1:
                    break
                await anyio.sleep(0.1)
        assert list(job_dir.glob(f"{ENV_DIR_PREFIX}*"))
        # Slurm delays a requeued job's start (its credential stays revoked
        # on the first run's node for a while): start it now, elsewhere
        first_node = (job_dir / "first-node").read_text().strip()
        with anyio.fail_after(SETTLE):
            while not is_terminal(desc.state):
                if desc.state == AppState.PENDING:
                    await anyio.to_thread.run_sync(
                        slurm_cluster.run,
                        "scontrol",
                        "update",
                        f"JobId={app_id}",
                        "StartTime=now",
                        f"ExcNodeList={first_node}",
                    )
                await anyio.sleep(0.5)
                desc = await slurm.describe(app_id)
                assert desc is not None
        status = await slurm.wait(app_id, timeout=SETTLE)
    finally:
        slurm_cluster.run("scancel", app_id)
    assert status is not None
    logs = {p.name: p.read_text(errors="replace") for p in job_dir.glob("slurm-*")}
    assert status.state == AppState.SUCCEEDED, (status, logs)
    env = _env_of((job_dir / "env-retry").read_bytes())
    assert env[b"TOKEN"] == SECRET.encode()
    assert not list(job_dir.glob(f"{ENV_DIR_PREFIX}*"))
