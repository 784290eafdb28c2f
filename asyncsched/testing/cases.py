"""The contract's cases: plain async functions of a :class:`ContractTarget`.

Each :class:`Case` names the capabilities it needs: a case whose capability
a backend does not declare does not apply (it is neither run nor collected),
and one whose capability is declared checks that the backend honours it, so
a declared capability the backend does not honour fails. The cases need no
test runner; :func:`asyncsched.testing.check_scheduler` runs them all, and
:class:`asyncsched.testing.SchedulerContract` collects one pytest test each.

Scripts stay within ``echo``, ``sleep``, ``exit`` and ``>&2`` so that the
in-memory scheduler of ``asyncsched.testing`` can run them too, except in the
cases that need a real shell (``trap``), which do not apply to a target made
with ``posix_shell=False``.
"""

from __future__ import annotations

import builtins
import re
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import aclosing, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import sniffio

from asyncsched.errors import (
    AsyncschedError,
    InvalidArgumentError,
    InvalidRunConfigException,
    SchedulerClosedError,
    SpecError,
    UnknownAppException,
    UnknownReplicaError,
    UnsupportedOperationError,
    WaitTimeoutError,
)
from asyncsched.schedulers.api import Capabilities, DescribeAppResponse, Stream
from asyncsched.schedulers.shared.messages import (
    failed_replica_message,
    replica_exit_message,
)
from asyncsched.specs import (
    AppDef,
    AppState,
    StatusReason,
    is_terminal,
    parse_app_handle,
)

from .target import ContractTarget
from .waiting import wait_for_state

__all__ = ("CASES", "CLOSED_WAIT_ENDS_WITHIN", "Case", "CaseFn", "ContractViolation")

CaseFn = Callable[[ContractTarget], Awaitable[None]]

#: seconds a ``wait`` pending when its scheduler closes may take to end
#: once ``aclose`` returned
CLOSED_WAIT_ENDS_WITHIN = 5.0


class ContractViolation(AsyncschedError, AssertionError):
    """A case found behaviour the contract rules out."""


@dataclass(frozen=True)
class Case:
    """One behaviour of the contract.

    ``needs`` are the :class:`Capabilities` fields that must be declared
    (true, or non-empty) for the case to apply; ``needs_stderr`` asks for
    ``Stream.STDERR`` among ``log_streams``; ``posix_shell`` for replicas
    that run a POSIX shell (a :class:`ContractTarget` attribute).
    """

    name: str
    check: CaseFn
    needs: tuple[str, ...] = ()
    needs_stderr: bool = False
    posix_shell: bool = False
    doc: str = field(default="", compare=False)

    def applies_to(self, caps: Capabilities) -> bool:
        """Whether the declared capabilities ``caps`` make this case apply."""
        return self.missing(caps) == ""

    def missing(self, caps: Capabilities) -> str:
        """What the case needs that ``caps`` does not declare ("" if nothing)."""
        lacking = [need for need in self.needs if not getattr(caps, need)]
        if self.needs_stderr and Stream.STDERR not in caps.log_streams:
            lacking.append("log_streams with stderr")
        return ", ".join(lacking)

    def not_applicable(self, target: ContractTarget) -> str:
        """Why the case does not apply to ``target`` ("" when it does)."""
        lacking = self.missing(target.scheduler.capabilities)
        if lacking:
            return f"the scheduler does not declare {lacking}"
        if self.posix_shell and not target.posix_shell:
            return "replicas do not run a POSIX shell"
        return ""


CASES: builtins.list[Case] = []


def _case(
    *needs: str, needs_stderr: bool = False, posix_shell: bool = False
) -> Callable[[CaseFn], CaseFn]:
    def register(fn: CaseFn) -> CaseFn:
        doc = (fn.__doc__ or "").strip()
        name = fn.__name__.lstrip("_")
        CASES.append(Case(name, fn, needs, needs_stderr, posix_shell, doc))
        return fn

    return register


