"""Names never lead the local backend outside its state and log dirs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from asyncsched.errors import InvalidArgumentError, SpecError, UnknownAppException
from asyncsched.schedulers.local._retention import Retention, prune
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState

from .conftest import app_of, sh_role


def _files(root: Path) -> set[Path]:
    return set(root.rglob("*")) if root.exists() else set()


@pytest.mark.parametrize(
    "name", ["../../../x/y", "../escape", "/tmp/abs", "..", ".", "a\nb", "x" * 300]
)
async def test_a_hostile_app_name_is_rejected_and_writes_nothing(
    name: str, tmp_path: Path, state_dir: Path
) -> None:
    before = _files(tmp_path)
    async with LocalScheduler("s") as sched:
        with pytest.raises(SpecError) as caught:
            await sched.submit(app_of(sh_role("true"), name=name))
        assert caught.value.field == "name"
        assert await sched.list() == []
    created = _files(tmp_path) - before
    assert not [p for p in created if not p.is_relative_to(state_dir)]
    assert not [p for p in created if p.is_file()]


@pytest.mark.parametrize("name", ["../../x", "a/b", "/abs", "..", "s\x00", "x" * 300])
def test_a_hostile_session_name_is_rejected(name: str) -> None:
    with pytest.raises(InvalidArgumentError, match="session_name"):
        LocalScheduler(name)


async def test_the_empty_session_keeps_its_apps_inside_the_state_dir(
    state_dir: Path,
) -> None:
    async with LocalScheduler("") as sched:
        app_id = await sched.submit(app_of(sh_role("echo hi"), name="blank"), {})
        desc = await sched.wait(app_id, timeout=30)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
        assert [a.app_id for a in await sched.list()] == [app_id]
    pointer = state_dir / "local" / "@empty" / f"{app_id}.json"
    assert pointer.is_file()
    assert not (state_dir / "local" / f"{app_id}.json").exists()
    # another process (here: another scheduler) finds it by its handle's session
    async with LocalScheduler("") as other:
        desc = await other.describe(app_id)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
        assert [a.app_id for a in await other.list()] == [app_id]
        lines = [line async for line in other.log_iter(app_id, "worker")]
        assert lines == ["hi\n"]
    # and retention sees it like any other
    report = prune(str(state_dir), Retention(max_apps=0))
    assert report.removed == [app_id]
    assert not pointer.exists()


async def test_an_app_id_that_climbs_out_of_the_session_names_no_app(
    tmp_path: Path, state_dir: Path
) -> None:
    # a record planted where "../../x" would lead from the session's pointer dir
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "app.json").write_text(json.dumps({"app_id": "x", "state": "RUNNING"}))
    (state_dir / "x.json").parent.mkdir(parents=True, exist_ok=True)
    (state_dir / "x.json").write_text(json.dumps({"app_dir": str(planted)}))
    async with LocalScheduler("s") as sched:
        for app_id in ("../../x", "../s/x", "/x", ".."):
            assert await sched.describe(app_id) is None
            with pytest.raises(UnknownAppException):
                async for _ in sched.log_iter(app_id, "worker"):
                    pass


def test_the_cli_rejects_a_handle_whose_session_climbs_out(tmp_path: Path) -> None:
    env = {**os.environ, "ASYNCSCHED_STATE_DIR": str(tmp_path / "state")}
    for verb in ("status", "cancel", "log"):
        result = subprocess.run(
            [sys.executable, "-m", "asyncsched", verb, "local_cwd://../../x/app-1"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert result.returncode == 2, result.stderr
        assert "session_name" in result.stderr
        assert "internal error" not in result.stderr


async def test_a_dry_run_request_whose_app_id_was_edited_is_not_scheduled(
    tmp_path: Path, state_dir: Path
) -> None:
    async with LocalScheduler("s") as sched:
        info = await sched.submit_dryrun(app_of(sh_role("true")), {})
        info.request.app_id = "../../escaped"
        with pytest.raises(InvalidArgumentError, match="app id"):
            await sched.schedule(info)
    assert not [p for p in _files(tmp_path) if "escaped" in p.name]


async def test_prune_never_deletes_through_a_symlink_in_the_logs_dir(
    tmp_path: Path, state_dir: Path
) -> None:
    outside = tmp_path / "outside"
    (outside / "precious").mkdir(parents=True)
    (outside / "precious" / "data.txt").write_text("keep")
    logs = state_dir / "logs"
    logs.mkdir(parents=True)
    (logs / "link").symlink_to(outside)
    # a (hand-made) finished app whose dir lies behind the link
    (state_dir / "local" / "s").mkdir(parents=True)
    app_dir = logs / "link" / "precious"
    (app_dir / "app.json").write_text(
        json.dumps({"app_id": "x-1", "finished": True, "last_updated": 0})
    )
    (state_dir / "local" / "s" / "x-1.json").write_text(
        json.dumps({"app_id": "x-1", "app_dir": str(app_dir)})
    )
    report = prune(str(state_dir), Retention(max_apps=0))
    assert report.removed == ["x-1"]
    assert (outside / "precious" / "data.txt").read_text() == "keep"
