"""The state dir holds records that other processes trust (a record says which
processes ``cancel`` signals): one owned by another user, or writable by
others, is refused with an error that says why and how to fix it, before
anything is read, written or started."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from asyncsched.errors import UnsafeStateDirError
from asyncsched.schedulers.local import Retention, prune
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.schedulers.slurm._registry import JobRecord, Registry
from asyncsched.specs import AppState

from .conftest import app_of, sh_role

NOBODY = 65534
as_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="giving a dir to another user needs root"
)


async def _refused(state_dir: Path, tmp_path: Path, *needles: str) -> None:
    """Every use of ``state_dir`` is refused, naming it and ``needles``; nothing runs."""
    marker = tmp_path / "ran"
    async with LocalScheduler("s") as sched:
        with pytest.raises(UnsafeStateDirError) as caught:
            await sched.submit(app_of(sh_role(f"touch {marker}")), {})
        for needle in (str(state_dir), *needles):
            assert needle in str(caught.value)
        with pytest.raises(UnsafeStateDirError):
            await sched.list()
        with pytest.raises(UnsafeStateDirError):
            await sched.describe("app-from-elsewhere")
        with pytest.raises(UnsafeStateDirError):
            await sched.cancel("app-from-elsewhere")
        async with sched.events() as stream:
            with pytest.raises(UnsafeStateDirError):
                await anext(stream)
    assert not marker.exists()
    assert not (state_dir / "events").exists()  # the journal was not created
    with pytest.raises(UnsafeStateDirError):
        await anyio.to_thread.run_sync(prune, str(state_dir), Retention(max_apps=0))
    with pytest.raises(UnsafeStateDirError):
        await Registry(str(state_dir)).all()  # the Slurm backend's job registry
    with pytest.raises(UnsafeStateDirError):
        await Registry(str(state_dir)).add(JobRecord("1", 0.0, "a", "/", {}))


@pytest.mark.parametrize(
    ("mode", "who"),
    [
        (0o777, "its group and others"),
        (0o1777, "its group and others"),
        (0o770, "its group"),
        (0o702, "others"),
    ],
)
async def test_a_state_dir_writable_by_others_is_refused(
    mode: int, who: str, state_dir: Path, tmp_path: Path
) -> None:
    state_dir.mkdir()
    state_dir.chmod(mode)
    await _refused(
        state_dir,
        tmp_path,
        f"writable by {who}",
        f"mode {mode:04o}",
        f"chmod go-w {state_dir}",
    )


async def test_a_symlinked_state_dir_is_judged_by_its_target(
    state_dir: Path, tmp_path: Path
) -> None:
    target = tmp_path / "shared"
    target.mkdir()
    target.chmod(0o777)
    state_dir.symlink_to(target)
    await _refused(state_dir, tmp_path, "mode 0777")
    target.chmod(0o700)
    async with LocalScheduler("s") as sched:
        app_id = await sched.submit(app_of(sh_role("true")), {})
        desc = await sched.wait(app_id, timeout=60)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED


@as_root
async def test_a_state_dir_owned_by_another_user_is_refused(
    state_dir: Path, tmp_path: Path
) -> None:
    state_dir.mkdir(mode=0o700)
    os.chown(state_dir, NOBODY, NOBODY)
    await _refused(
        state_dir,
        tmp_path,
        f"owned by uid {NOBODY}",
        "mode 0700",
        "ASYNCSCHED_STATE_DIR",
    )


@as_root
@pytest.mark.parametrize("sub", ["local", "logs", "slurm"])
async def test_a_folder_of_the_state_dir_owned_by_another_user_is_refused(
    sub: str, state_dir: Path, tmp_path: Path
) -> None:
    (state_dir / sub).mkdir(parents=True, mode=0o700)
    os.chown(state_dir / sub, NOBODY, NOBODY)
    await _refused(state_dir, tmp_path, str(state_dir / sub), f"uid {NOBODY}")


async def test_a_state_dir_only_you_can_write_is_used(
    state_dir: Path, tmp_path: Path
) -> None:
    state_dir.mkdir()
    state_dir.chmod(0o755)  # readable by others: the files in it are 0600
    async with LocalScheduler("s") as sched:
        app_id = await sched.submit(app_of(sh_role("true")), {})
        desc = await sched.wait(app_id, timeout=60)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
        assert [a.app_id for a in await sched.list()] == [app_id]


def test_the_cli_says_why_it_refuses_an_unsafe_state_dir(
    state_dir: Path, tmp_path: Path
) -> None:
    state_dir.mkdir()
    state_dir.chmod(0o777)
    env = {**os.environ, "ASYNCSCHED_STATE_DIR": str(state_dir), "NO_COLOR": "1"}
    for args in (["prune"], ["list", "--session", "s"]):
        done = subprocess.run(
            [sys.executable, "-m", "asyncsched", *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=60,
            check=False,
        )
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert f"unsafe state dir {state_dir}" in done.stderr
        assert "chmod go-w" in done.stderr
        assert "internal error" not in done.stderr
