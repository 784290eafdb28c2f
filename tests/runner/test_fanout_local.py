"""watch / wait_all / as_completed over 500 real local apps (one process each)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from asyncsched.runner import Runner
from asyncsched.specs import AppState
from tests.runner.helpers import sh_app

pytest.importorskip("asyncsched.schedulers.local_scheduler")

N = 500

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
async def runner(tmp_path: Path) -> AsyncIterator[Runner]:
    params = {"cache_size": 4 * N, "state_dir": str(tmp_path / "state")}
    async with Runner(
        "fanout", scheduler_params=params, max_concurrent_submits=32
    ) as r:
        yield r


async def _submit(runner: Runner, tmp_path: Path, script: str) -> list[str]:
    apps = [sh_app(script, name=f"a{i}") for i in range(N)]
    return await runner.run_many(apps, "local_cwd", {"log_dir": str(tmp_path / "logs")})


async def test_wait_all_over_500_local_apps(runner: Runner, tmp_path: Path) -> None:
    handles = await _submit(runner, tmp_path, "exit 0")
    assert len(set(handles)) == N
    started = time.monotonic()
    results = await runner.wait_all(handles, timeout=60)
    assert list(results) == handles
    assert all(
        s is not None and s.state == AppState.SUCCEEDED for s in results.values()
    )
    assert time.monotonic() - started < 60


async def test_as_completed_and_watch_over_500_local_apps(
    runner: Runner, tmp_path: Path
) -> None:
    handles = await _submit(runner, tmp_path, "sleep 0.2; exit 1")
    watched: dict[str, list[AppState]] = {}
    async for handle, status in runner.watch(handles, poll_interval=0.5):
        assert status is not None
        watched.setdefault(handle, []).append(status.state)
    assert set(watched) == set(handles)
    assert all(states[-1] == AppState.FAILED for states in watched.values())
    assert all(len(states) == len(set(states)) for states in watched.values())

    completed = [h async for h, s in runner.as_completed(handles) if s is not None]
    assert sorted(completed) == sorted(handles)