@contextmanager
def _raises(kind: type[BaseException], match: str = "") -> Iterator[list[Any]]:
    """Assert the block raises ``kind`` (its text matching ``match``); the
    exception is left in the yielded list."""
    caught: list[Any] = []
    try:
        yield caught
    except kind as exc:
        if match and not re.search(match, str(exc)):
            raise ContractViolation(f"{exc!r} does not match {match!r}") from exc
        caught.append(exc)
    else:
        raise ContractViolation(f"{kind.__name__} not raised")


async def _lines(
    target: ContractTarget, app_id: str, role: str = "worker", **kwargs: Any
) -> builtins.list[str]:
    lines = target.scheduler.log_iter(app_id, role, **kwargs)
    async with aclosing(lines):
        return [line async for line in lines]


async def _final(target: ContractTarget, app_id: str) -> DescribeAppResponse:
    desc = await target.scheduler.wait(app_id, timeout=target.quick_timeout)
    assert desc is not None, f"wait({app_id!r}) returned None for a submitted app"
    return desc


async def _wait_running(target: ContractTarget, app_id: str, replicas: int) -> None:
    """Wait until each replica of the app's one role runs and, where the
    backend can tail logs, has printed ``started``."""
    sched = target.scheduler
    caps = sched.capabilities
    for k in range(replicas):

        def running(desc: DescribeAppResponse, k: int = k) -> bool:
            assert not is_terminal(desc.state), desc
            if not caps.per_replica_status:
                return desc.state == AppState.RUNNING
            states = {r.id: r.state for r in desc.roles_statuses[0].replicas}
            return states.get(k) == AppState.RUNNING

        await wait_for_state(sched, app_id, running, target.quick_timeout)
        if caps.logs and caps.log_tail:
            with anyio.fail_after(target.quick_timeout):
                lines = sched.log_iter(app_id, "worker", k=k, should_tail=True)
                async with aclosing(lines):
                    async for line in lines:
                        if line == "started\n":
                            break
                    else:
                        raise ContractViolation(f"replica {k} ended before it started")


async def _cancel_if_declared(target: ContractTarget, app_id: str) -> None:
    if target.scheduler.capabilities.cancel:
        await target.scheduler.cancel(app_id)


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


# -- logs --------------------------------------------------------------------


@_case("logs")
async def _logs_arrive_in_order_with_newlines(target: ContractTarget) -> None:
    """Log lines come in order, each with its newline."""
    app_id = await target.run("echo one; echo two; echo three")
    await _final(target, app_id)
    assert await _lines(target, app_id) == ["one\n", "two\n", "three\n"]


@_case("logs", needs_stderr=True)
async def _log_regex_and_streams(target: ContractTarget) -> None:
    """stdout and stderr are told apart; ``regex`` filters lines."""
    app_id = await target.run("echo out1; echo err1 >&2; echo out2")
    await _final(target, app_id)
    assert await _lines(target, app_id, streams="stderr") == ["err1\n"]
    assert await _lines(target, app_id, streams=Stream.STDOUT) == [
        "out1\n",
        "out2\n",
    ]
    assert await _lines(target, app_id, streams="stdout", regex="2$") == ["out2\n"]


@_case("logs", "log_streams")
async def _declared_log_streams_are_served(target: ContractTarget) -> None:
    """Every declared stream can be read and holds what it names; an
    undeclared one is refused at the call."""
    sched = target.scheduler
    app_id = await target.run("echo out; echo err >&2")
    await _final(target, app_id)
    expected = {
        Stream.STDOUT: ["out\n"],
        Stream.STDERR: ["err\n"],
        Stream.COMBINED: ["out\n", "err\n"],
    }
    for stream in Stream:
        if stream in sched.capabilities.log_streams:
            got = await _lines(target, app_id, streams=stream)
            want = expected[stream]
            assert sorted(got) == sorted(want), f"{stream.value}: {got!r}"
        else:
            with _raises(ValueError, match="stream"):
                sched.log_iter(app_id, "worker", streams=stream)


