"""The contract's cases about bad input, failures and cancels."""

from __future__ import annotations

import anyio
import anyio.lowlevel

from asyncsched.errors import (
    InvalidRunConfigException,
    SpecError,
)
from asyncsched.schedulers.api import DescribeAppResponse
from asyncsched.schedulers.shared.messages import (
    failed_replica_message,
    replica_exit_message,
)
from asyncsched.specs import (
    AppDef,
    AppState,
    StatusReason,
    is_terminal,
)

from ._case_base import (
    _case,
    _final,
    _lines,
    _raises,
    _wait_running,
)
from .target import ContractTarget
from .waiting import wait_for_state

# -- bad input ---------------------------------------------------------------


@_case()
async def _invalid_app_rejected_before_launch(target: ContractTarget) -> None:
    """An invalid app is a SpecError naming the field; nothing is launched."""
    sched = target.scheduler
    listing = sched.capabilities.list
    before = {a.app_id for a in await sched.list()} if listing else set()
    bad = target.app("echo never")
    bad.roles[0].num_replicas = 0
    with _raises(SpecError) as caught:
        await sched.submit(bad, target.cfg)
    assert caught[0].field == "roles[0].num_replicas"
    with _raises(SpecError):
        await sched.submit(AppDef(name="empty", roles=[]), target.cfg)
    if listing:
        assert {a.app_id for a in await sched.list()} == before


@_case()
async def _missing_executable_is_refused_or_reads_not_found(
    target: ContractTarget,
) -> None:
    """An entrypoint that does not exist is a SpecError at submit, naming
    the role's entrypoint, where the backend can tell before launch; where
    it cannot, the replica fails in the same words on every backend: FAILED,
    exit code 127, reason LAUNCH_FAILED, ``command not found (exit code
    127)``."""
    sched = target.scheduler
    app = target.app("unused")
    app.roles[0].entrypoint = "no-such-command-bcdfg"
    app.roles[0].args = []
    refused: SpecError | None = None
    try:
        app_id = await sched.submit(app, target.cfg)
    except SpecError as exc:
        refused = exc
    if refused is not None:
        assert refused.field == "roles[0].entrypoint", refused
        assert "not found" in str(refused), refused
        return
    desc = await _final(target, app_id)
    assert desc.state == AppState.FAILED, desc
    words = replica_exit_message(127)
    assert desc.msg.startswith(failed_replica_message("worker", 0, 127)), desc
    if sched.capabilities.per_replica_status:
        replica = desc.roles_statuses[0].replicas[0]
        assert replica.state == AppState.FAILED, replica
        assert replica.exit_code == 127, replica
        assert replica.reason == StatusReason.LAUNCH_FAILED, replica
        assert replica.message.startswith(words), replica


@_case()
async def _unknown_run_option_rejected(target: ContractTarget) -> None:
    """An unknown run option is an InvalidRunConfigException naming it."""
    with _raises(InvalidRunConfigException) as caught:
        await target.scheduler.submit(
            target.app("echo never"), {**target.cfg, "no_such_option_xyz": "1"}
        )
    assert caught[0].cfg_key == "no_such_option_xyz"


@_case()
async def _dryrun_launches_nothing_and_formats(target: ContractTarget) -> None:
    """A dry run formats its request and launches nothing."""
    sched = target.scheduler
    info = await sched.submit_dryrun(target.app("echo dry"), target.cfg)
    assert repr(info)
    assert info.app is not None
    if sched.capabilities.list:
        assert all(a.name != "app" or is_terminal(a.state) for a in await sched.list())


# -- failures and cancels ----------------------------------------------------


@_case()
async def _one_failed_replica_fails_the_app(target: ContractTarget) -> None:
    """One replica succeeds, another fails: FAILED, each replica as it ended."""
    app = target.roles_app({"ok": "echo ok", "bad": "sleep 2; exit 3"})
    app_id = await target.scheduler.submit(app, target.cfg)
    desc = await _final(target, app_id)
    assert desc.state == AppState.FAILED, desc
    if target.scheduler.capabilities.per_replica_status:
        replicas = {r.role: r.replicas[0] for r in desc.roles_statuses}
        if target.independent_replicas:
            assert replicas["ok"].state == AppState.SUCCEEDED, replicas
            assert replicas["ok"].exit_code == 0, replicas
            assert replicas["bad"].state == AppState.FAILED, replicas
            assert replicas["bad"].exit_code == 3, replicas
        else:
            assert replicas["ok"].state in (AppState.SUCCEEDED, AppState.UNKNOWN)
            assert (replicas["bad"].state, replicas["bad"].exit_code) in (
                (AppState.FAILED, 3),
                (AppState.UNKNOWN, None),
            ), replicas


@_case("per_replica_status")
async def _a_failed_replica_stops_its_siblings_by_default(
    target: ContractTarget,
) -> None:
    """Fail-fast is the default on every backend: once a replica fails for
    good the app is FAILED and its other replicas are stopped (not left to run
    to their end), each reading a terminal state other than SUCCEEDED."""
    app = target.roles_app({"bad": "sleep 1; exit 3", "long": "sleep 300"})
    started = anyio.current_time()
    app_id = await target.scheduler.submit(app, target.cfg)
    desc = await _final(target, app_id)
    took = anyio.current_time() - started
    assert desc.state == AppState.FAILED, desc
    assert took < 300, f"the sibling ran to its end ({took:.0f}s)"
    replicas = {r.role: r.replicas[0] for r in desc.roles_statuses}
    assert replicas["long"].state in (
        AppState.CANCELLED,
        AppState.FAILED,
        AppState.UNKNOWN,
    ), replicas


