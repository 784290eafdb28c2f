"""``Runner.progress()``: the counts a script or a progress bar shows on a fan-out."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from asyncsched.errors import SpecError
from asyncsched.runner import Progress, Runner
from asyncsched.specs import AppDef, Role
from tests.runner.helpers import sh_app

pytestmark = pytest.mark.anyio


def _params(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {"state_dir": str(tmp_path / "state"), "retention": None, **extra}


async def _until(runner: Runner, check: Callable[[Progress], bool]) -> Progress:
    """Poll ``runner.progress()`` until ``check`` holds (deadline 30 s)."""
    with anyio.fail_after(30):
        while not check(progress := runner.progress()):
            await anyio.sleep(0.02)
    return progress


async def test_tracked_progress_counts_apps_as_they_end(tmp_path: Path) -> None:
    cfg = {"log_dir": str(tmp_path / "logs")}
    async with Runner(
        "p", scheduler_params=_params(tmp_path), track_progress=True
    ) as runner:
        assert runner.progress() == Progress()
        scripts = ["true"] * 3 + ["exit 3"] * 2 + ["sleep 30"]
        apps = [sh_app(script, name=f"a{i}") for i, script in enumerate(scripts)]
        handles = await runner.run_many(apps, "local_cwd", cfg)
        # nobody waits on the apps: the runner follows them itself
        p = await _until(runner, lambda p: p.done == 5)
        assert p == Progress(submitted=6, running=1, succeeded=3, failed=2)
        assert p.done == 5
        await runner.cancel(handles[-1])
        p = await _until(runner, lambda p: p.running == 0)
        assert (p.cancelled, p.done, p.submitted) == (1, 6, 6)
        missing = AppDef(
            "bad", roles=[Role("r", image="/", entrypoint="no-such-cmd-x")]
        )
        with pytest.raises(SpecError):
            await runner.run(missing, "local_cwd", cfg)
        p = runner.progress()
        assert (p.submit_failed, p.submitted, p.submitting) == (1, 6, 0)


async def test_untracked_progress_counts_what_the_runner_saw_end(
    tmp_path: Path,
) -> None:
    cfg = {"log_dir": str(tmp_path / "logs")}
    async with Runner("p", scheduler_params=_params(tmp_path)) as runner:
        apps = [sh_app("true", name=f"a{i}") for i in range(3)]
        handles = await runner.run_many(apps, "local_cwd", cfg)
        assert runner.progress().submitted == 3
        await runner.wait_all(handles, timeout=30)
        p = runner.progress()
        assert (p.running, p.succeeded, p.done) == (0, 3, 3)
        await runner.wait_all(handles, timeout=30)  # seen again: counted once
        assert runner.progress() == p


async def test_submits_waiting_for_room_count_as_submitting(tmp_path: Path) -> None:
    cfg = {"log_dir": str(tmp_path / "logs")}
    params = _params(tmp_path, max_running_replicas=1, cancel_grace=1)
    async with Runner("p", scheduler_params=params) as runner:
        first = await runner.run(sh_app("sleep 30"), "local_cwd", cfg)
        async with anyio.create_task_group() as tg:
            tg.start_soon(runner.run, sh_app("true"), "local_cwd", cfg)
            p = await _until(runner, lambda p: p.submitting == 1)
            assert (p.submitted, p.running) == (1, 1)
            await runner.cancel(first)
        p = runner.progress()
        assert (p.submitting, p.submitted) == (0, 2)


def test_progress_reads_as_one_line() -> None:
    p = Progress(submitting=2, submitted=10, running=4, succeeded=5, failed=1)
    assert str(p) == (
        "submitted 10, submitting 2, running 4, done 6 (5 succeeded, 1 failed)"
    )
    assert str(Progress()) == "submitted 0, running 0, done 0"


async def test_run_many_keeps_at_most_max_concurrent_submits_in_flight() -> None:
    from tests.runner.helpers import inmemory_runner

    peak = 0
    async with inmemory_runner(max_concurrent_submits=4) as runner:

        async def sample() -> None:
            nonlocal peak
            while True:
                peak = max(peak, runner.progress().submitting)
                await anyio.lowlevel.checkpoint()

        async with anyio.create_task_group() as tg:
            tg.start_soon(sample)
            apps = [sh_app("exit 0", name=f"a{i}") for i in range(200)]
            handles = await runner.run_many(apps, "inmemory")
            tg.cancel_scope.cancel()
        assert len(set(handles)) == 200
        assert 1 <= peak <= 4
        assert runner.progress().submitted == 200
