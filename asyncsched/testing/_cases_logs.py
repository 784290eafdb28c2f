"""The contract's cases about logs: order, streams, tail, since/until, errors."""

from __future__ import annotations

import time
from contextlib import aclosing
from datetime import UTC, datetime, timedelta

import anyio
import anyio.lowlevel

from asyncsched.errors import (
    InvalidArgumentError,
    UnknownAppException,
    UnknownReplicaError,
    UnsupportedOperationError,
)
from asyncsched.schedulers.api import Stream
from asyncsched.specs import (
    parse_app_handle,
)

from ._case_base import (
    _case,
    _final,
    _lines,
    _raises,
)
from .target import ContractTarget

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
    written: a line 4 steps (``log_time_step``, 1 s by default) after another
    is cut apart by a time between them."""
    sched = target.scheduler
    step = target.log_time_step
    app_id = await target.run(f"echo early; sleep {4 * step:g}; echo late")
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
    # a whole step after "early" was seen, and (seen within 3 steps of it
    # being written) before "late": also for engines that keep seconds only
    cut = seen + timedelta(seconds=step)
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
