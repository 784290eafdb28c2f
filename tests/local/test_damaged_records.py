"""A record this version cannot use (a newer version's, a hand edit) spoils
only its own app: ``list`` skips it with a warning, the app's own queries say
what is wrong and where."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from asyncsched.errors import SchedulerError
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState

from .conftest import app_of, sh_role


def _unknown_state(record: dict[str, Any]) -> None:
    record["state"] = "HIBERNATING"


def _unknown_replica_state(record: dict[str, Any]) -> None:
    record["roles"]["worker"][0]["state"] = "HIBERNATING"


def _text_replica_id(record: dict[str, Any]) -> None:
    record["roles"]["worker"][0]["replica_id"] = "zero"


def _roles_as_a_list(record: dict[str, Any]) -> None:
    record["roles"] = [1, 2]


DAMAGE = [_unknown_state, _unknown_replica_state, _text_replica_id, _roles_as_a_list]


async def _two_apps(state_dir: Path) -> tuple[str, str, Path]:
    """A good and a damaged finished app of session "s"; the damaged one's record."""
    async with LocalScheduler("s") as sched:
        good = await sched.submit(app_of(sh_role("echo good"), name="good"), {})
        bad = await sched.submit(app_of(sh_role("echo bad"), name="bad"), {})
        for app_id in (good, bad):
            desc = await sched.wait(app_id, timeout=60)
            assert desc is not None
            assert desc.state == AppState.SUCCEEDED
    (path,) = (state_dir / "logs" / "s").glob(f"{bad}/app.json")
    return good, bad, path


def _damage(path: Path, how: Callable[[dict[str, Any]], None]) -> None:
    record = json.loads(path.read_text())
    how(record)
    path.write_text(json.dumps(record))


@pytest.mark.parametrize("how", DAMAGE, ids=lambda f: f.__name__.strip("_"))
async def test_a_damaged_record_is_skipped_by_list_and_named_by_its_own_queries(
    how: Callable[[dict[str, Any]], None],
    state_dir: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    good, bad, path = await _two_apps(state_dir)
    _damage(path, how)
    async with LocalScheduler("s") as sched:
        with caplog.at_level(logging.WARNING):
            listed = await sched.list()
        assert [(a.app_id, a.state) for a in listed] == [(good, AppState.SUCCEEDED)]
        assert any(bad in r.getMessage() for r in caplog.records)
        good_desc = await sched.describe(good)
        assert good_desc is not None
        assert good_desc.state == AppState.SUCCEEDED
        assert [line async for line in sched.log_iter(good, "worker")] == ["good\n"]

        with pytest.raises(SchedulerError, match="cannot be read by this") as caught:
            await sched.describe(bad)
        assert str(path) in str(caught.value)
        with pytest.raises(SchedulerError, match="cannot be read by this"):
            await sched.wait(bad, timeout=5)
        with pytest.raises(SchedulerError, match="cannot be read by this"):
            async for _ in sched.log_iter(bad, "worker"):
                pass
        with pytest.raises(SchedulerError, match="cannot be read by this"):
            await sched.cancel(bad)


def _cli(
    tmp_path: Path, state_dir: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ASYNCSCHED_STATE_DIR": str(state_dir), "NO_COLOR": "1"}
    env.pop("LOGLEVEL", None)
    return subprocess.run(
        [sys.executable, "-m", "asyncsched", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
        check=False,
    )


async def test_the_cli_lists_the_others_and_names_the_damaged_record(
    tmp_path: Path, state_dir: Path
) -> None:
    good, bad, path = await _two_apps(state_dir)
    _damage(path, _unknown_state)
    listed = _cli(tmp_path, state_dir, "list", "--session", "s")
    assert listed.returncode == 0, listed.stderr
    assert f"local_cwd://s/{good}" in listed.stdout
    assert bad not in listed.stdout
    assert bad in listed.stderr  # the warning says which app was skipped
    assert "internal error" not in listed.stderr
    for verb in ("status", "cancel", "log"):
        result = _cli(tmp_path, state_dir, verb, f"local_cwd://s/{bad}")
        assert result.returncode == 1, (verb, result.stderr)
        assert "cannot be read by this asyncsched version" in result.stderr, verb
        assert "HIBERNATING" in result.stderr
        assert "internal error" not in result.stderr
