"""The contract's cases about outcomes: states, exit codes, messages, describe, list."""

from __future__ import annotations

import anyio
import anyio.lowlevel

from asyncsched.errors import (
    WaitTimeoutError,
)
from asyncsched.schedulers.api import DescribeAppResponse
from asyncsched.schedulers.shared.messages import (
    failed_replica_message,
    replica_exit_message,
)
from asyncsched.specs import (
    AppState,
    is_terminal,
)

from ._case_base import (
    _cancel_if_declared,
    _case,
    _final,
    _raises,
)
from .target import ContractTarget
from .waiting import wait_for_state

# -- outcomes ----------------------------------------------------------------


@_case()
async def _successful_app_is_succeeded(target: ContractTarget) -> None:
    """An app whose replica exits 0 is SUCCEEDED."""
    app_id = await target.run("echo hello")
    desc = await _final(target, app_id)
    assert desc.app_id == app_id
    assert desc.state == AppState.SUCCEEDED, desc


@_case()
async def _nonzero_exit_is_failed_with_exit_code(target: ContractTarget) -> None:
    """A replica exiting 3 fails the app, and reads exit code 3."""
    app_id = await target.run("exit 3")
    desc = await _final(target, app_id)
    assert desc.state == AppState.FAILED, desc
    if target.scheduler.capabilities.per_replica_status:
        replica = desc.roles_statuses[0].replicas[0]
        assert replica.exit_code == 3, replica
        assert replica.state == AppState.FAILED, replica


@_case()
async def _failure_messages_have_one_shape(target: ContractTarget) -> None:
    """A failed app's message names the replica that failed it and how
    (``replica worker/0 exited with code 3``), and that replica's own
    message says how it ended (``exited with code 3``), with no pod,
    container or job name in front: the same words on every backend."""
    app_id = await target.run("exit 3")
    desc = await _final(target, app_id)
    assert desc.state == AppState.FAILED, desc
    want = failed_replica_message("worker", 0, 3)
    assert desc.msg.startswith(want), f"msg {desc.msg!r}, want {want!r}"
    if target.scheduler.capabilities.per_replica_status:
        replica = desc.roles_statuses[0].replicas[0]
        assert replica.message == replica_exit_message(3), replica


@_case()
async def _every_replica_runs(target: ContractTarget) -> None:
    """Three replicas of one role all run and succeed."""
    app_id = await target.run("echo replica", replicas=3)
    desc = await _final(target, app_id)
    assert desc.state == AppState.SUCCEEDED, desc


@_case("per_replica_status")
async def _declared_per_replica_status_reports_each_replica(
    target: ContractTarget,
) -> None:
    """Per-replica status names every replica of every role, each with its
    own state and exit code."""
    app = target.roles_app({"ok": "echo ok", "bad": "exit 3"})
    app.roles[0].num_replicas = 2
    app_id = await target.scheduler.submit(app, target.cfg)
    desc = await _final(target, app_id)
    roles = {r.role: r.replicas for r in desc.roles_statuses}
    assert sorted(roles) == ["bad", "ok"], desc
    assert sorted(r.id for r in roles["ok"]) == [0, 1], desc
    assert [r.id for r in roles["bad"]] == [0], desc
    bad = roles["bad"][0]
    lost = () if target.independent_replicas else (AppState.UNKNOWN,)
    assert bad.state in (AppState.FAILED, *lost), bad
    if bad.state == AppState.FAILED:
        assert bad.exit_code == 3, bad


@_case()
async def _unknown_app(target: ContractTarget) -> None:
    """An unknown app is None, does not exist, waits to None, cancels silently."""
    sched = target.scheduler
    assert await sched.describe("no-such-app-bcdfg") is None
    assert await sched.exists("no-such-app-bcdfg") is False
    assert await sched.wait("no-such-app-bcdfg", timeout=5) is None
    await sched.cancel("no-such-app-bcdfg")  # silently nothing


@_case("cancel")
async def _cancel_is_idempotent_and_reports_cancelled(target: ContractTarget) -> None:
    """Cancelling twice is fine; the app then reads CANCELLED and still exists."""
    sched = target.scheduler
    app_id = await target.run("sleep 60")
    await sched.cancel(app_id)
    await sched.cancel(app_id)
    desc = await _final(target, app_id)
    assert desc.state == AppState.CANCELLED, desc
    assert await sched.exists(app_id)


@_case()
async def _wait_timeout_raises(target: ContractTarget) -> None:
    """``wait`` past its timeout raises WaitTimeoutError (a TimeoutError)."""
    app_id = await target.run("sleep 60")
    with _raises(WaitTimeoutError) as caught:
        await target.scheduler.wait(app_id, timeout=0.2)
    [error] = caught
    assert isinstance(error, TimeoutError)
    assert isinstance(error, WaitTimeoutError)
    assert error.app_id == app_id
    await _cancel_if_declared(target, app_id)


@_case()
async def _describe_answers_right_after_submit(target: ContractTarget) -> None:
    """No gap between ``submit`` returning and the app being known.

    Quick and long apps, submitted one after another and all at once: the
    first ``describe`` after each ``submit`` names the app in a known state
    (SUBMITTED, PENDING or later), never ``None`` nor UNKNOWN.
    """
    sched = target.scheduler
    scripts = ["exit 0", "exit 3", "sleep 60"]
    for script in scripts:
        app_id = await target.run(script)
        desc = await sched.describe(app_id)
        assert desc is not None, f"{script!r}: describe right after submit"
        assert desc.app_id == app_id
        assert desc.state != AppState.UNKNOWN, desc
    ids: dict[int, str] = {}

    async def submit_then_describe(index: int) -> None:
        app_id = await target.run(scripts[index % len(scripts)])
        ids[index] = app_id
        desc = await sched.describe(app_id)
        assert desc is not None, f"app {index}: describe right after submit"
        assert desc.state != AppState.UNKNOWN, desc

    async with anyio.create_task_group() as tg:
        for index in range(6):
            tg.start_soon(submit_then_describe, index)
    for app_id in ids.values():
        await _cancel_if_declared(target, app_id)


@_case()
async def _describe_is_running_while_running(target: ContractTarget) -> None:
    """A long app reads RUNNING (never terminal) while it runs."""
    app_id = await target.run("sleep 60")

    def running(desc: DescribeAppResponse) -> bool:
        assert not is_terminal(desc.state), desc
        return desc.state == AppState.RUNNING

    await wait_for_state(target.scheduler, app_id, running, target.quick_timeout)
    await _cancel_if_declared(target, app_id)


@_case("list")
async def _list_contains_submitted_app(target: ContractTarget) -> None:
    """``list`` (declared) names a finished app with its state."""
    app_id = await target.run("echo listed")
    await _final(target, app_id)
    listed = {item.app_id: item for item in await target.scheduler.list()}
    assert app_id in listed, listed
    assert listed[app_id].state == AppState.SUCCEEDED, listed[app_id]
