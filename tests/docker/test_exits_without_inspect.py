"""An exit that no restart policy can undo is read from the ``die`` event alone.

Both the scheduler's index (``wait``/``describe``) and an ``events()`` reader
take the exit code from the event when the container's restart policy (its
``asyncsched.io/max-retries`` label) cannot restart it: no inspect, so no
daemon round-trip between the exit and the terminal state.
"""

from __future__ import annotations

import re

import anyio
import pytest

from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.specs import AppState

from .conftest import NETWORK, SESSION, Engine
from .helpers import counting_client, sh_app, submit_all

pytestmark = pytest.mark.docker

_INSPECT = re.compile(r"^GET (/v[0-9.]+)?/containers/[0-9a-f]{12,}/json$")


async def test_exits_without_a_restart_policy_cost_no_inspect(
    swept: Engine,
) -> None:
    async with (
        counting_client(swept.host) as (client, counter),
        DockerScheduler(SESSION, client=client, network=NETWORK) as sched,
        counting_client(swept.host) as (reader_client, reader_counter),
        DockerScheduler(SESSION, client=reader_client, network=NETWORK) as reader,
    ):
        terminal: dict[str, AppState] = {}
        ids: list[str] = []
        ended = {"listed": anyio.Event(), "all": anyio.Event()}
        # an app that ended before the reader starts: its CURRENT event comes
        # after the reader's listing, and no event of it is still to come
        # (an event between the stream's start and the listing is applied
        # again to the listed container, and may need an inspect)
        before = await sched.submit(sh_app("exit 0", name="before"))
        await sched.wait(before, timeout=60)

        async def follow() -> None:
            async with reader.events() as stream:
                async for event in stream:
                    if event.app_id and event.terminal:
                        terminal[event.app_id] = event.state
                        if event.app_id == before:
                            ended["listed"].set()
                        if ids and set(ids) <= set(terminal):
                            ended["all"].set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(follow)
            with anyio.fail_after(60):
                await ended["listed"].wait()
            counter.paths.clear()
            reader_counter.paths.clear()
            ids.extend(
                await submit_all(
                    sched, [sh_app(f"sleep 0.2; exit {c}") for c in (0, 3, 0, 5)]
                )
            )
            states = [(await sched.wait(a, timeout=60)) for a in ids]
            with anyio.fail_after(60):
                if not set(ids) <= set(terminal):
                    await ended["all"].wait()
            tg.cancel_scope.cancel()
    assert [s.state if s else None for s in states] == [
        AppState.SUCCEEDED,
        AppState.FAILED,
        AppState.SUCCEEDED,
        AppState.FAILED,
    ]
    assert [terminal[a] for a in ids] == [s.state for s in states if s]
    assert [p for p in counter.paths if _INSPECT.match(p)] == []
    assert [p for p in reader_counter.paths if _INSPECT.match(p)] == []
