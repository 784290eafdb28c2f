"""What one app costs in worker-thread hops, and that its records stay right.

An app's first record is written by the spawner job that starts it, its final
record by the hop that reads its exit facts; these tests check the count and
what other processes and event readers see on those short paths.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from asyncsched.errors import SchedulerClosedError
from asyncsched.schedulers.local_scheduler import LocalFaults, LocalScheduler
from asyncsched.specs import AppState

from ._helpers import record
from .conftest import app_of, sh_role

pytestmark = pytest.mark.anyio


def _journal(state_dir: Path, session: str, app_id: str) -> list[dict[str, Any]]:
    lines = []
    for seg in sorted((state_dir / "events" / session).glob("seg-*.jsonl")):
        for raw in seg.read_text().splitlines():
            line = json.loads(raw)
            if line.get("a") == app_id:
                lines.append(line)
    return lines


def _hops(sched: LocalScheduler) -> tuple[int, int, int]:
    runtime = sched._runtime
    return runtime.spawner.jobs, runtime.writer.hops, runtime.exits.hops


async def test_a_sequential_app_costs_one_spawn_job_and_one_exit_hop(
    log_dir: Path, state_dir: Path
) -> None:
    cfg = {"log_dir": str(log_dir)}
    async with LocalScheduler("hops") as sched:
        # the first submit also starts the scheduler's helpers: not counted
        await sched.wait(await sched.submit(app_of(sh_role("true")), cfg))
        before = _hops(sched)
        app_ids = []
        for _ in range(3):
            app_id = await sched.submit(app_of(sh_role("exit 0")), cfg)
            desc = await sched.wait(app_id)
            assert desc is not None
            assert desc.state == AppState.SUCCEEDED
            app_ids.append(app_id)
        spawns, writes, exits = (
            a - b for a, b in zip(_hops(sched), before, strict=True)
        )
    # one spawner job (dirs, fork/exec, first record) and one exit hop (exit
    # facts, final record): the record writer made no hop of its own
    assert (spawns, writes, exits) == (3, 0, 3)
    for app_id in app_ids:
        app_dir = log_dir / "hops" / app_id
        rec = record(app_dir)
        assert rec["finished"]
        assert rec["state"] == "SUCCEEDED"
        success = json.loads((app_dir / "SUCCESS").read_text())
        assert success["final_state"] == "SUCCEEDED"
        pointer = state_dir / "local" / "hops" / f"{app_id}.json"
        assert json.loads(pointer.read_text())["app_dir"] == str(app_dir)
        # each change journaled once, in order
        kinds = [
            (line["k"], line["st"]) for line in _journal(state_dir, "hops", app_id)
        ]
        assert kinds == [
            ("submitted", "RUNNING"),
            ("replica", "SUCCEEDED"),
            ("app", "SUCCEEDED"),
        ]


async def test_a_cancel_asked_at_the_last_exit_wins_over_its_exit_code(
    log_dir: Path, state_dir: Path
) -> None:
    # the replica asks for its own cancel as another process would (the
    # marker in its app dir), then exits 0: the exit reads CANCELLED and the
    # SUCCEEDED record made for the plain outcome is never written
    script = (
        'app_dir=$(dirname "$(dirname "$(dirname "$TORCHELASTIC_ERROR_FILE")")")'
        ' && touch "$app_dir/CANCEL_REQUESTED" && exit 0'
    )
    cfg = {"log_dir": str(log_dir)}
    async with LocalScheduler("marker") as sched:
        app_id = await sched.submit(app_of(sh_role(script)), cfg)
        desc = await sched.wait(app_id, timeout=30)
    assert desc is not None
    assert desc.state == AppState.CANCELLED
    app_dir = log_dir / "marker" / app_id
    assert record(app_dir)["state"] == "CANCELLED"
    assert json.loads((app_dir / "SUCCESS").read_text())["final_state"] == "CANCELLED"
    app_states = [
        line["st"]
        for line in _journal(state_dir, "marker", app_id)
        if line["k"] == "app"
    ]
    assert app_states == ["CANCELLED"]


async def test_a_cancel_while_the_last_exit_is_written_finds_the_app_over(
    log_dir: Path,
) -> None:
    writing = threading.Event()  # the final record is about to be written
    cancelled = threading.Event()  # the cancel was made meanwhile
    records: list[str] = []

    def before_record(path: str) -> None:
        # (worker thread) hold the second write (the final record) of the app
        records.append(path)
        if len(records) == 2:
            writing.set()
            cancelled.wait(30)

    cfg = {"log_dir": str(log_dir)}
    async with LocalScheduler(
        "held", faults=LocalFaults(before_record=before_record)
    ) as sched:
        app_id = await sched.submit(app_of(sh_role("exit 0")), cfg)
        assert await anyio.to_thread.run_sync(writing.wait, 30)
        try:
            async with anyio.create_task_group() as tg:
                # the cancel waits for the exit being written (what it
                # describes is never older than that exit's event)...
                tg.start_soon(sched.cancel, app_id)
                await anyio.wait_all_tasks_blocked()
                cancelled.set()  # ...which then ends
        finally:
            cancelled.set()
        desc = await sched.wait(app_id, timeout=30)
        assert desc is not None
        # its last replica had exited 0: the cancel came after the end
        assert desc.state == AppState.SUCCEEDED
    rec = record(log_dir / "held" / app_id)
    assert rec["state"] == "SUCCEEDED"
    assert len(records) == 2  # written once at the end, never rewritten


async def test_a_submit_undone_after_its_first_record_leaves_no_trace(
    log_dir: Path, state_dir: Path
) -> None:
    # aclose begins while the spawn job writes the first record: the submit
    # is undone, so no pointer leads to it and event readers see it forgotten
    writing = threading.Event()
    closing = threading.Event()

    def before_record(path: str) -> None:
        writing.set()
        closing.wait(30)

    s = LocalScheduler(
        "undone", close_grace=0.5, faults=LocalFaults(before_record=before_record)
    )

    async def close_while_writing() -> None:
        assert await anyio.to_thread.run_sync(writing.wait, 30)
        tg.start_soon(s.aclose)
        with anyio.fail_after(10):
            while not s.closed:
                await anyio.sleep(0.01)
        closing.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(close_while_writing)
        with pytest.raises(SchedulerClosedError):
            await s.submit(app_of(sh_role("sleep 30")), {"log_dir": str(log_dir)})
    assert os.listdir(log_dir / "undone") == []
    assert list((state_dir / "local" / "undone").glob("*.json")) == []
    [submitted, forgotten] = [
        line
        for seg in sorted((state_dir / "events" / "undone").glob("seg-*.jsonl"))
        for line in map(json.loads, seg.read_text().splitlines())
        if "a" in line
    ]
    assert submitted["k"] == "submitted"
    assert (forgotten["k"], forgotten["a"]) == ("forgotten", submitted["a"])


async def test_apps_submitted_at_once_are_each_journaled_once_per_change(
    log_dir: Path, state_dir: Path
) -> None:
    # at once, first records go through the record writer's batches (the
    # spawn jobs leave them) and final ones through the exit hops: either
    # way a record on disk when submit returns and each change journaled once
    cfg = {"log_dir": str(log_dir)}
    app_ids: list[str] = []
    async with LocalScheduler("many") as sched:

        async def one() -> None:
            app_id = await sched.submit(app_of(sh_role("exit 0")), cfg)
            assert record(log_dir / "many" / app_id)["app_id"] == app_id
            desc = await sched.wait(app_id, timeout=60)
            assert desc is not None
            assert desc.state == AppState.SUCCEEDED
            app_ids.append(app_id)

        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(one)
    assert len(app_ids) == 20
    for app_id in app_ids:
        assert record(log_dir / "many" / app_id)["state"] == "SUCCEEDED"
        kinds = [
            (line["k"], line["st"]) for line in _journal(state_dir, "many", app_id)
        ]
        assert kinds == [
            ("submitted", "RUNNING"),
            ("replica", "SUCCEEDED"),
            ("app", "SUCCEEDED"),
        ]
