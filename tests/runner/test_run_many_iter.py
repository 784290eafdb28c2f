"""run_many_iter: act on each app as soon as it is submitted (early stopping)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from asyncsched.errors import RunManyError, SpecError
from asyncsched.runner import Runner
from asyncsched.specs import AppDef, AppHandle, AppState, Role
from asyncsched.sync import SyncRunner
from tests.runner.helpers import sh_app

pytestmark = pytest.mark.anyio

#: replicas the local scheduler may run at once in these tests
_ROOM = 4
#: submissions the runner has in flight at once in these tests
_IN_FLIGHT = 3


@pytest.fixture
async def runner(tmp_path: Path) -> AsyncIterator[Runner]:
    params = {
        "state_dir": str(tmp_path / "state"),
        "close_grace": 0.5,
        "cancel_grace": 1.0,
        "max_running_replicas": _ROOM,
    }
    async with Runner(
        "sweep", scheduler_params=params, max_concurrent_submits=_IN_FLIGHT
    ) as r:
        yield r


async def test_handles_arrive_while_later_apps_wait_for_room(
    runner: Runner, tmp_path: Path
) -> None:
    # 12 long apps, room for 4: run_many would return only once 8 of them
    # have ended (a minute); the first handles come at once here
    apps = [sh_app("sleep 60", name=f"trial{i}") for i in range(12)]
    seen: list[tuple[int, AppHandle]] = []
    with anyio.fail_after(30):
        submitted = runner.run_many_iter(apps, "local_cwd", {"log_dir": str(tmp_path)})
        async with contextlib.aclosing(submitted) as handles:
            async for index, handle in handles:
                seen.append((index, handle))
                if len(seen) == 2:  # early stopping: enough seen
                    break
    for _, handle in seen:  # the caller's apps keep running until cancelled
        status = await runner.status(handle)
        assert status is not None
        assert status.state == AppState.RUNNING
        await runner.cancel(handle)
    # the submissions in flight end once the cancelled apps make room
    with anyio.fail_after(30):
        while runner.progress().submitting:
            await anyio.sleep(0.05)
    listed = await runner.list("local_cwd")
    # nothing of the sweep keeps running: the apps submitted but never
    # yielded are cancelled for us, and no further app was submitted
    for app in listed:
        status = await runner.wait(app.app_handle, timeout=30)
        assert status is not None
        assert status.state == AppState.CANCELLED
    assert {h for _, h in seen} <= {app.app_handle for app in listed}
    assert len(listed) <= _ROOM + _IN_FLIGHT < len(apps)


async def test_every_app_is_yielded_once_with_its_index(
    runner: Runner, tmp_path: Path
) -> None:
    apps = [sh_app("exit 0", name=f"ok{i}") for i in range(6)]
    got = {
        index: handle
        async for index, handle in runner.run_many_iter(
            apps, "local_cwd", {"log_dir": str(tmp_path)}
        )
    }
    assert sorted(got) == list(range(6))
    for index, handle in got.items():
        assert f"/ok{index}-" in handle
        status = await runner.wait(handle, timeout=30)
        assert status is not None
        assert status.state == AppState.SUCCEEDED


async def test_failed_submissions_are_raised_after_the_handles(
    runner: Runner, tmp_path: Path
) -> None:
    broken = AppDef(
        "broken", roles=[Role("w", image="/", entrypoint="/nonexistent/bin/tool")]
    )
    apps = [sh_app("exit 0", name="a"), broken, sh_app("exit 0", name="b")]
    got: list[int] = []

    async def consume() -> None:
        cfg = {"log_dir": str(tmp_path)}
        async for index, _ in runner.run_many_iter(apps, "local_cwd", cfg):
            got.append(index)

    with pytest.raises(RunManyError) as info:
        await consume()
    assert sorted(got) == [0, 2]
    err = info.value
    assert [type(e) for e in err.exceptions] == [SpecError]
    assert err.handles[1] is None
    assert len(err.started) == 2


def test_sync_facade_yields_each_handle_as_it_is_accepted(tmp_path: Path) -> None:
    params = {"state_dir": str(tmp_path / "state"), "close_grace": 0.5}
    apps = [sh_app("exit 0", name=f"ok{i}") for i in range(3)]
    with SyncRunner("sweep", scheduler_params=params) as runner:
        got = dict(runner.run_many_iter(apps, "local_cwd", {"log_dir": str(tmp_path)}))
        assert sorted(got) == [0, 1, 2]
        for handle in got.values():
            status = runner.wait(handle, timeout=30)
            assert status is not None
            assert status.state == AppState.SUCCEEDED