@_case("logs", "log_tail")
async def _log_tail_follows_until_terminal(target: ContractTarget) -> None:
    """``should_tail=True`` (declared) follows the log until the app ends."""
    app_id = await target.run("echo first; sleep 0.5; echo second")
    with anyio.fail_after(target.quick_timeout):
        lines = await _lines(target, app_id, should_tail=True)
    assert lines == ["first\n", "second\n"]


@_case("logs", "log_since_until")
async def _declared_log_since_until_is_honoured(target: ContractTarget) -> None:
    """``since``/``until`` (declared) select lines by the time they were
    written: a line 4 s after another is cut apart by a time between them."""
    sched = target.scheduler
    app_id = await target.run("echo early; sleep 4; echo late")
    seen: datetime | None = None
    with anyio.fail_after(target.quick_timeout):
        while seen is None:
            changed = sched.changed(app_id)  # logs may change unsignalled:
            tail = sched.capabilities.log_tail  # the pause is bounded
            lines = sched.log_iter(app_id, "worker", should_tail=tail)
            async with aclosing(lines):
                async for line in lines:
                    if line == "early\n":
                        seen = datetime.now(UTC)
                        break
            if seen is None:
                with anyio.move_on_after(0.2):
                    await changed.wait()
    # a whole second after "early" was seen, and (seen within 3 s of it
    # being written) before "late": also for engines that keep seconds only
    cut = seen + timedelta(seconds=1)
    await _final(target, app_id)
    assert await _lines(target, app_id, since=cut) == ["late\n"]
    assert await _lines(target, app_id, until=cut) == ["early\n"]


@_case("logs")
async def _default_log_stream_is_the_combined_one(target: ContractTarget) -> None:
    """Without ``streams``, ``log_iter`` reads stdout and stderr together
    wherever the backend declares the combined stream (every built-in one),
    else its one declared stream."""
    sched = target.scheduler
    app_id = await target.run("echo out; echo err >&2")
    await _final(target, app_id)
    default = await _lines(target, app_id)
    declared = sched.capabilities.log_streams
    if Stream.COMBINED in declared:
        combined = await _lines(target, app_id, streams=Stream.COMBINED)
        assert default == combined, f"default {default!r}, combined {combined!r}"
        assert sorted(default) == ["err\n", "out\n"], default
    elif len(declared) == 1:
        [only] = declared
        assert default == await _lines(target, app_id, streams=only), default


@_case("logs")
async def _log_times_are_datetimes_or_epoch_seconds(target: ContractTarget) -> None:
    """``since``/``until`` take datetimes or epoch seconds; anything else is
    an InvalidArgumentError when ``log_iter`` is called. A backend that
    cannot filter by time says so at the call (UnsupportedOperationError),
    never by ignoring the bound."""
    sched = target.scheduler
    app_id = await target.run("echo timed")
    await _final(target, app_id)
    for bad in ("yesterday", True, [1.0]):
        with _raises(InvalidArgumentError, match="since"):
            sched.log_iter(app_id, "worker", since=bad)  # type: ignore[arg-type]
        with _raises(InvalidArgumentError, match="until"):
            sched.log_iter(app_id, "worker", until=bad)  # type: ignore[arg-type]
    hour_ago = time.time() - 3600
    if not sched.capabilities.log_since_until:
        with _raises(UnsupportedOperationError):
            sched.log_iter(app_id, "worker", since=hour_ago)
        return
    assert await _lines(target, app_id, since=hour_ago) == ["timed\n"]
    assert await _lines(target, app_id, since=int(hour_ago)) == ["timed\n"]
    assert await _lines(target, app_id, until=hour_ago) == []


@_case()
async def _unsupported_stream_is_value_error(target: ContractTarget) -> None:
    """An unknown stream name is a ValueError when ``log_iter`` is called."""
    with _raises(ValueError, match="stream"):
        target.scheduler.log_iter("whatever", "worker", streams="bogus")


