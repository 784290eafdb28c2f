"""``slurm`` is a built-in scheduler at TorchX's module path (no cluster needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from asyncsched.schedulers import get_scheduler
from asyncsched.schedulers.slurm_scheduler import SlurmScheduler

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """No cluster needed here: run on both event loops."""
    return str(request.param)


async def test_registry_creates_slurm_with_its_parameters(tmp_path: Path) -> None:
    sched = get_scheduler(
        "slurm", "s", slurm_conf="/etc/x.conf", state_dir=str(tmp_path), unknown=1
    )
    try:
        assert isinstance(sched, SlurmScheduler)
        assert sched.cli.env == {"SLURM_CONF": "/etc/x.conf"}
        assert sched.registry.path == str(tmp_path / "slurm" / "jobs.jsonl")
        assert {name for name, _ in sched.run_opts()} >= {
            "partition",
            "time",
            "job_dir",
            "nomem",
        }
    finally:
        await sched.aclose()
