"""A local reader that stops inside the CURRENT burst resumes without a gap."""

from __future__ import annotations

import anyio
import pytest

from asyncsched.schedulers.kit import AppEvent, EventKind, encode_cursor
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState

from ..events.burst import check_resume_inside_burst
from .conftest import app_of, sh_role

pytestmark = pytest.mark.anyio


async def _finished(sched: LocalScheduler) -> dict[str, AppState]:
    codes = (0, 3, 0, 5)
    ids = [await sched.submit(app_of(sh_role(f"exit {c}")), {}) for c in codes]
    for app_id in ids:
        await sched.wait(app_id, timeout=30)
    return {
        a: AppState.SUCCEEDED if c == 0 else AppState.FAILED
        for a, c in zip(ids, codes, strict=True)
    }


@pytest.mark.parametrize("k", [1, 3])
async def test_resuming_from_a_current_event_but_the_last_sends_every_app_again(
    sched: LocalScheduler, k: int
) -> None:
    states = await _finished(sched)

    async def submit() -> str:
        return await sched.submit(app_of(sh_role("exit 0")), {})

    await check_resume_inside_burst(sched, states, submit, k=k)


async def test_resuming_inside_the_current_burst_after_resync_resyncs_again(
    sched: LocalScheduler,
) -> None:
    states = await _finished(sched)
    foreign = encode_cursor("local", {"j": "another-journal", "s": 1})
    with anyio.fail_after(30):
        async with sched.events(since=foreign) as stream:
            resync = await anext(stream)
            current = await anext(stream)
    assert (resync.kind, current.kind) == (EventKind.RESYNC, EventKind.CURRENT)
    got: list[AppEvent] = []
    with anyio.fail_after(30):
        async with sched.events(since=current.cursor) as stream:
            async for event in stream:
                got.append(event)
                if len(got) == 1 + len(states):
                    break
    assert got[0].kind is EventKind.RESYNC
    assert {e.app_id: e.state for e in got[1:] if e.kind is EventKind.CURRENT} == (
        states
    )
