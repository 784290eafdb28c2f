"""A Slurm job's files, which echo its environment, are readable by its owner only."""

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
    holders = []
    for path in job_dir.rglob("*"):
        if path.is_file() and SECRET.encode() in path.read_bytes():
            holders.append(path)
            mode = stat.S_IMODE(path.stat().st_mode)
            assert mode & 0o077 == 0, f"{path} is {oct(mode)}"
    assert holders  # the batch log does echo it: the test looked at real files
