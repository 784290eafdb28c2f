"""A rejected submit says why and leaves no directory behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from asyncsched.errors import SpecError
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import Role

from .conftest import PY, app_of

pytestmark = pytest.mark.anyio


# minor: error message, temp base dir, eviction order
async def test_directory_entrypoint_says_so(
    sched: LocalScheduler, log_dir: Path, tmp_path: Path
) -> None:
    with pytest.raises(SpecError, match="is a directory"):
        await sched.submit(
            app_of(Role("r", "/", entrypoint=str(tmp_path))), {"log_dir": str(log_dir)}
        )


async def test_rejected_submit_leaves_no_app_dir(tmp_path: Path) -> None:
    state = tmp_path / "state"
    async with LocalScheduler("s", state_dir=str(state)) as s:
        with pytest.raises(SpecError):
            await s.submit(app_of(Role("r", "/", entrypoint="no-such-binary-xyz")), {})
        assert not (state / "logs").exists()
        app_id = await s.submit(app_of(Role("r", "/", entrypoint=PY, args=["-V"])), {})
        await s.wait(app_id, timeout=10)
        assert os.listdir(state / "logs" / "s") == [app_id]
