"""A relative ``job_dir`` is taken from the current directory, as a path is."""

from __future__ import annotations

from pathlib import Path

import pytest

from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.specs import AppDef, AppState, Resource, Role

from .conftest import SETTLE

pytestmark = [pytest.mark.slurm, pytest.mark.anyio]


async def test_relative_job_dir_runs_the_job_there(
    slurm: SlurmScheduler, tmp_path: Path
) -> None:
    role = Role(
        "w",
        image="/",
        entrypoint="sh",
        args=["-c", "pwd"],
        resource=Resource(cpu=1, gpu=0, memMB=64),
    )
    app_id = await slurm.submit(AppDef("rel", roles=[role]), {"job_dir": "rel/dir"})
    status = await slurm.wait(app_id, timeout=SETTLE)
    assert status is not None
    assert status.state == AppState.SUCCEEDED, status
    job_dir = tmp_path / "rel" / "dir"
    assert (job_dir / f"slurm-{app_id}-w-0.out").read_text() == f"{job_dir}\n"
    lines = [line async for line in slurm.log_iter(app_id, "w")]
    assert lines == [f"{job_dir}\n"]
