"""Replicas that exit together: each exit keeps its own status and code, and
their files are read in one worker-thread hop per batch, not one per exit."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import anyio
import pytest

from asyncsched.schedulers.local._exit_batch import ExitFactsReader
from asyncsched.schedulers.local._exit_facts import ExitFacts
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState

from ._helpers import finished_record, until_ready
from .conftest import app_of, py_role, sh_role

#: on asyncio and trio
pytestmark = pytest.mark.anyio


async def test_exits_due_together_are_read_in_one_hop_each_with_its_own_facts() -> None:
    def read(
        error_file: str,
        replica_dir: str,
        app_dir: str,
        rc: int | None,
        attempt: int,
        started: float,
    ) -> ExitFacts:
        if rc == 13:
            raise OSError("unreadable")
        return ExitFacts(error_text=f"{app_dir}:{rc}", cancel_requested=rc == 7)

    reader = ExitFactsReader(read)
    got: dict[int, ExitFacts | Exception] = {}

    async def one(i: int) -> None:
        try:
            got[i] = await reader.read(("e", "r", f"app{i}", i, 0, 0.0))
        except OSError as exc:
            got[i] = exc

    async with anyio.create_task_group() as tg:
        for i in range(200):
            tg.start_soon(one, i)
    assert reader.hops == 1
    assert isinstance(got.pop(13), OSError)  # only the failed read raises
    for i, facts in got.items():
        assert isinstance(facts, ExitFacts)
        assert facts.error_text == f"app{i}:{i}"
        assert facts.cancel_requested == (i == 7)


async def test_exits_queued_during_a_hop_are_read_in_the_next_one() -> None:
    reader = ExitFactsReader(lambda *q: ExitFacts(error_text=str(q[3])))
    first = await reader.read(("e", "r", "a", 1, 0, 0.0))
    second = await reader.read(("e", "r", "a", 2, 0, 0.0))
    assert (first.error_text, second.error_text) == ("1", "2")
    assert reader.hops == 2


async def test_a_cancelled_reader_leaves_the_others_their_facts() -> None:
    reader = ExitFactsReader(lambda *q: ExitFacts(error_text=str(q[3])))
    got: dict[int, str | None] = {}
    gone = anyio.CancelScope()
    gone.cancel()  # cancelled before it even asks

    async def cancelled() -> None:
        with gone:
            got[0] = (await reader.read(("e", "r", "a", 0, 0, 0.0))).error_text

    async def one(i: int) -> None:
        got[i] = (await reader.read(("e", "r", "a", i, 0, 0.0))).error_text

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(cancelled)
            for i in range(1, 6):
                tg.start_soon(one, i)
    assert gone.cancelled_caught
    assert got == {i: str(i) for i in range(1, 6)}


async def test_two_hundred_apps_exiting_at_once_each_get_their_own_exit_code(
    log_dir: Path, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    # held open read-write: every replica's read blocks until the test writes
    # its line, whenever the replica gets there (no replica can miss it)
    keep = os.open(gate, os.O_RDWR | os.O_NONBLOCK)
    try:
        async with LocalScheduler(
            "together", close_grace=0.5, cache_size=300, max_running_replicas=200
        ) as sched:
            app_ids: dict[str, int] = {}

            async def submit(code: int) -> None:
                role = sh_role(f'read _ < "{gate}"; exit {code}')
                app_id = await sched.submit(app_of(role), {"log_dir": str(log_dir)})
                app_ids[app_id] = code

            async with anyio.create_task_group() as tg:
                for code in range(200):
                    tg.start_soon(submit, code)
            os.write(keep, b"\n" * 200)
            with anyio.fail_after(120):
                for app_id, code in app_ids.items():
                    desc = await sched.wait(app_id)
                    assert desc is not None
                    want = AppState.SUCCEEDED if code == 0 else AppState.FAILED
                    assert desc.state == want, (code, desc)
                    replica = desc.roles_statuses[0].replicas[0]
                    assert replica.exit_code == code
            # the exit facts were read in batches, not one hop per exit
            assert sched._runtime.exits.hops < 100
        for app_id, code in app_ids.items():
            rec = await finished_record(log_dir / "together" / app_id)
            assert rec["roles"]["worker"][0]["exit_code"] == code
            success = json.loads(
                (log_dir / "together" / app_id / "SUCCESS").read_text()
            )
            assert success["roles"]["worker"][0]["exitcode"] == code
    finally:
        os.close(keep)


async def test_a_replica_killed_from_outside_still_gets_its_status(
    sched: LocalScheduler, log_dir: Path
) -> None:
    role = py_role("import time\nprint('ready', flush=True)\ntime.sleep(600)")
    app_id = await sched.submit(app_of(role), {"log_dir": str(log_dir)})
    await until_ready(sched, app_id)
    desc = await sched.describe(app_id)
    assert desc is not None
    pid = desc.roles_statuses[0].replicas[0].pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    with anyio.fail_after(60):
        desc = await sched.wait(app_id)
    assert desc is not None
    assert desc.state == AppState.FAILED
    assert desc.roles_statuses[0].replicas[0].exit_code == 128 + signal.SIGKILL
    rec = await finished_record(log_dir / "test" / app_id)
    assert rec["state"] == "FAILED"
    assert rec["roles"]["worker"][0]["exit_code"] == 128 + signal.SIGKILL