@_case("logs")
async def _unknown_app_role_and_replica_errors_name_the_handle(
    target: ContractTarget,
) -> None:
    """Unknown role, replica and app errors name the full handle."""
    app_id = await target.run("echo hi")
    await _final(target, app_id)
    handle = target.handle(app_id)
    with _raises(UnknownReplicaError) as unknown_role:
        await _lines(target, app_id, role="nobody")
    with _raises(UnknownReplicaError) as out_of_range:
        await _lines(target, app_id, k=5)
    assert str(unknown_role[0]) == (
        f"app {handle} has no replica 0 of role 'nobody' (roles: ['worker'])"
    )
    assert str(out_of_range[0]) == (
        f"app {handle} has no replica 5 of role 'worker' (roles: ['worker'])"
    )
    missing = "no-such-app-bcdfg"
    with _raises(UnknownAppException) as unknown_app:
        await _lines(target, missing)
    assert unknown_app[0].app_handle == target.handle(missing)


@_case("logs")
async def _unknown_app_error_names_the_handle_the_user_was_given(
    target: ContractTarget,
) -> None:
    """The text of an unknown app's error holds its handle with the
    scheduler's registry name (``local_docker://...``, never the backend
    family ``docker://...``), so that it can be pasted back into the CLI."""
    sched = target.scheduler
    missing = "no-such-app-bcdfg"
    with _raises(UnknownAppException) as caught:
        await _lines(target, missing)
    handle = target.handle(missing)
    assert handle in str(caught[0]), f"{caught[0]} does not name {handle}"
    parsed = parse_app_handle(handle)
    assert (parsed.scheduler_backend, parsed.app_id) == (sched.handle_name, missing)
    if target.registry_name is not None:
        assert sched.handle_name == target.registry_name, (
            f"handles read {sched.handle_name}://, the scheduler is registered"
            f" as {target.registry_name}"
        )


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


# -- closing -----------------------------------------------------------------


@_case()
async def _closed_scheduler_refuses_work(target: ContractTarget) -> None:
    """After ``aclose`` (idempotent) every operation raises SchedulerClosedError."""
    sched = target.scheduler
    info = await sched.submit_dryrun(target.app("echo late"), target.cfg)
    await sched.aclose()
    await sched.aclose()  # idempotent
    with _raises(SchedulerClosedError):
        await sched.submit(target.app("echo late"), target.cfg)
    with _raises(SchedulerClosedError):
        await sched.submit_dryrun(target.app("echo late"), target.cfg)
    with _raises(SchedulerClosedError):
        await sched.schedule(info)
    with _raises(SchedulerClosedError):
        await sched.describe("any-app")
    with _raises(SchedulerClosedError):
        await sched.exists("any-app")
    with _raises(SchedulerClosedError):
        await sched.list()
    with _raises(SchedulerClosedError):
        await sched.wait("any-app")
    with _raises(SchedulerClosedError):
        await sched.wait("any-app", timeout=1)
    with _raises(SchedulerClosedError):
        await sched.cancel("any-app")
    with _raises(SchedulerClosedError):
        sched.log_iter("any-app", "worker")


