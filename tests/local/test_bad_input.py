"""Bad input fails before anything starts, and a failed start leaves nothing running."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from asyncsched.errors import InvalidRunConfigException, SpecError, SubmitError
from asyncsched.schedulers.local_scheduler import (
    LocalDirectoryImageProvider,
    LocalScheduler,
)
from asyncsched.specs import AppState, Role

from ._helpers import child_pids, lines, run
from .conftest import app_of, sh_role

pytestmark = pytest.mark.anyio


async def test_bad_input_fails_before_anything_starts(
    sched: LocalScheduler, log_dir: Path, tmp_path: Path
) -> None:
    cfg = {"log_dir": str(log_dir)}
    with pytest.raises(SpecError, match="was not found") as info:
        await sched.submit(app_of(Role("r", "/", entrypoint="no-such-binary-xyz")), cfg)
    assert info.value.field == "roles[0].entrypoint"
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    with pytest.raises(SpecError, match="not executable"):
        await sched.submit(app_of(Role("r", "/", entrypoint=str(script))), cfg)
    with pytest.raises(InvalidRunConfigException) as cfg_info:
        await sched.submit(app_of(sh_role("true")), {**cfg, "prepend_cwd": "yes"})
    assert cfg_info.value.cfg_key == "prepend_cwd"
    with pytest.raises(InvalidRunConfigException, match="no_such"):
        await sched.submit(app_of(sh_role("true")), {**cfg, "no_such": 1})
    # a partly good app: the good replica must not be started
    good_then_bad = app_of(
        sh_role("sleep 30", name="good"), Role("bad", "/", entrypoint="nope-xyz")
    )
    with pytest.raises(SpecError):
        await sched.submit(good_then_bad, cfg)
    assert os.listdir(log_dir) == []
    assert await sched.list() == []


async def test_bad_local_dir_image(log_dir: Path, tmp_path: Path) -> None:
    async with LocalScheduler("d", LocalDirectoryImageProvider) as s:
        with pytest.raises(SpecError, match="absolute"):
            await s.submit(
                app_of(Role("r", "relative", entrypoint="true")),
                {"log_dir": str(log_dir)},
            )
        with pytest.raises(SpecError, match="not an existing directory"):
            await s.submit(
                app_of(Role("r", str(tmp_path / "x"), entrypoint="true")),
                {"log_dir": str(log_dir)},
            )
        script = tmp_path / "run.sh"
        script.write_text("#!/bin/sh\necho from-dir\n")
        script.chmod(0o755)
        app_id, state = await run(
            s,
            app_of(Role("r", str(tmp_path), entrypoint="run.sh")),
            {"log_dir": str(log_dir)},
        )
        assert state == AppState.SUCCEEDED
        assert await lines(s, app_id, "r") == ["from-dir\n"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
async def test_unwritable_log_dir(sched: LocalScheduler, tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    with pytest.raises(InvalidRunConfigException, match="not a writable"):
        await sched.submit(app_of(sh_role("true")), {"log_dir": str(ro / "sub")})


async def test_unwritable_log_dir_as_file(
    sched: LocalScheduler, tmp_path: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(InvalidRunConfigException, match="not a writable"):
        await sched.submit(app_of(sh_role("true")), {"log_dir": str(blocker / "sub")})


async def test_spawn_failure_part_way_kills_started(log_dir: Path) -> None:
    from .conftest import alive

    others: set[int] = set()
    started: set[int] = set()

    def before_spawn(role: str, replica_id: int) -> None:
        if replica_id == 0:
            others.update(child_pids())
        if replica_id == 2:
            # the two replicas started so far are our new children
            started.update(child_pids() - others)
            raise OSError("no more processes")

    async with LocalScheduler("s", before_spawn=before_spawn) as s:
        with pytest.raises(SubmitError, match="no more processes"):
            await s.submit(
                app_of(sh_role("sleep 30", replicas=3)),
                {"log_dir": str(log_dir)},
            )
        assert len(started) == 2
        assert alive(set(started)) == set()
        assert os.listdir(log_dir / "s") == []


async def test_a_retry_that_cannot_start_fails_the_app_naming_why(
    log_dir: Path,
) -> None:
    calls: list[tuple[str, int]] = []

    def before_spawn(role: str, replica_id: int) -> None:
        calls.append((role, replica_id))
        if len(calls) == 2:  # the retry
            raise OSError("no more processes")

    role = sh_role("exit 1")
    role.max_retries = 1
    async with LocalScheduler("s", before_spawn=before_spawn) as s:
        app_id = await s.submit(app_of(role), {"log_dir": str(log_dir)})
        desc = await s.wait(app_id, timeout=30)
    assert desc is not None
    assert desc.state == AppState.FAILED
    assert "no more processes" in desc.msg
    assert calls == [("worker", 0), ("worker", 0)]
