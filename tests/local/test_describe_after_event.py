"""What ``describe`` says is never older than an event already delivered.

An exit that ends its app writes the app's final record and journal lines in
the worker-thread hop that reads its facts, before the loop takes the new
state: a reader of the same process could see the app's end while
``describe`` still said RUNNING (the web example's status stream then waited
for a change that had already come).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState

from .conftest import app_of, sh_role

#: on asyncio and trio
pytestmark = pytest.mark.anyio

#: apps that end together (their exits share hops: the window is widest)
APPS = 20


async def test_describe_after_an_apps_end_event_says_it_ended(
    sched: LocalScheduler, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    script = f'echo started; while [ ! -e "{go}" ]; do sleep 0.02; done'
    app_ids = [await sched.submit(app_of(sh_role(script))) for _ in range(APPS)]
    described: dict[str, list[tuple[AppState, AppState]]] = {a: [] for a in app_ids}
    current = 0

    async def follow(app_id: str) -> None:
        nonlocal current
        async with sched.events([app_id]) as stream:
            async for event in stream:
                status = await sched.describe(app_id)
                assert status is not None
                described[app_id].append((event.state, status.state))
                current += event.kind.value == "current"
                if current == APPS:
                    go.touch()  # every reader had its first event
                if event.kind.value == "app" and event.terminal:
                    return

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for app_id in app_ids:
                tg.start_soon(follow, app_id)
    for app_id, seen in described.items():
        # each app's end event was followed by a describe saying so
        assert seen[-1] == (AppState.SUCCEEDED, AppState.SUCCEEDED), (app_id, seen)
        # and no describe was older than its event
        assert all(s is not AppState.RUNNING or e is AppState.RUNNING for e, s in seen)
