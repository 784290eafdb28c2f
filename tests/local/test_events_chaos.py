"""Readers in other processes follow a local session's journal: live, and
across SIGKILLs of the reader (resumed from its saved cursor, no RESYNC while
the journal still holds the history)."""

from __future__ import annotations

import random
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest

from asyncsched.schedulers.local import LocalScheduler
from asyncsched.specs import AppDef, AppState, Role
from tests.events.chaos import (
    ChaosReader,
    check_delivery,
    kill_at_random,
    until_delivered,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the engine is the same on both loops; one is enough here


def role(script: str, max_retries: int = 0) -> Role:
    return Role(
        "w", image="/", entrypoint="sh", args=["-c", script], max_retries=max_retries
    )


def retried(marker: Path, fails: int, then: float) -> str:
    """Fail ``fails`` attempts (exit 3), then succeed after ``then`` seconds."""
    return (
        f"n=$(cat {marker} 2>/dev/null || echo 0); echo $((n+1)) > {marker};"
        f" if [ $n -lt {fails} ]; then sleep 0.2; exit 3; fi; sleep {then}; exit 0"
    )


class Workload:
    """Apps of every outcome, submitted in one session; their expected facts."""

    def __init__(self, sched: LocalScheduler, tmp: Path) -> None:
        self.sched = sched
        self.tmp = tmp
        self.final: dict[str, str] = {}
        self.failed: dict[str, set[tuple[str, int]]] = {}
        self.restarts: dict[str, int] = {}

    async def one(self, kind: str, i: int, rng: random.Random) -> None:
        pause = round(rng.uniform(0.1, 4.0), 2)
        if kind == "ok":
            app = AppDef(f"ok{i}", roles=[role(f"sleep {pause}; exit 0")])
        elif kind == "fail":
            app = AppDef(f"fail{i}", roles=[role(f"sleep {pause}; exit 3")])
        elif kind == "retry":
            marker = self.tmp / f"retry{i}"
            app = AppDef(f"retry{i}", roles=[role(retried(marker, 2, pause), 2)])
        else:
            app = AppDef(f"cancel{i}", roles=[role("sleep 60")])
        app_id = await self.sched.submit(app, {})
        if kind == "cancel":
            await anyio.sleep(pause)
            await self.sched.cancel(app_id)
        desc = await self.sched.wait(app_id, timeout=60)
        assert desc is not None
        self.final[app_id] = desc.state.name
        if kind in ("fail", "retry"):
            self.failed[app_id] = {("w", 0)}
        if kind == "retry":
            assert desc.state == AppState.SUCCEEDED
            self.restarts[app_id] = 2

    async def run(self, kinds: list[str], spread: float) -> None:
        rng = random.Random(11)
        async with anyio.create_task_group() as tg:
            for i, kind in enumerate(kinds):
                tg.start_soon(self.one, kind, i, rng)
                await anyio.sleep(spread / len(kinds))

    async def reader_follows(self, reader: ChaosReader) -> None:
        """Wait until ``reader`` follows the session: the changes of a first
        app reach it. (Its "open" comes before it has read the journal; the
        workload's first failures must come after it did, else only the
        CURRENT state of those apps is its to deliver.)"""
        app_id = await self.sched.submit(AppDef("warmup", roles=[role("exit 0")]), {})
        await self.sched.wait(app_id, timeout=60)
        await until_delivered(reader, {app_id: "SUCCEEDED"}, timeout=60)

    def check(self, events: list[dict[str, Any]]) -> None:
        check_delivery(
            events,
            self.final,
            final_states=self.final,
            failed_replicas=self.failed,
            restarts=self.restarts,
        )


async def test_another_process_follows_the_session_live(tmp_path: Path) -> None:
    reader = ChaosReader("local_cwd", "live", tmp_path / "reader")
    reader.workdir.mkdir()
    await reader.start()
    try:
        async with LocalScheduler("live", cancel_grace=2.0) as sched:
            work = Workload(sched, tmp_path)
            await work.reader_follows(reader)
            await work.run(["ok", "fail", "retry", "cancel"], spread=0.5)
            await until_delivered(reader, work.final, work.failed, timeout=30)
    finally:
        await reader.stop()
    events = reader.events()
    work.check(events)
    assert {e["pid"] for e in events} == {events[0]["pid"]}  # one reader run
    assert "resync" not in {e["kind"] for e in events}


async def test_a_reader_killed_at_random_misses_no_change(tmp_path: Path) -> None:
    kinds = ["ok"] * 15 + ["fail"] * 10 + ["retry"] * 15 + ["cancel"] * 10
    random.Random(3).shuffle(kinds)
    reader = ChaosReader("local_cwd", "chaos", tmp_path / "reader")
    reader.workdir.mkdir()
    await reader.start()
    try:
        async with LocalScheduler("chaos", cancel_grace=2.0) as sched:
            work = Workload(sched, tmp_path)
            await work.reader_follows(reader)
            quiet = anyio.Event()  # no change to come: kills stop waiting for one
            async with anyio.create_task_group() as tg:
                tg.start_soon(partial(kill_at_random, reader, 12, quiet=quiet))
                await work.run(kinds, spread=6.0)
                quiet.set()
            await until_delivered(reader, work.final, work.failed, timeout=60)
    finally:
        await reader.stop()
    assert reader.kills >= 10
    events = reader.events()
    assert len({e["pid"] for e in events}) > 1
    work.check(events)
    # the journal held the whole history: every resume was exact
    assert "resync" not in {e["kind"] for e in events}
