"""Finished local apps stay on record until pruned by count or age; prune is safe."""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from asyncsched.errors import InvalidArgumentError
from asyncsched.schedulers.local._retention import Retention, prune
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState

from .conftest import app_of, sh_role

pytestmark = pytest.mark.anyio

DAY = 86400.0


async def _finished_apps(
    state: Path, n: int, cfg: dict[str, str] | None = None
) -> list[str]:
    ids = []
    async with LocalScheduler("s", state_dir=str(state), retention=None) as s:
        for _ in range(n):
            app_id = await s.submit(app_of(sh_role("echo hi")), cfg or {})
            await s.wait(app_id, timeout=30)
            ids.append(app_id)
    return ids


def _pointers(state: Path) -> set[str]:
    return {p.stem for p in (state / "local" / "s").glob("*.json")}


async def test_prune_keeps_the_newest_finished_apps(tmp_path: Path) -> None:
    state = tmp_path / "state"
    ids = await _finished_apps(state, 4)
    report = prune(str(state), Retention(max_apps=2, max_age_days=None))
    assert sorted(report.removed) == sorted(ids[:2])
    assert report.kept == 2
    assert _pointers(state) == set(ids[2:])
    assert sorted(os.listdir(state / "logs" / "s")) == sorted(ids[2:])


async def test_prune_by_age_and_dry_run_changes_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state"
    ids = await _finished_apps(state, 2)
    later = time.time() + 3 * DAY
    dry = prune(
        str(state), Retention(max_apps=None, max_age_days=2), now=later, dry_run=True
    )
    assert sorted(dry.removed) == sorted(ids)
    assert _pointers(state) == set(ids)
    kept = prune(str(state), Retention(max_apps=None, max_age_days=4), now=later)
    assert (kept.removed, kept.kept) == ([], 2)
    gone = prune(str(state), Retention(max_apps=None, max_age_days=2), now=later)
    assert sorted(gone.removed) == sorted(ids)
    assert _pointers(state) == set()


async def test_prune_never_deletes_a_log_dir_the_user_chose(tmp_path: Path) -> None:
    state, user_logs = tmp_path / "state", tmp_path / "mine"
    [app_id] = await _finished_apps(state, 1, {"log_dir": str(user_logs)})
    report = prune(str(state), Retention(max_apps=0))
    assert report.removed == [app_id]
    assert _pointers(state) == set()
    assert (user_logs / "s" / app_id / "worker" / "0" / "stdout.log").exists()


async def test_running_apps_and_unreadable_records_are_left_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / "state"
    [done] = await _finished_apps(state, 1)
    corrupt = state / "logs" / "s" / done / "app.json"
    corrupt.write_text("{not json")
    async with LocalScheduler("s", state_dir=str(state), retention=None) as s:
        running = await s.submit(app_of(sh_role("sleep 30")), {})
        report = prune(str(state), Retention(max_apps=0))
        assert report.removed == []
        assert report.running == 1
        assert report.unreadable == [str(corrupt)]
        assert _pointers(state) == {done, running}
        listed = {row.app_id for row in await s.list()}  # the bad record is skipped
        assert running in listed
        assert done not in listed
        assert f"skipping app {done}: its record cannot be read" in caplog.text
        await s.cancel(running)


async def test_dangling_pointer_is_removed(tmp_path: Path) -> None:
    state = tmp_path / "state"
    [app_id] = await _finished_apps(state, 1)
    os.rename(state / "logs", tmp_path / "moved")
    report = prune(str(state), Retention(max_apps=10))
    assert report.removed == [app_id]
    assert _pointers(state) == set()


async def test_concurrent_prunes_never_fail(tmp_path: Path) -> None:
    state = tmp_path / "state"
    ids = await _finished_apps(state, 6)
    with ThreadPoolExecutor(4) as pool:
        reports = list(
            pool.map(lambda _: prune(str(state), Retention(max_apps=1)), range(4))
        )
    assert all(r.unreadable == [] for r in reports)
    assert _pointers(state) == {ids[-1]}
    assert os.listdir(state / "logs" / "s") == [ids[-1]]


def _age_records(state: Path, ids: list[str], seconds: float) -> None:
    """Make finished apps look ``seconds`` old, their supervising process gone."""
    for app_id in ids:
        path = state / "logs" / "s" / app_id / "app.json"
        rec = json.loads(path.read_text())
        rec["last_updated"] = time.time() - seconds
        rec["supervisor"] = {**rec["supervisor"], "start_time": -1}  # not this one
        path.write_text(json.dumps(rec))


async def test_scheduler_prunes_when_it_starts_its_first_app(tmp_path: Path) -> None:
    state = tmp_path / "state"
    old = await _finished_apps(state, 3)
    _age_records(state, old, seconds=2 * 3600)
    async with LocalScheduler(
        "s", state_dir=str(state), retention=Retention(max_apps=1)
    ) as s:
        new = await s.submit(app_of(sh_role("echo new")), {})
        await s.wait(new, timeout=30)
    # the prune ran once, before `new` started: only the newest old app is left
    assert _pointers(state) == {old[-1], new}


async def test_automatic_retention_keeps_apps_finished_within_the_hour(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    recent = await _finished_apps(state, 3)
    _age_records(state, recent, seconds=600)  # their process is gone, 10 min ago
    async with LocalScheduler(
        "s", state_dir=str(state), retention=Retention(max_apps=0)
    ) as s:
        new = await s.submit(app_of(sh_role("true")), {})
        await s.wait(new, timeout=30)
    assert _pointers(state) == {*recent, new}
    # an explicit prune is not held back
    assert sorted(prune(str(state), Retention(max_apps=0)).removed) == sorted(
        [*recent, new]
    )


async def test_automatic_retention_keeps_apps_of_a_live_scheduler(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    cfg = {"log_dir": str(tmp_path / "logs")}
    async with LocalScheduler("s", state_dir=str(state), retention=None) as owner:
        ids = [await owner.submit(app_of(sh_role("true")), cfg) for _ in range(3)]
        for app_id in ids:
            await owner.wait(app_id, timeout=30)
        # hours old by the clock, but their scheduler is open: kept
        for app_id in ids:
            path = tmp_path / "logs" / "s" / app_id / "app.json"
            rec = json.loads(path.read_text())
            rec["last_updated"] = time.time() - 5 * 86400
            path.write_text(json.dumps(rec))
        async with LocalScheduler(
            "s", state_dir=str(state), retention=Retention(max_apps=0, max_age_days=1)
        ) as other:
            new = await other.submit(app_of(sh_role("true")), cfg)
            await other.wait(new, timeout=30)
        assert _pointers(state) == {*ids, new}  # found by any process
        for app_id in ids:
            desc = await owner.describe(app_id)
            assert desc is not None
            assert desc.state == AppState.SUCCEEDED


def test_negative_bounds_are_rejected() -> None:
    with pytest.raises(InvalidArgumentError, match="max_apps"):
        Retention(max_apps=-1)
    with pytest.raises(InvalidArgumentError, match="max_age_days"):
        Retention(max_age_days=-1)
    with pytest.raises(InvalidArgumentError, match="max_age_days"):
        Retention(max_age_days=float("nan"))
    with pytest.raises(InvalidArgumentError, match="min_age_seconds"):
        Retention(min_age_seconds=float("inf"))
