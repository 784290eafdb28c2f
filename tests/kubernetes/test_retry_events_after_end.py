"""A retried Volcano app's events end with its end, whatever order the Job's
and the pods' watches deliver in.

The Job's status (Restarting, a new version, then Failed once the retry
failed too) and the pods travel on two watches; under load, or when a
resumed reader replays both, either can run ahead of the other:

* the pods' watch behind (here): the Job reads Failed while the pods cache
  still shows the first attempt's pod (running, then failed, then its
  replacement): the end is told once the retry's end shows, not before;
* the Jobs' watch behind (``test_retry_pending.py``): a pod failed while the
  Job has no status yet is a failure Volcano will retry, not the app's end.
"""

from __future__ import annotations

import anyio
import pytest

from asyncsched.schedulers.kit import AppEvent
from asyncsched.specs import AppState, is_terminal

from .fakeapi.env import KubeEnv
from .helpers import (
    cfg_for,
    deliver_lagging_watches,
    let_sleeps_end,
    make_app,
    scheduler,
    volcano_phase_reached,
)

pytestmark = pytest.mark.usefixtures("kube_controller")

#: seconds the lagging watch delivers each change late
_LAG = 5.0


async def _move_time(env: KubeEnv, app_id: str) -> None:
    """End both attempts' ``sleep 2`` while the lagging watch holds back,
    then let it deliver, one lag at a time (until cancelled)."""
    await let_sleeps_end(env, 1, 2)  # the first attempt exits 4
    await let_sleeps_end(env, 1, 2)  # the retry exits 4 too
    await volcano_phase_reached(env, app_id, {"Failed"})
    await deliver_lagging_watches(env, _LAG)


@pytest.mark.fake_api
@pytest.mark.manual_clock
async def test_no_change_of_a_retried_app_is_told_after_its_end(
    kube_env: KubeEnv,
) -> None:
    assert kube_env.server is not None
    kube_env.server.faults.delay_watch("pods", _LAG)
    seen: list[AppEvent] = []
    told = anyio.Event()  # the app's end and the retry's exit code were told

    async with scheduler(kube_env) as sched, sched.events() as stream:

        async def follow() -> None:
            async for event in stream:
                seen.append(event)
                ended = any(
                    e.replica is None and e.state == AppState.FAILED for e in seen
                )
                if ended and any(
                    e.replica is not None and e.replica.exit_code == 4 for e in seen
                ):
                    told.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(follow)
            app_id = await sched.submit(
                make_app("sleep 2; exit 4", name="rt", retries=1),
                cfg_for(kube_env, "volcano"),
            )
            tg.start_soon(_move_time, kube_env, app_id)
            final = await sched.wait(app_id, timeout=180)
            with anyio.fail_after(60):
                await told.wait()
            tg.cancel_scope.cancel()
    assert final is not None
    assert (final.state, final.num_restarts) == (AppState.FAILED, 1)
    mine = [e for e in seen if e.app_id == app_id]
    end = next(i for i, e in enumerate(mine) if is_terminal(e.state))
    story = [
        (e.kind.name, e.state.name, e.replica and e.replica.state.name) for e in mine
    ]
    # from the end on: the app stays FAILED, and a replica is told only
    # once it ended (the retry, exit code 4)
    for e in mine[end:]:
        assert e.state == AppState.FAILED, story
        if e.replica is not None:
            assert (e.replica.state, e.replica.exit_code) == (AppState.FAILED, 4), story
