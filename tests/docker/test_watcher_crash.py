"""A crashed Docker events watcher is replaced: waits resync instead of hanging."""

from __future__ import annotations

import logging

import anyio
import pytest

from asyncsched.schedulers.docker._events import EventWatcher
from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.specs import AppState

from .helpers import sh_app

pytestmark = pytest.mark.docker


async def test_wait_survives_a_crashed_events_watcher(
    sched: DockerScheduler,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    apply, mark_unsynced = EventWatcher._apply, EventWatcher._mark_unsynced
    crashed: list[str] = []

    async def bad_apply(self: EventWatcher, event: dict[str, object]) -> None:
        if not crashed:
            crashed.append("apply")
            raise RuntimeError("a malformed event")
        await apply(self, event)

    def bad_mark_unsynced(self: EventWatcher) -> None:
        if crashed == ["apply"]:  # the recovery itself fails: the task dies
            crashed.append("recovery")
            raise RuntimeError("watcher exploded")
        mark_unsynced(self)

    monkeypatch.setattr(EventWatcher, "_apply", bad_apply)
    monkeypatch.setattr(EventWatcher, "_mark_unsynced", bad_mark_unsynced)
    caplog.set_level(logging.ERROR)
    app_id = await sched.submit(sh_app("sleep 1"))
    with anyio.fail_after(30):
        desc = await sched.wait(app_id)
    assert crashed == ["apply", "recovery"]
    assert desc is not None
    assert desc.state == AppState.SUCCEEDED
    assert any("watcher exploded" in str(r.exc_info) for r in caplog.records)
    # the replacement watcher keeps the index current for the next app
    again = await sched.submit(sh_app("exit 3"))
    with anyio.fail_after(30):
        desc = await sched.wait(again)
    assert desc is not None
    assert desc.state == AppState.FAILED
