"""The entrypoint a submit checks on the replica's PATH is the file the replica execs.

The lookup made before anything starts (a missing entrypoint is a
``SpecError``) names the file; the replica execs it directly, with its argv
as given, instead of walking PATH once more in the child.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from asyncsched.schedulers.local._launch import ExecutableCache
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppDef, AppState, Role

from ._helpers import lines, run
from .conftest import app_of, sh_role

pytestmark = pytest.mark.anyio


def _tool(directory: Path, text: str) -> Path:
    directory.mkdir(exist_ok=True)
    path = directory / "tool"
    path.write_text(f"#!/bin/sh\necho {text}\n")
    path.chmod(0o755)
    return path


async def test_a_replica_runs_the_file_its_submit_found_on_path(
    tmp_path: Path, log_dir: Path
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    _tool(second, "checked")

    def install_earlier_on_path(role: str, replica_id: int) -> None:
        # after the submit's lookup, before the replica starts
        _tool(first, "installed-later")

    role = Role(
        "worker",
        image="/",
        entrypoint="tool",
        env={"PATH": f"{first}:{second}"},
    )
    async with LocalScheduler("exe", before_spawn=install_earlier_on_path) as sched:
        app_id, state = await run(sched, app_of(role), {"log_dir": str(log_dir)})
        assert state == AppState.SUCCEEDED
        assert await lines(sched, app_id) == ["checked\n"]


async def test_a_replica_keeps_the_argv0_it_was_given(log_dir: Path) -> None:
    # "$$$$": the role's args go through TorchX's macros ("$$" is one "$")
    script = 'tr "\\0" "\\n" < /proc/$$$$/cmdline | head -n 1'
    async with LocalScheduler("exe") as sched:
        app_id, state = await run(
            sched, app_of(sh_role(script)), {"log_dir": str(log_dir)}
        )
        assert state == AppState.SUCCEEDED
        assert await lines(sched, app_id) == ["sh\n"]


def test_a_program_installed_earlier_on_path_is_found_after_the_ttl(
    tmp_path: Path,
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    checked = _tool(second, "checked")
    now = [0.0]
    cache = ExecutableCache(ttl=2.0, clock=lambda: now[0])
    path = f"{first}{os.pathsep}{second}"
    assert cache.find("tool", path, None) == str(checked)
    later = _tool(first, "installed-later")
    now[0] = 1.0  # within the TTL: the file found before
    assert cache.find("tool", path, None) == str(checked)
    now[0] = 2.5
    assert cache.find("tool", path, None) == str(later)


async def test_a_vanished_entrypoint_fails_the_submit_and_leaves_nothing(
    tmp_path: Path, log_dir: Path
) -> None:
    tool = _tool(tmp_path / "bin", "x")

    def remove_it(role: str, replica_id: int) -> None:
        tool.unlink()

    role = Role("worker", image="/", entrypoint=str(tool))
    app = AppDef("gone", roles=[role])
    async with LocalScheduler("exe", before_spawn=remove_it) as sched:
        from asyncsched.errors import SubmitError

        with pytest.raises(SubmitError, match="failed to start a replica"):
            await sched.submit(app, {"log_dir": str(log_dir)})
    assert list((log_dir / "exe").iterdir()) == []
