"""A script that submits far more apps than the cache holds loses none of them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from asyncsched.runner import Runner
from asyncsched.specs import AppState
from tests.runner.helpers import sh_app

pytestmark = pytest.mark.slow

N = 1000


@pytest.fixture
async def runner(tmp_path: Path) -> AsyncIterator[Runner]:
    # default cache_size (100) and default retention (newest 100 records)
    async with Runner(
        "sweep", scheduler_params={"state_dir": str(tmp_path / "state")}
    ) as r:
        yield r


async def test_a_thousand_apps_all_answer_status_and_logs(runner: Runner) -> None:
    apps = [sh_app(f"echo app-{i}", name=f"a{i}") for i in range(N)]
    handles = await runner.run_many(apps, "local_cwd")
    assert len(set(handles)) == N
    results = await runner.wait_all(handles, timeout=300)
    assert [h for h, s in results.items() if s is None] == []
    assert {s.state for s in results.values() if s is not None} == {AppState.SUCCEEDED}
    for i, handle in enumerate(handles):
        status = await runner.status(handle)
        assert status is not None, handle
        lines = [line async for line in runner.log_lines(handle, "worker")]
        assert lines == [f"app-{i}\n"], handle
