"""Runner.events: several schedulers' events, runner handles, one resumable cursor."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from asyncsched import AppEvent, EventKind
from asyncsched.errors import (
    InvalidArgumentError,
    MalformedAppHandleException,
    UnknownSchedulerException,
)
from asyncsched.runner import Runner
from asyncsched.runner._stream import RunnerEventStream
from asyncsched.schedulers.kit import decode_cursor, encode_cursor
from asyncsched.specs import AppState, parse_app_handle
from asyncsched.testing import create_scheduler
from tests.runner.helpers import sh_app

pytestmark = pytest.mark.anyio


def two_runner(name: str = "test") -> Runner:
    return Runner(name, {"a": create_scheduler, "b": create_scheduler})


async def read_until_final(
    stream: RunnerEventStream, handles: set[str], timeout: float = 20
) -> list[AppEvent]:
    """Events of ``stream`` until every app of ``handles`` was seen terminal
    (at the app's own event: its replica's comes just before it)."""
    seen: list[AppEvent] = []
    waiting = set(handles)
    with anyio.fail_after(timeout):
        async for event in stream:
            seen.append(event)
            if event.terminal and event.kind is not EventKind.REPLICA:
                waiting.discard(event.handle)
            if not waiting:
                break
    return seen


async def test_events_of_two_schedulers_carry_runner_handles_and_one_cursor() -> None:
    async with two_runner() as runner:
        on_a = await runner.run(sh_app("exit 0"), "a")
        on_b = await runner.run(sh_app("exit 4"), "b")
        async with runner.events(["a", "b"]) as stream:
            seen = await read_until_final(stream, {on_a, on_b})
    assert {e.handle for e in seen} == {on_a, on_b}
    assert on_a.startswith("a://test/")
    assert on_b.startswith("b://test/")
    last = {e.handle: e for e in seen}
    assert last[on_a].state is AppState.SUCCEEDED
    assert last[on_b].state is AppState.FAILED
    position = decode_cursor(seen[-1].cursor, "runner")
    assert set(position) == {"a", "b"}


async def test_resuming_from_the_cursor_resumes_every_scheduler() -> None:
    async with two_runner() as runner:
        first = await runner.run(sh_app("exit 0"), "a")
        async with runner.events() as stream:
            seen = await read_until_final(stream, {first})
        saved = seen[-1].cursor
        # changes while nobody reads, on both schedulers (b opened only now)
        later_a = await runner.run(sh_app("exit 0"), "a")
        later_b = await runner.run(sh_app("exit 2"), "b")
        await runner.wait_all([later_a, later_b], timeout=20)
        async with runner.events(since=saved) as stream:
            resumed = await read_until_final(stream, {later_a, later_b})
    assert first not in {e.handle for e in resumed}  # nothing before the cursor
    assert EventKind.RESYNC not in {e.kind for e in resumed}
    kinds = {(e.handle, e.kind) for e in resumed}
    assert (later_a, EventKind.SUBMITTED) in kinds
    # b was not in the cursor: its apps start with their current state
    assert {e.kind for e in resumed if e.handle == later_b} == {EventKind.CURRENT}


async def test_a_handle_selects_one_app() -> None:
    async with two_runner() as runner:
        mine = await runner.run(sh_app("sleep 0.2"), "a")
        other = await runner.run(sh_app("sleep 0.2"), "a")
        async with runner.events([mine]) as stream:
            seen = await read_until_final(stream, {mine})
    assert {e.handle for e in seen} == {mine}
    assert other not in {e.handle for e in seen}


async def test_a_scheduler_opened_after_the_stream_started_is_followed() -> None:
    async with two_runner() as runner:
        async with runner.events() as stream:
            handle = await runner.run(sh_app("exit 0"), "b")  # opens b
            seen = await read_until_final(stream, {handle})
    assert seen[-1].handle == handle


async def test_a_cursor_of_another_runner_instance_gives_resync_then_current() -> None:
    async with two_runner() as runner:
        handle = await runner.run(sh_app("exit 0"), "a")
        async with runner.events(["a"]) as stream:
            saved = (await read_until_final(stream, {handle}))[-1].cursor
    async with two_runner() as again:  # a new in-memory scheduler: history gone
        fresh = await again.run(sh_app("exit 0"), "a")
        async with again.events(since=saved) as stream:
            first = await stream.__anext__()
            rest = await read_until_final(stream, {fresh})
    assert first.kind is EventKind.RESYNC
    assert first.handle == "a://test/"
    assert rest[0].kind is EventKind.CURRENT


async def test_bad_arguments_are_refused_at_the_call() -> None:
    async with two_runner() as runner:
        with pytest.raises(InvalidArgumentError, match="malformed"):
            runner.events(since="runner.1.%%%")
        with pytest.raises(InvalidArgumentError, match="longer than 16384"):
            runner.events(since="runner.1." + "A" * 16_384)
        with pytest.raises(InvalidArgumentError, match="not 'runner'"):
            runner.events(since=encode_cursor("local", {"seq": 1}))
        with pytest.raises(InvalidArgumentError, match="'c'"):
            runner.events(since=encode_cursor("runner", {"c": "x"}))
        with pytest.raises(InvalidArgumentError, match="string"):
            runner.events("a")
        with pytest.raises(UnknownSchedulerException):
            runner.events(["nope"])
        with pytest.raises(MalformedAppHandleException):
            runner.events(["a://s/"])


async def test_the_stream_ends_when_the_runner_closes() -> None:
    runner = two_runner()
    async with runner:
        await runner.run(sh_app("sleep 30"), "a")
        stream = runner.events()
        first = await stream.__anext__()
        assert first.kind is EventKind.CURRENT

        async def close_soon() -> None:
            await runner.aclose()

        async with anyio.create_task_group() as tg:
            tg.start_soon(close_soon)
            with anyio.fail_after(20):
                rest = [e async for e in stream]
    assert all(e.kind is not EventKind.RESYNC for e in rest)


# -- watch as a view over events ----------------------------------------------


@pytest.fixture
async def local_runner(tmp_path: Path) -> AsyncIterator[Runner]:
    params = {"state_dir": str(tmp_path / "state")}
    async with Runner("watch", scheduler_params=params) as runner:
        yield runner


async def test_watch_shows_a_replica_restarted_under_max_retries(
    local_runner: Runner, tmp_path: Path
) -> None:
    marker = tmp_path / "failed-once"
    # the first attempt fails after 2 s, the retry runs 0.6 s and succeeds
    app = sh_app(
        f"if [ -e {marker} ]; then sleep 0.6; exit 0; fi; sleep 2; touch {marker}; exit 1"
    )
    app.roles[0].max_retries = 1
    handle = await local_runner.run(
        app, "local_cwd", {"log_dir": str(tmp_path / "logs")}
    )
    reports = []
    with anyio.fail_after(60):
        async for _, status in local_runner.watch([handle], poll_interval=30):
            assert status is not None
            reports.append(status)
    assert reports[-1].state is AppState.SUCCEEDED
    # the restart shows while the app still runs, not only in the final report
    restarted = [
        s
        for s in reports
        if not s.is_terminal()
        and (
            s.num_restarts >= 1
            or any(r.num_restarts >= 1 for role in s.roles for r in role.replicas)
        )
    ]
    assert restarted, [(s.state, s.num_restarts) for s in reports]


async def test_watch_maps_handles_of_another_session_spelling(
    local_runner: Runner,
) -> None:
    unknown = "local_cwd://watch/never-existed"
    seen = [s async for _, s in local_runner.watch([unknown])]
    assert seen == [None]
    assert parse_app_handle(unknown).app_id == "never-existed"


async def test_resuming_inside_the_current_events_gives_every_app_of_every_scheduler() -> (
    None
):
    async with two_runner() as runner:
        handles = {
            await runner.run(sh_app(f"exit {code}"), name)
            for name in ("a", "b")
            for code in (0, 3)
        }
        for handle in handles:
            await runner.wait(handle)
        with anyio.fail_after(20):
            async with runner.events(["a", "b"]) as stream:
                first = await anext(stream)
        assert first.kind is EventKind.CURRENT
        with anyio.fail_after(20):
            async with runner.events(["a", "b"], since=first.cursor) as stream:
                current: dict[str, AppState] = {}
                async for event in stream:
                    if event.kind is EventKind.CURRENT:
                        current[event.handle] = event.state
                    if set(current) == handles:
                        break
    assert sorted(current.values()) == sorted([AppState.SUCCEEDED, AppState.FAILED] * 2)
