"""Events from the fallback source (re-list + diff), on the in-memory backend."""

from __future__ import annotations

import contextlib

import anyio
import pytest

from asyncsched.errors import InvalidArgumentError
from asyncsched.schedulers.events import AppEvent, EventKind
from asyncsched.schedulers.shared.cursor import decode_cursor, encode_cursor
from asyncsched.schedulers.shared.event_history import EventHistory
from asyncsched.schedulers.shared.event_stream import EventStream
from asyncsched.specs import AppDef, AppState, Resource, Role
from asyncsched.testing.inmemory import InMemoryScheduler

pytestmark = pytest.mark.anyio

RES = Resource(cpu=1, gpu=0, memMB=16)


def _app(script: str, replicas: int = 1) -> AppDef:
    role = Role(
        "r",
        image="",
        entrypoint="sh",
        args=["-c", script],
        num_replicas=replicas,
        resource=RES,
    )
    return AppDef("ev", roles=[role])


async def _until_terminal(stream: EventStream, app_id: str) -> list[AppEvent]:
    got: list[AppEvent] = []
    async for event in stream:
        got.append(event)
        if event.app_id == app_id and event.kind is EventKind.APP and event.terminal:
            return got
    return got


async def test_a_reader_sees_submit_replica_and_app_changes_in_order() -> None:
    async with InMemoryScheduler("ev") as sched:
        before = await sched.submit(_app("exit 0"), {})
        await sched.wait(before, timeout=10)
        got: list[AppEvent] = []
        app_id = ""
        async with (
            contextlib.AsyncExitStack() as stack,
            anyio.create_task_group() as tg,
        ):
            stream = await stack.enter_async_context(sched.events())
            first = await stream.__anext__()  # the reader is live from here
            assert (first.kind, first.app_id) == (EventKind.CURRENT, before)

            async def read() -> None:
                got.extend(await _until_terminal(stream, app_id))

            app_id = await sched.submit(_app("sleep 0.1; exit 3", 2), {})
            tg.start_soon(read)
        kinds = [e.kind for e in got]
        assert kinds[0] is EventKind.SUBMITTED
        assert kinds[-1] is EventKind.APP
        assert got[-1].state is AppState.FAILED
        failed = [e for e in got if e.kind is EventKind.REPLICA and e.replica]
        assert any(e.replica.exit_code == 3 for e in failed if e.replica)
        assert all(e.handle.endswith(f"/{app_id}") for e in got)


async def test_resuming_after_a_cursor_delivers_exactly_the_later_changes() -> None:
    async with InMemoryScheduler("ev") as sched:
        app_id = await sched.submit(_app("sleep 0.1; exit 0"), {})
        async with sched.events() as stream:
            first = await _until_terminal(stream, app_id)
        async with sched.events(since=first[0].cursor) as stream:
            again = await _until_terminal(stream, app_id)
        assert [e.cursor for e in again] == [e.cursor for e in first[1:]]


async def test_a_cursor_of_another_scheduler_instance_yields_resync_then_current() -> (
    None
):
    async with InMemoryScheduler("ev") as one:
        app_id = await one.submit(_app("exit 0"), {})
        await one.wait(app_id, timeout=10)
        cursor = (await _take(one.events(), 1))[0].cursor
    async with InMemoryScheduler("ev") as two:
        other = await two.submit(_app("exit 0"), {})
        await two.wait(other, timeout=10)
        events = await _take(two.events(since=cursor), 2)
        assert events[0].kind is EventKind.RESYNC
        assert (events[1].kind, events[1].app_id) == (EventKind.CURRENT, other)
        assert events[1].state is AppState.SUCCEEDED


async def test_app_ids_keeps_only_those_apps() -> None:
    async with InMemoryScheduler("ev") as sched:
        keep = await sched.submit(_app("exit 0"), {})
        drop = await sched.submit(_app("exit 0"), {})
        await sched.wait(keep, timeout=10)
        await sched.wait(drop, timeout=10)
        events = await _take(sched.events([keep]), 1)
        assert {e.app_id for e in events} == {keep}


async def test_bad_arguments_fail_at_the_call() -> None:
    async with InMemoryScheduler("ev") as sched:
        with pytest.raises(InvalidArgumentError):
            sched.events("app-1")
        with pytest.raises(InvalidArgumentError):
            sched.events(since="not a cursor")
        with pytest.raises(InvalidArgumentError, match="from 'docker'"):
            sched.events(since=encode_cursor("docker", {"x": 1}))


async def test_the_stream_ends_when_the_scheduler_closes() -> None:
    sched = InMemoryScheduler("ev")
    async with sched, contextlib.AsyncExitStack() as stack:
        with anyio.fail_after(10):
            stream = await stack.enter_async_context(sched.events())
            async with anyio.create_task_group() as tg:

                async def read() -> None:
                    async for _ in stream:
                        pass

                tg.start_soon(read)
                await anyio.sleep(0.05)
                await sched.aclose()


def test_cursors_round_trip_and_refuse_newer_formats() -> None:
    cursor = encode_cursor("local", {"j": "x", "seq": 3})
    assert decode_cursor(cursor, "local") == {"j": "x", "seq": 3}
    with pytest.raises(InvalidArgumentError, match="format 2"):
        decode_cursor(cursor.replace("local.1.", "local.2."), "local")


def test_a_history_refuses_trimmed_positions() -> None:
    history = EventHistory("demo", capacity=2)
    first = history.append(AppEvent("", EventKind.SUBMITTED, "a"))
    history.append(AppEvent("", EventKind.APP, "a"))
    history.append(AppEvent("", EventKind.APP, "a"))
    history.append(AppEvent("", EventKind.APP, "a"))
    assert history.after(first.cursor) is None


def test_events_round_trip_through_json() -> None:
    from asyncsched.schedulers.snapshot import ReplicaSnapshot

    rep = ReplicaSnapshot("r", 1, AppState.FAILED, exit_code=0)
    event = AppEvent(
        "c", EventKind.REPLICA, "a", AppState.FAILED, 2.0, "r", 1, rep, replicas=(rep,)
    )
    assert AppEvent.from_json(event.to_json()) == event


async def _take(stream: EventStream, n: int) -> list[AppEvent]:
    got: list[AppEvent] = []
    async with stream:
        async for event in stream:
            got.append(event)
            if len(got) >= n:
                break
    return got
