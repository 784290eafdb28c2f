"""The CLI drives the slurm backend through the registry: run, status, log,
list, cancel; bad input exits 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .cluster import Cluster


def _cli(
    cluster: Cluster, cwd: Path, *args: str, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        **cluster.env,
        "ASYNCSCHED_STATE_DIR": str(cwd / "state"),
        "NO_COLOR": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "asyncsched", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
        check=False,
    )


@pytest.mark.slurm
def test_run_status_log_list_cancel(slurm_cluster: Cluster, tmp_path: Path) -> None:
    run = _cli(
        slurm_cluster,
        tmp_path,
        "run",
        "-s",
        "slurm",
        "-cfg",
        "partition=debug,time=5",
        "--wait",
        "--name",
        "hello",
        "--replicas",
        "2",
        "--",
        "sh",
        "-c",
        "echo hi from $ASYNCSCHED_REPLICA_ID",
    )
    assert run.returncode == 0, run.stderr
    handle = run.stdout.strip().splitlines()[-1]
    assert handle.startswith("slurm://")
    status = _cli(slurm_cluster, tmp_path, "status", "--json", handle)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["state"] == "SUCCEEDED"
    log = _cli(slurm_cluster, tmp_path, "log", f"{handle}/hello/1")
    assert log.returncode == 0, log.stderr
    assert "hi from 1" in log.stdout
    listed = _cli(slurm_cluster, tmp_path, "list", "-s", "slurm", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["app_handle"]: row for row in json.loads(listed.stdout)}
    assert rows[handle]["state"] == "SUCCEEDED"

    long = _cli(slurm_cluster, tmp_path, "run", "-s", "slurm", "--", "sleep", "300")
    assert long.returncode == 0, long.stderr
    long_handle = long.stdout.strip().splitlines()[-1]
    cancel = _cli(slurm_cluster, tmp_path, "cancel", long_handle)
    assert cancel.returncode == 0, cancel.stderr
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status = _cli(slurm_cluster, tmp_path, "status", "--json", long_handle)
        if json.loads(status.stdout)["state"] == "CANCELLED":
            break
    else:
        pytest.fail(f"not cancelled: {status.stdout}")


@pytest.mark.slurm
def test_unknown_partition_exits_2(slurm_cluster: Cluster, tmp_path: Path) -> None:
    run = _cli(
        slurm_cluster,
        tmp_path,
        "run",
        "-s",
        "slurm",
        "-cfg",
        "partition=nosuch",
        "--",
        "true",
    )
    assert run.returncode == 2
    assert "partition" in run.stderr
    assert "nosuch" in run.stderr


def test_missing_slurm_exits_2_with_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    run = subprocess.run(
        [sys.executable, "-m", "asyncsched", "run", "-s", "slurm", "--", "true"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PATH": str(empty), "ASYNCSCHED_STATE_DIR": str(tmp_path)},
        timeout=60,
        check=False,
    )
    assert run.returncode == 2
    assert run.stderr.startswith(
        "asyncsched run: error: scheduler 'slurm' is unavailable"
    )
    assert len(run.stderr.strip().splitlines()) == 1


@pytest.mark.slurm
def test_existing_job_dir_exits_2_and_submits_nothing(
    slurm_cluster: Cluster, tmp_path: Path
) -> None:
    taken = tmp_path / "taken"
    taken.mkdir()
    run = _cli(
        slurm_cluster, tmp_path, "run", "-s", "slurm", "-cfg", f"job_dir={taken}",
        "--", "true",
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert "job_dir" in run.stderr
    assert "already exists" in run.stderr
    assert list(taken.iterdir()) == []
