"""run_many loses no handle: a partial failure carries the started apps' handles."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from asyncsched.errors import RunManyError, SpecError, SubmitError
from asyncsched.runner import Runner
from asyncsched.specs import AppDef, AppState, Role
from asyncsched.sync import SyncRunner
from tests.runner.helpers import sh_app

pytestmark = pytest.mark.anyio


def _apps() -> list[AppDef]:
    broken = AppDef(
        "broken", roles=[Role("w", image="/", entrypoint="/nonexistent/bin/tool")]
    )
    return [sh_app("sleep 60", name="a"), broken, sh_app("sleep 60", name="b")]


@pytest.fixture
async def runner(tmp_path: Path) -> AsyncIterator[Runner]:
    params = {"state_dir": str(tmp_path / "state"), "close_grace": 0.5}
    async with Runner("many", scheduler_params=params) as r:
        yield r


async def test_partial_failure_keeps_the_started_handles(
    runner: Runner, tmp_path: Path
) -> None:
    with pytest.raises(RunManyError) as info:
        await runner.run_many(_apps(), "local_cwd", {"log_dir": str(tmp_path)})
    err = info.value
    assert isinstance(err, SubmitError)
    assert isinstance(err, ExceptionGroup)
    assert [type(e) for e in err.exceptions] == [SpecError]
    assert err.handles[1] is None
    assert err.started == [err.handles[0], err.handles[2]]
    assert not err.cancelled
    for handle in err.started:  # the started apps still run, and can be reached
        status = await runner.status(handle)
        assert status is not None
        assert status.state == AppState.RUNNING
        await runner.cancel(handle)


async def test_cancel_on_error_cancels_the_started_apps(
    runner: Runner, tmp_path: Path
) -> None:
    with pytest.raises(RunManyError) as info:
        await runner.run_many(
            _apps(), "local_cwd", {"log_dir": str(tmp_path)}, cancel_on_error=True
        )
    err = info.value
    assert err.cancelled
    assert len(err.started) == 2
    for handle in err.started:
        status = await runner.wait(handle, timeout=10)
        assert status is not None
        assert status.state == AppState.CANCELLED


async def test_all_submitted_returns_the_handles_in_order(
    runner: Runner, tmp_path: Path
) -> None:
    apps = [sh_app("exit 0", name=f"ok{i}") for i in range(3)]
    handles = await runner.run_many(apps, "local_cwd", {"log_dir": str(tmp_path)})
    assert [h.rsplit("/", 1)[1].split("-")[0] for h in handles] == ["ok0", "ok1", "ok2"]


@pytest.fixture
def sync_runner(tmp_path: Path) -> Iterator[SyncRunner]:
    params = {"state_dir": str(tmp_path / "state"), "close_grace": 0.5}
    with SyncRunner("many", scheduler_params=params) as r:
        yield r


def test_sync_facade_mirrors_cancel_on_error(
    sync_runner: SyncRunner, tmp_path: Path
) -> None:
    with pytest.raises(RunManyError) as info:
        sync_runner.run_many(
            _apps(), "local_cwd", {"log_dir": str(tmp_path)}, cancel_on_error=True
        )
    assert info.value.cancelled
    for handle in info.value.started:
        status = sync_runner.wait(handle, timeout=10)
        assert status is not None
        assert status.state == AppState.CANCELLED