@_case("cancel", "per_replica_status")
async def _cancel_after_a_failure_keeps_the_app_failed(target: ContractTarget) -> None:
    """A cancel wins only when it comes before any failure."""
    sched = target.scheduler
    app = target.roles_app({"bad": "sleep 1; exit 3", "long": "sleep 60"})
    app_id = await sched.submit(app, target.cfg)
    long_ran = False

    def bad_failed(desc: DescribeAppResponse) -> bool:
        nonlocal long_ran
        states = {r.role: r.replicas[0].state for r in desc.roles_statuses}
        long_ran = long_ran or states.get("long") == AppState.RUNNING
        # (an engine that ends the whole job on a failure may be done)
        return states.get("bad") == AppState.FAILED or is_terminal(desc.state)

    await wait_for_state(sched, app_id, bad_failed, target.quick_timeout)
    await sched.cancel(app_id)
    desc = await _final(target, app_id)
    assert desc.state == AppState.FAILED, desc
    replicas = {r.role: r.replicas[0] for r in desc.roles_statuses}
    lost = () if target.independent_replicas else (AppState.UNKNOWN,)
    assert replicas["bad"].state in (AppState.FAILED, *lost), replicas
    # stopped by the cancel (or by fail-fast), and over: wait returns the
    # app settled, every replica final with what the engine saw
    long = replicas["long"]
    assert long.state in (AppState.CANCELLED, *lost), long
    if long.state != AppState.UNKNOWN:
        assert long.reason == StatusReason.CANCELLED, long
        if long_ran:  # it ran, then was stopped: the engine saw it exit
            assert long.exit_code is not None, long


@_case("cancel")
async def _wait_after_cancel_returns_every_replica_stopped(
    target: ContractTarget,
) -> None:
    """``wait`` after ``cancel``: every replica final, with its exit code.

    Users free GPUs, ports and output dirs once ``wait`` returns: the app it
    returns has no replica left running, and each replica stopped by the
    cancel says so (CANCELLED, reason CANCELLED, the exit code the engine saw).
    """
    sched = target.scheduler
    app_id = await target.run("echo started; sleep 60", replicas=2)
    await _wait_running(target, app_id, replicas=2)
    await sched.cancel(app_id)
    desc = await _final(target, app_id)
    assert desc.state == AppState.CANCELLED, desc
    if not sched.capabilities.per_replica_status:
        return
    [role] = desc.roles_statuses
    assert len(role.replicas) == 2, role
    lost = () if target.independent_replicas else (AppState.UNKNOWN,)
    for replica in role.replicas:
        assert replica.state in (AppState.CANCELLED, *lost), replica
        if replica.state == AppState.CANCELLED:
            assert replica.exit_code is not None, replica
            assert replica.reason == StatusReason.CANCELLED, replica


@_case("cancel", posix_shell=True)
async def _wait_after_cancel_waits_out_the_replicas_grace(
    target: ContractTarget,
) -> None:
    """Replicas that handle SIGTERM are waited for until they exit.

    Each replica traps SIGTERM, takes a second to shut down, then exits 7:
    ``wait`` returns only after that, so every replica reads the 7 it exited
    with (a ``wait`` that returned during the grace would see replicas still
    running, or no exit code).
    """
    sched = target.scheduler
    # ``sleep & wait``: a trapped signal interrupts ``wait`` at once, also
    # where only the shell (PID 1 of a container) is signalled
    script = (
        "trap 'echo stopping; sleep 1; echo stopped; exit 7' TERM;"
        " echo started; sleep 60 & wait"
    )
    app_id = await target.run(script, replicas=2)
    await _wait_running(target, app_id, replicas=2)
    cancelled_at = anyio.current_time()
    await sched.cancel(app_id)
    desc = await _final(target, app_id)
    waited = anyio.current_time() - cancelled_at
    assert desc.state == AppState.CANCELLED, desc
    # which replicas ran their trap to the end: all of them, unless the
    # engine may cut the grace; then their logs say (read only then: a
    # backend may drop a cancelled replica's logs with it)
    graced = {
        k: target.cancel_grace_kept
        or not sched.capabilities.logs
        or "stopped\n" in await _lines(target, app_id, k=k)
        for k in range(2)
    }
    if any(graced.values()):
        # a replica took a second to stop: wait cannot have returned sooner
        assert waited >= 1.0, waited
    if not sched.capabilities.per_replica_status:
        return
    [role] = desc.roles_statuses
    lost = () if target.independent_replicas else (AppState.UNKNOWN,)
    for replica in role.replicas:
        assert replica.state in (AppState.CANCELLED, *lost), replica
        if replica.state == AppState.CANCELLED:
            if not graced[replica.id]:
                pass  # the engine cut its grace (cancel_grace_kept=False)
            elif target.stop_codes_kept:
                assert replica.exit_code == 7, replica
            else:
                assert replica.exit_code is not None, replica
            assert replica.reason == StatusReason.CANCELLED, replica


@_case("cancel")
async def _cancel_returns_promptly_while_replicas_ignore_term(
    target: ContractTarget,
) -> None:
    """``cancel`` asks and returns: the SIGTERM grace runs in the background.

    The replicas ignore SIGTERM (where they run a shell), so only the
    backend's SIGKILL at the end of its grace stops them; ``cancel`` returns
    within 2 s all the same (``wait`` is what waits).
    """
    sched = target.scheduler
    script = "echo started; sleep 60"
    if target.posix_shell:
        script = f"trap '' TERM; {script} & wait"
    app_id = await target.run(script, replicas=2)
    await _wait_running(target, app_id, replicas=2)
    started = anyio.current_time()
    await sched.cancel(app_id)
    took = anyio.current_time() - started
    assert took < 2.0, f"cancel took {took:.1f}s"