@_case()
async def _aclose_ends_a_pending_wait(target: ContractTarget) -> None:
    """A ``wait`` pending when the scheduler closes ends promptly, with
    SchedulerClosedError (or, where the close itself stopped the app, with
    its final description, every replica stopped), and no replica process
    is left running."""
    sched = target.scheduler
    app_id = await target.run("echo started; sleep 60")
    await _wait_running(target, app_id, replicas=1)
    outcome: builtins.list[object] = []
    ended = anyio.Event()

    async def waiter() -> None:
        try:
            outcome.append(await sched.wait(app_id))
        except Exception as exc:  # noqa: BLE001 -- what the case checks
            outcome.append(exc)
        finally:
            ended.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        with anyio.move_on_after(1):  # until the wait is blocked in it
            await anyio.wait_all_tasks_blocked()
        assert not ended.is_set(), f"wait ended before aclose: {outcome}"
        await sched.aclose()
        with anyio.fail_after(CLOSED_WAIT_ENDS_WITHIN):
            await ended.wait()
    [result] = outcome
    if isinstance(result, DescribeAppResponse):
        # the close stopped the app (local replicas die with their scheduler)
        # and the wait saw it over first: the final description then, with
        # every replica stopped, never a live one
        assert is_terminal(result.state), result
        for role in result.roles_statuses:
            assert all(is_terminal(r.state) for r in role.replicas), result
    else:
        assert isinstance(result, SchedulerClosedError), (
            f"a wait pending at aclose ended with {result!r}"
        )
    await _assert_nothing_left(target)


@_case()
async def _cancelled_aclose_still_closes(target: ContractTarget) -> None:
    """Cancelling the task that runs ``aclose`` leaves the scheduler closed:
    it refuses work, none of its tasks is left, no replica process runs, and
    a second ``aclose`` returns at once."""
    sched = target.scheduler
    app_id = await target.run("echo started; sleep 60")
    await _wait_running(target, app_id, replicas=1)
    closing = anyio.Event()

    async def close() -> None:
        closing.set()
        await sched.aclose()

    async with anyio.create_task_group() as tg:
        tg.start_soon(close)
        await closing.wait()
        await anyio.lowlevel.checkpoint()  # aclose under way
        tg.cancel_scope.cancel()
    with _raises(SchedulerClosedError):
        await sched.submit(target.app("echo late"), target.cfg)
    with anyio.fail_after(1):
        await sched.aclose()  # a no-op
    await _assert_nothing_left(target)


async def _assert_nothing_left(target: ContractTarget) -> None:
    with anyio.move_on_after(1):  # tasks end at their next checkpoint
        await anyio.wait_all_tasks_blocked()
    tasks = _scheduler_tasks(target.scheduler)
    assert not tasks, f"tasks left running after aclose: {tasks}"
    if target.replica_processes is not None:
        left = await target.replica_processes()
        assert not left, f"replica processes left running after aclose: {left}"


_PACKAGE = Path(__file__).resolve().parents[1]
_HARNESS = {str(Path(__file__).resolve()), str(Path(__file__).with_name("check.py"))}


def _scheduler_tasks(sched: Any) -> builtins.list[str]:
    """Tasks of this event loop (but the current one) running code of the
    package or of the scheduler's own module."""
    own = str(Path(sys.modules[type(sched).__module__].__file__ or "").resolve())

    def ours(filename: str) -> bool:
        path = str(Path(filename).resolve())
        return path == own or (path.startswith(str(_PACKAGE)) and path not in _HARNESS)

    found = []
    for name, coro in _other_tasks():
        files = _await_chain(coro)
        if any(ours(f) for f in files):
            found.append(name)
    return found


def _await_chain(coro: Any) -> Iterator[str]:
    while coro is not None:
        code = getattr(coro, "cr_code", None) or getattr(coro, "ag_code", None)
        code = code or getattr(coro, "gi_code", None)
        if code is not None:
            yield code.co_filename
        coro = (
            getattr(coro, "cr_await", None)
            or getattr(coro, "ag_await", None)
            or getattr(coro, "gi_yieldfrom", None)
        )


def _other_tasks() -> builtins.list[tuple[str, Any]]:
    if sniffio.current_async_library() == "trio":
        import trio

        current = trio.lowlevel.current_task()
        root = trio.lowlevel.current_root_task()
        stack = [] if root is None else [root]
        found = []
        while stack:
            task = stack.pop()
            if task is not current:
                found.append((task.name, task.coro))
            stack += [t for n in task.child_nurseries for t in n.child_tasks]
        return found
    import asyncio

    me = asyncio.current_task()
    return [(t.get_name(), t.get_coro()) for t in asyncio.all_tasks() if t is not me]
