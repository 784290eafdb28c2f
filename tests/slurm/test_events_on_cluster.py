"""Slurm's native events on both real clusters: a reader in its own process,
SIGKILLed at random and resumed from its saved cursor, misses no change --
also across a restart of slurmctld -- and a new reader resumes with the
changes made while none ran (accounting's ``sacct -S`` on one cluster, the
job completion log from its offset on the other), without a RESYNC."""

from __future__ import annotations

import functools
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.specs import AppDef, AppState, Resource, Role
from tests.events.burst import check_resume_inside_burst
from tests.events.chaos import (
    ChaosReader,
    check_delivery,
    kill_at_random,
    until_delivered,
)

from .cluster import Cluster
from .conftest import SETTLE

pytestmark = [pytest.mark.slurm, pytest.mark.anyio]

SESSION = "events"


def _app(name: str, script: str, *, replicas: int = 1, retries: int = 0) -> AppDef:
    role = Role(
        "worker",
        image="/",
        entrypoint="sh",
        args=["-c", script],
        num_replicas=replicas,
        max_retries=retries,
        resource=Resource(cpu=1, gpu=0, memMB=64),
    )
    return AppDef(name, roles=[role])


@pytest.fixture
async def sched(
    slurm_cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[SlurmScheduler]:
    monkeypatch.chdir(tmp_path)
    async with SlurmScheduler(
        SESSION,
        slurm_conf=str(slurm_cluster.conf),
        state_dir=str(tmp_path / "state"),
        min_interval=0.2,
        max_interval=1.0,
    ) as sched:
        yield sched


def _reader(slurm_cluster: Cluster, tmp_path: Path) -> ChaosReader:
    workdir = tmp_path / "reader"
    workdir.mkdir()
    params = {
        "slurm_conf": str(slurm_cluster.conf),
        "state_dir": str(tmp_path / "state"),
        "min_interval": 0.2,
        "max_interval": 1.0,
    }
    return ChaosReader("slurm", SESSION, workdir, params)


async def _cancel_once_restarted(sched: SlurmScheduler, app_id: str) -> None:
    """Wait for the app's first requeue, then cancel it (Slurm holds a
    requeued job back for minutes before it runs again)."""
    with anyio.fail_after(SETTLE):
        while True:
            desc = await sched.describe(app_id)
            assert desc is not None
            if desc.num_restarts >= 1:
                break
            await anyio.sleep(0.2)
    await sched.cancel(app_id)


#: apps running across the controller's restart: they end while it is down
#: or just after (slurmstepd retries telling it)
_ACROSS = 4


async def _restart_while_apps_run(
    cluster: Cluster,
    tmp_path: Path,
    submitted: dict[str, Any],
    results: dict[str, Any],
    submit: Callable[[int, AppDef, str, bool], Awaitable[None]],
) -> None:
    """Restart slurmctld while some apps' commands run, none starting.

    An ``srun`` asking for its step while the controller restarts waits out
    its step-retry timer (Slurm's ``step_wait``: 60-300 s, from
    ``SlurmctldTimeout``) for a notice the new controller never sends: the
    restart waits until the apps submitted so far have ended and the ones
    that cross it run their command (their step exists).
    """
    with anyio.fail_after(SETTLE):
        while set(results) < set(submitted):
            await anyio.sleep(0.2)
    marks = [tmp_path / f"across{i}.up" for i in range(_ACROSS)]
    for i, mark in enumerate(marks):
        app = _app(f"across{i}", f"touch {mark}; sleep 3")
        await submit(1000 + i, app, "SUCCEEDED", False)
    with anyio.fail_after(SETTLE):
        while not all(m.exists() for m in marks):
            await anyio.sleep(0.1)
    await anyio.to_thread.run_sync(cluster.restart_controller)


async def _run_chaos(
    sched: SlurmScheduler,
    slurm_cluster: Cluster,
    tmp_path: Path,
) -> None:
    reader = _reader(slurm_cluster, tmp_path)
    await reader.start()
    try:
        await _chaos(reader, sched, slurm_cluster, tmp_path)
    finally:
        await reader.stop(signal.SIGKILL)


async def _chaos(
    reader: ChaosReader,
    sched: SlurmScheduler,
    slurm_cluster: Cluster,
    tmp_path: Path,
) -> None:
    plan: list[tuple[AppDef, str, bool]] = []  # app, final state, replica 0 fails
    plan += [(_app(f"ok{i}", "sleep 0.2"), "SUCCEEDED", False) for i in range(26)]
    plan += [
        (_app(f"two{i}", "true", replicas=2), "SUCCEEDED", False) for i in range(2)
    ]
    plan += [(_app(f"bad{i}", "exit 3"), "FAILED", True) for i in range(8)]
    # failed once, requeued (restart 1), cancelled while held back
    plan += [
        (_app(f"retry{i}", "exit 4", retries=1), "CANCELLED", False) for i in range(6)
    ]
    plan += [(_app(f"stop{i}", "sleep 300"), "CANCELLED", False) for i in range(8)]
    ids: dict[str, tuple[str, bool, bool]] = {}  # id -> final, fails, retried
    results: dict[str, Any] = {}

    async def finish(app_id: str) -> None:
        desc = await sched.wait(app_id, timeout=SETTLE * 2)
        assert desc is not None
        results[app_id] = desc

    quiet = anyio.Event()  # no change to come: kills stop waiting for one
    kills = functools.partial(kill_at_random, reader, 10, every=(0.5, 3.0), quiet=quiet)

    async def submit(k: int, app: AppDef, final: str, fails: bool) -> None:
        app_id = await sched.submit(app, {"job_dir": str(tmp_path / f"j{k}")})
        ids[app_id] = (final, fails, app.roles[0].max_retries > 0)
        if app.roles[0].max_retries:
            work.start_soon(_cancel_once_restarted, sched, app_id)
        elif final == "CANCELLED":
            await sched.cancel(app_id)
        work.start_soon(finish, app_id)

    async with anyio.create_task_group() as tg:
        tg.start_soon(kills)
        async with anyio.create_task_group() as work:
            for k, (app, final, fails) in enumerate(plan):
                await submit(k, app, final, fails)
                if k == len(plan) // 2:
                    await _restart_while_apps_run(
                        slurm_cluster, tmp_path, ids, results, submit
                    )
        quiet.set()
    final_states = {i: f for i, (f, _, _) in ids.items()}
    # what Slurm reports is what the test planned
    assert {i: d.state.name for i, d in results.items()} == final_states
    failed = {i: {("worker", 0)} for i, (_, f, _) in ids.items() if f}
    await until_delivered(reader, final_states, failed, timeout=SETTLE)
    await reader.stop(signal.SIGKILL)
    assert reader.kills >= 10
    events = reader.events()
    assert not [e for e in events if e["kind"] == "resync"], "cursor not honoured"
    check_delivery(
        events,
        ids,
        final_states=final_states,
        failed_replicas=failed,
        restarts={i: 1 for i, (_, _, r) in ids.items() if r},
    )


@pytest.mark.timeout(400)
async def test_reader_killed_at_random_misses_no_change_across_a_slurmctld_restart(
    sched: SlurmScheduler, slurm_cluster: Cluster, tmp_path: Path
) -> None:
    """50 apps, the reader SIGKILLed ten times, slurmctld restarted halfway
    while four apps run (the kills alone were a separate run of the same
    apps: this one covers it)."""
    await _run_chaos(sched, slurm_cluster, tmp_path)


async def test_new_reader_resumes_with_the_changes_made_while_none_ran(
    sched: SlurmScheduler, slurm_cluster: Cluster, tmp_path: Path
) -> None:
    before = await sched.submit(_app("before", "true"), {"job_dir": "before"})
    await sched.wait(before, timeout=SETTLE)
    reader = _reader(slurm_cluster, tmp_path)
    try:
        await _resume(reader, sched, before)
    finally:
        await reader.stop(signal.SIGKILL)


async def _resume(reader: ChaosReader, sched: SlurmScheduler, before: str) -> None:
    await reader.start()
    await until_delivered(reader, {before: "SUCCEEDED"}, timeout=SETTLE)
    await reader.stop(signal.SIGKILL)
    first_run = len(reader.events())
    # while no reader runs
    ok = await sched.submit(_app("ok", "sleep 0.2"), {"job_dir": "ok"})
    bad = await sched.submit(_app("bad", "exit 3"), {"job_dir": "bad"})
    gone = await sched.submit(_app("gone", "sleep 300"), {"job_dir": "gone"})
    await sched.cancel(gone)
    for app_id in (ok, bad, gone):
        await sched.wait(app_id, timeout=SETTLE)
    final = {ok: "SUCCEEDED", bad: "FAILED", gone: "CANCELLED"}
    await reader.start()  # a new process, from the saved cursor
    await until_delivered(reader, final, timeout=SETTLE)
    await reader.stop(signal.SIGKILL)
    resumed = reader.events()[first_run:]
    assert not [e for e in resumed if e["kind"] == "resync"], resumed[:2]
    check_delivery(
        resumed, final, final_states=final, failed_replicas={bad: {("worker", 0)}}
    )


async def test_resuming_from_a_current_event_but_the_last_sends_every_app_again(
    sched: SlurmScheduler,
) -> None:
    codes = (0, 3, 0)
    ids = [await sched.submit(_app(f"burst{c}", f"exit {c}"), {}) for c in codes]
    for app_id in ids:
        await sched.wait(app_id, timeout=SETTLE)
    states = {
        a: AppState.SUCCEEDED if c == 0 else AppState.FAILED
        for a, c in zip(ids, codes, strict=True)
    }

    async def submit() -> str:
        return await sched.submit(_app("later", "exit 0"), {})

    await check_resume_inside_burst(sched, states, submit, k=2, timeout=SETTLE)
