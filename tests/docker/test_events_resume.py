"""Docker events resume from a cursor in a new process, from the daemon's own stream.

A reader process (``tests.events.reader``) saves each event's cursor; it is
SIGKILLed, apps change while no reader runs, and a new reader process
started from the saved cursor gets exactly the changes after it.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import aiodocker
import anyio
import pytest

from asyncsched.errors import InvalidArgumentError, SchedulerUnavailableError
from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.specs import AppState
from tests.events.chaos import ChaosReader

from .conftest import NETWORK, SESSION, Engine
from .helpers import sh_app

pytestmark = pytest.mark.docker


def reader_for(engine: Engine, workdir: Path) -> ChaosReader:
    """A reader process following this test session's apps on ``engine``."""
    return ChaosReader(
        "local_docker", SESSION, workdir, params={"docker_host": engine.host}
    )


async def delivered(
    reader: ChaosReader, want: dict[str, str], *, since: int = 0, timeout: float = 60
) -> list[dict[str, Any]]:
    """Wait until the reader wrote, after its first ``since`` events, an event
    putting each app of ``want`` in that state; wait for its cursor to be saved."""
    with anyio.fail_after(timeout):
        while True:
            events = reader.events()[since:]
            if (
                all(
                    any(e["app_id"] == a and e["state"] == s for e in events)
                    for a, s in want.items()
                )
                and reader.cursor_file.exists()
                and reader.cursor_file.read_text() == events[-1]["cursor"]
            ):
                return events
            await anyio.sleep(0.1)


async def test_a_new_reader_process_resumes_with_exactly_the_changes_made_while_none_ran(
    sched: DockerScheduler, swept: Engine, tmp_path: Path
) -> None:
    reader = reader_for(swept, tmp_path)
    await reader.start()
    try:
        done = await sched.submit(sh_app("exit 0", name="done"))
        removed = await sched.submit(sh_app("exit 0", name="removed"))
        running = await sched.submit(sh_app("sleep 600", name="running"))
        first = await delivered(
            reader,
            {done: "SUCCEEDED", removed: "SUCCEEDED", running: "RUNNING"},
            timeout=90,
        )
        await reader.stop(signal.SIGKILL)
        # while no reader runs: one app is cancelled, one removed, a new one fails
        await sched.cancel(running)
        await sched.delete(removed)
        failing = await sched.submit(sh_app("exit 3", name="failing"))
        for app_id in (running, failing):
            with anyio.fail_after(60):
                await sched.wait(app_id)
        await reader.start()
        second = await delivered(
            reader, {running: "CANCELLED", failing: "FAILED"}, since=len(first)
        )
    finally:
        await reader.stop()
    assert {e["pid"] for e in second} != {e["pid"] for e in first}
    kinds = [e["kind"] for e in second]
    assert "resync" not in kinds, second
    assert "current" not in kinds, second
    # nothing from before the cursor comes again
    assert [e for e in second if e["app_id"] == done] == []
    # the cancel decides the app at once (an app event may come first, its
    # replica still in its grace), then the replica stops and the app with it
    running_kinds = [e["kind"] for e in second if e["app_id"] == running]
    assert running_kinds[-2:] == ["replica", "app"], second
    assert set(running_kinds) == {"replica", "app"}, second
    cancelled = next(
        e for e in second if e["app_id"] == running and e["kind"] == "replica"
    )["replica"]
    assert cancelled["state"] == "CANCELLED"
    assert [e["kind"] for e in second if e["app_id"] == removed] == ["forgotten"]
    failed = [e for e in second if e["app_id"] == failing]
    assert failed[0]["kind"] == "submitted"
    assert failed[-1]["state"] == "FAILED"
    assert any(
        r.get("exit_code") == 3 for e in failed for r in e.get("replicas", [])
    ), failed


async def test_a_cursor_the_daemon_no_longer_holds_gives_resync_then_every_app(
    sched: DockerScheduler, swept: Engine, raw_docker: aiodocker.Docker
) -> None:
    app_id = await sched.submit(sh_app("exit 0", name="old"))
    with anyio.fail_after(60):
        await sched.wait(app_id)
    async with sched.events() as stream:
        with anyio.fail_after(30):
            current = await anext(stream)
    assert (current.kind, current.app_id) == ("current", app_id)
    # the daemon keeps its last 256 events: push the cursor's out with tags
    # (made, then removed, a few at a time: one by one they only queue)
    image = await raw_docker.images.inspect("asyncsched-test-busybox:latest")
    repo = f"asyncsched-test-evict-{os.getpid()}"
    slots = anyio.CapacityLimiter(8)

    async def tag(i: int) -> None:
        async with slots:
            await raw_docker.images.tag(image["Id"], repo, tag=str(i))

    async def untag(i: int) -> None:
        async with slots:
            try:
                await raw_docker.images.delete(f"{repo}:{i}", force=True)
            except aiodocker.DockerError as exc:
                if exc.status != 404:  # (404: a tag never made)
                    raise

    try:
        async with anyio.create_task_group() as tg:
            for i in range(300):
                tg.start_soon(tag, i)
    finally:
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for i in range(300):
                    tg.start_soon(untag, i)
    async with sched.events(since=current.cursor) as stream:
        with anyio.fail_after(30):
            resync = await anext(stream)
            again = await anext(stream)
    assert resync.kind == "resync"
    assert (again.kind, again.app_id, again.state) == (
        "current",
        app_id,
        AppState.SUCCEEDED,
    )


async def test_a_cursor_of_another_backend_is_refused_at_the_call(
    sched: DockerScheduler,
) -> None:
    with pytest.raises(InvalidArgumentError, match="not 'docker'"):
        sched.events(since="local.1.e30")


async def test_events_from_an_unreachable_daemon_raise_unavailable(
    tmp_path: Path,
) -> None:
    host = f"unix://{tmp_path}/no-daemon.sock"
    async with DockerScheduler("nobody", docker_host=host) as sched:
        with anyio.fail_after(30), pytest.raises(SchedulerUnavailableError):
            async with sched.events() as stream:
                await anext(stream)


async def test_a_following_reader_ends_when_its_scheduler_closes(
    swept: Engine,
) -> None:
    sched = DockerScheduler(
        SESSION, docker_host=swept.host, network=NETWORK, stop_timeout=1
    )
    await sched.submit(sh_app("sleep 600", name="idle"))
    first = anyio.Event()

    async def close_once_following() -> None:
        await first.wait()  # the reader now waits for the daemon's next event
        await sched.aclose()

    got = []
    async with anyio.create_task_group() as tg, sched.events() as stream:
        tg.start_soon(close_once_following)
        with anyio.fail_after(60):
            async for event in stream:
                got.append(event.kind)
                first.set()
    assert got == ["current"]
