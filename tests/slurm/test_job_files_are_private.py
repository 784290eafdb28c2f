"""A Slurm job's files are readable by their owner only, and once the job has
ended none of them holds an environment value (the values travel in owner-only
files that the job removes; test_env_secrets_on_cluster.py checks them while
the job runs)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.specs import AppDef, AppState, Resource, Role

from .conftest import SETTLE

pytestmark = [pytest.mark.slurm, pytest.mark.anyio]

SECRET = "s3cr3t-token-value"


async def test_no_env_value_lands_in_a_group_or_world_readable_file(
    slurm: SlurmScheduler, tmp_path: Path
) -> None:
    role = Role(
        "worker",
        image="/",
        entrypoint="sh",
        args=["-c", "echo hello"],
        env={"TOKEN": SECRET},
        resource=Resource(cpu=1, gpu=0, memMB=16),
    )
    old = os.umask(0o022)  # a usual umask: files world-readable by default
    try:
        job_dir = tmp_path / "job"
        app_id = await slurm.submit(
            AppDef("secret", roles=[role]), {"job_dir": str(job_dir)}
        )
    finally:
        os.umask(old)
    desc = await slurm.wait(app_id, timeout=SETTLE)
    assert desc is not None
    assert desc.state == AppState.SUCCEEDED
    files = [path for path in job_dir.rglob("*") if path.is_file()]
    # the test looked at the job's real files: the script, the traced batch
    # log and the replica's logs
    names = {path.name for path in files}
    assert {f"slurm-{app_id}.out", f"slurm-{app_id}-worker-0.out"} <= names
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), path
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o077 == 0, f"{path} is {oct(mode)}"
