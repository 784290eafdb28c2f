"""A Docker reader that stops inside the CURRENT burst resumes without a gap."""

from __future__ import annotations

import anyio
import pytest

from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.specs import AppState
from tests.events.burst import check_resume_inside_burst

from .conftest import Engine
from .helpers import sh_app, submit_all

pytestmark = pytest.mark.docker


async def test_resuming_from_a_current_event_but_the_last_sends_every_app_again(
    sched: DockerScheduler, swept: Engine
) -> None:
    codes = (0, 3, 0)
    ids = await submit_all(sched, [sh_app(f"exit {c}", name="burst") for c in codes])
    with anyio.fail_after(60):
        for app_id in ids:
            await sched.wait(app_id)
    states = {
        a: AppState.SUCCEEDED if c == 0 else AppState.FAILED
        for a, c in zip(ids, codes, strict=True)
    }

    async def submit() -> str:
        return await sched.submit(sh_app("exit 0", name="later"))

    await check_resume_inside_burst(sched, states, submit, k=2)
