"""A finished app kept in memory: little for the garbage collector to walk,
and it reads (describe, wait, list, log_iter, cancel) as it did while it ran."""

from __future__ import annotations

import contextlib
import gc
from pathlib import Path
from typing import Any

import anyio
import pytest

from asyncsched.schedulers.local._journal_tail import Appended, JournalTail
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState, StatusReason

from ._helpers import objects_per_finished_app
from .conftest import app_of, sh_role

pytestmark = pytest.mark.anyio


async def test_a_finished_app_keeps_little_more_than_its_definition_for_the_collector(
    log_dir: Path,
) -> None:
    apps = 40
    cfg = {"log_dir": str(log_dir)}
    role = sh_role("exit 0")
    async with LocalScheduler("objs", cache_size=2 * apps) as sched:
        for i in range(5):  # warm-up: the scheduler's threads, caches, journal
            await sched.wait(await sched.submit(app_of(role, name=f"w{i}"), cfg))
        per_app = await objects_per_finished_app(
            sched, lambda name: app_of(role, name=name), cfg, apps
        )
        # what is left is the submitted AppDef (its roles are described);
        # the app itself is its record as text (31 objects when it was kept
        # as the supervisor's LocalApp, its replica, log and attempts)
        assert per_app < 12, per_app
        # every one of them is still in memory and reads as it finished
        listed = {a.app_id: a.state for a in await sched.list()}
        assert sum(state == AppState.SUCCEEDED for state in listed.values()) >= apps


async def test_a_finished_app_reads_as_it_did_while_supervised(log_dir: Path) -> None:
    cfg = {"log_dir": str(log_dir)}
    app = app_of(
        sh_role("echo out; exit 2", name="bad"), sh_role("sleep 30", name="slow")
    )
    async with LocalScheduler("same", cancel_grace=1) as sched:
        app_id = await sched.submit(app, cfg)
        with anyio.fail_after(30):
            await sched.wait(app_id)
            supervised = sched._table.apps.get(app_id)
            if supervised is not None:  # the slow replica may still stop
                await supervised.finished.wait()
            first = await sched.describe(app_id)
        assert first is not None
        assert app_id not in sched._table.apps  # kept compact from now on
        again = await sched.describe(app_id)
        assert again is not None
        assert again == first
        assert again.state == AppState.FAILED
        by_role = {rs.role: rs.replicas[0] for rs in again.roles_statuses}
        assert by_role["bad"].exit_code == 2
        assert by_role["slow"].state == AppState.CANCELLED
        assert by_role["slow"].reason == StatusReason.CANCELLED
        assert by_role["slow"].message == "stopped: another replica failed"
        assert {r.hostname for r in by_role.values()} == {"localhost"}
        assert again.roles == app.roles
        waited = await sched.wait(app_id)
        assert waited == first
        listed = [(a.state, a.name) for a in await sched.list() if a.app_id == app_id]
        assert listed == [(AppState.FAILED, "app")]
        lines = sched.log_iter(app_id, "bad", should_tail=True)
        async with contextlib.aclosing(lines):
            assert [line async for line in lines] == ["out\n"]
        await sched.cancel(app_id)  # nothing runs: nothing changes
        assert await sched.describe(app_id) == first


def test_the_journal_tail_adds_nothing_for_the_collector_to_walk() -> None:
    tail = JournalTail()
    gc.collect()
    before = len(gc.get_objects())
    for i in range(256):
        lines: list[dict[str, Any]] = [
            {"k": "app", "a": f"app-{i}", "st": "RUNNING", "rs": [{"r": "w", "i": 0}]},
            {"k": "app", "a": f"app-{i}", "st": "SUCCEEDED", "rs": []},
        ]
        tail.add(Appended("j1", "seg-1.jsonl", 100 * i, 2 * i + 1, lines))
    del lines
    gc.collect()
    assert len(gc.get_objects()) - before < 16
    got = tail.after("j1", 2)
    assert got is not None
    assert got[0][0] == {
        "s": 3,
        "k": "app",
        "a": "app-1",
        "st": "RUNNING",
        "rs": [{"r": "w", "i": 0}],
    }
