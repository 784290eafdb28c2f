"""``detach``: apps that outlive the process that submitted them, and only those."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import anyio
import psutil
import pytest

from asyncsched.errors import InvalidArgumentError, SubmitError
from asyncsched.schedulers.kit import EventKind
from asyncsched.schedulers.local import LocalFaults, LocalScheduler
from asyncsched.schedulers.local._detach import ACK_TIMEOUT
from asyncsched.specs import AppDef, AppState, Role

from ._helpers import killed_owner, lines, until_gone
from .conftest import alive

pytestmark = pytest.mark.anyio

#: the ack timeout of the hung-submitter test: long enough to tell a wait
#: from an immediate cancel, short enough not to idle the suite
HELD_ACK_TIMEOUT = 6.0


async def test_a_detached_app_outlives_its_killed_orchestrator_and_is_waited_and_cancelled_from_a_new_process(
    tmp_path: Path,
) -> None:
    release = tmp_path / "release"
    async with killed_owner("_detached_owner", str(release)) as (_, line):
        apps = json.loads(line)  # every app runs
    waits, long, attached = (apps[k] for k in ("waits", "long", "attached"))
    # the default stays orphan-proof; detached replicas keep running
    await until_gone({attached[1]})
    assert alive({waits[1], long[1]}) == {waits[1], long[1]}
    async with LocalScheduler("det", cancel_grace=1.0) as sched:
        desc = await sched.describe(waits[0])
        assert desc is not None
        assert desc.state == AppState.RUNNING
        release.touch()
        desc = await sched.wait(waits[0], timeout=30)
        assert desc is not None
        assert desc.state == AppState.FAILED
        assert desc.roles_statuses[0].replicas[0].exit_code == 5
        await sched.cancel(long[0])
        desc = await sched.wait(long[0], timeout=30)
        assert desc is not None
        assert desc.state == AppState.CANCELLED
        await until_gone({long[1]})
        # the detached supervisor journaled both ends
        async with sched.events([waits[0], long[0]]) as stream:
            current = {}
            async for event in stream:
                assert event.kind == EventKind.CURRENT
                current[event.app_id] = event.state
                if len(current) == 2:
                    break
        assert current == {waits[0]: AppState.FAILED, long[0]: AppState.CANCELLED}
        assert await lines(sched, waits[0], "w") == []


async def test_detach_is_a_documented_run_option() -> None:
    opt = LocalScheduler("x").run_opts().get("detach")
    assert opt is not None
    assert opt.default is False


async def test_every_reader_of_a_process_sees_the_changes_another_process_makes(
    sched: LocalScheduler,
) -> None:
    ends: dict[int, AppState] = {}

    async def follow(k: int, app_id: str) -> None:
        async with sched.events([app_id]) as stream:
            async for event in stream:
                if event.terminal:
                    ends[k] = event.state
                    return

    role = Role("w", image="/", entrypoint="sh", args=["-c", "sleep 0.5; exit 2"])
    # supervised by a detached process: these readers learn of it from the journal
    app_id = await sched.submit(AppDef("elsewhere", roles=[role]), {"detach": True})
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for k in range(100):
                tg.start_soon(follow, k, app_id)
    assert ends == dict.fromkeys(range(100), AppState.FAILED)


def marked(marker: str, exclude: frozenset[int] = frozenset()) -> set[int]:
    """The live processes whose command line holds ``marker`` (but ``exclude``)."""
    found = set()
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.pid in exclude:
            continue
        cmdline = proc.info["cmdline"] or []
        if proc.info["status"] != psutil.STATUS_ZOMBIE and marker in " ".join(cmdline):
            found.add(proc.pid)
    return found


async def until_unmarked(
    marker: str, exclude: frozenset[int], timeout: float = 30
) -> None:
    with anyio.fail_after(timeout):
        while marked(marker, exclude):
            await anyio.sleep(0.05)


async def assert_undone(
    session: str, app_id: str, marker: str, exclude: frozenset[int] = frozenset()
) -> None:
    """The app of a submit that never returned its id was stopped, not left running."""
    async with LocalScheduler(session, cancel_grace=1.0) as sched:
        desc = await sched.wait(app_id, timeout=60)
        assert desc is not None
        assert desc.state == AppState.CANCELLED
        pids = {r.pid for r in desc.roles_statuses[0].replicas if r.pid is not None}
        await until_gone(pids)
        listed = {app.app_id: app.state for app in await sched.list()}
        assert listed.get(app_id, AppState.CANCELLED) == AppState.CANCELLED
    await until_unmarked(marker, exclude)


async def test_a_detach_submit_cancelled_once_its_supervisor_runs_the_app_leaves_nothing_running() -> (
    None
):
    marker = f"held-{uuid.uuid4().hex}"
    role = Role("w", "/", entrypoint="sh", args=["-c", f"sleep 60; : {marker}"])
    ids: list[str] = []
    with anyio.CancelScope() as scope:

        def cancel_before_ack(app_id: str) -> None:
            ids.append(app_id)  # the app runs, the submit has not returned yet
            scope.cancel()

        faults = LocalFaults(before_detach_ack=cancel_before_ack)
        async with LocalScheduler("detc", cancel_grace=1.0, faults=faults) as sched:
            await sched.submit(AppDef("held", roles=[role]), {"detach": True})
            pytest.fail("the submit returned although it was cancelled")
    assert scope.cancelled_caught
    [app_id] = ids
    await assert_undone("detc", app_id, marker)


async def test_a_detach_submitter_killed_once_its_supervisor_runs_the_app_leaves_nothing_running() -> (
    None
):
    marker = f"held-{uuid.uuid4().hex}"
    held = ("_detach_held_owner", "detk", marker, str(ACK_TIMEOUT))
    async with killed_owner(*held) as (owner, line):
        app_id = line.decode().strip()
        assert marked(marker, frozenset({owner.pid}))  # held at the ack: it runs
    assert app_id
    await assert_undone("detk", app_id, marker)


async def test_a_detach_submit_failing_once_its_supervisor_runs_the_app_raises_submit_error_and_leaves_nothing_running() -> (
    None
):
    marker = f"held-{uuid.uuid4().hex}"
    role = Role("w", "/", entrypoint="sh", args=["-c", f"sleep 60; : {marker}"])
    ids: list[str] = []

    def fail_before_ack(app_id: str) -> None:
        ids.append(app_id)
        raise OSError("the submitter broke before returning the id")

    faults = LocalFaults(before_detach_ack=fail_before_ack)
    async with LocalScheduler("detf", cancel_grace=1.0, faults=faults) as sched:
        with pytest.raises(SubmitError, match=r"was not acknowledged.*submitter broke"):
            await sched.submit(AppDef("held", roles=[role]), {"detach": True})
    [app_id] = ids
    await assert_undone("detf", app_id, marker)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the subject is a subprocess
async def test_a_detach_submitter_hung_before_the_ack_has_its_app_cancelled_after_the_ack_timeout() -> (
    None
):
    marker = f"held-{uuid.uuid4().hex}"
    # the timeout shortened from its 30 s default (LocalFaults.detach_ack_timeout)
    held = ("_detach_held_owner", "deth", marker, str(HELD_ACK_TIMEOUT))
    async with killed_owner(*held) as (owner, line):
        app_id = line.decode().strip()
        started = anyio.current_time()
        # the submitter stays alive but never acknowledges
        await assert_undone("deth", app_id, marker, frozenset({owner.pid}))
        assert owner.poll() is None
        assert anyio.current_time() - started >= HELD_ACK_TIMEOUT - 1


def test_the_detach_ack_timeout_defaults_to_30_s_and_refuses_a_non_positive_value() -> (
    None
):
    assert LocalFaults().detach_ack_timeout == ACK_TIMEOUT == 30.0
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(InvalidArgumentError, match="detach_ack_timeout"):
            LocalFaults(detach_ack_timeout=bad)
