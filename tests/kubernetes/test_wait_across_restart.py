"""A ``wait`` pending across an API server restart returns the app's end.

The scheduler's caches watch the namespace while ``wait`` waits for a change
signal. Here the server restarts (its open watches end, its new watch cache
forgets the versions the caches hold) while the app ends, and the end comes:

* while the server is down (every request refused, 503), the app's pods
  failing and, with a retry, restarted and failing again meanwhile;
* right after the restart, while every re-list is refused (500): the
  caches are stale and only reads by GET can see the end;
* right after the restart, while the server takes the caches' watches and
  holds them unanswered (a server still starting up): nothing tells the
  caches they miss changes until the watches are given up (here after
  ``watch_answer_timeout``, 3 s instead of the default 30 s);
* while every watch answers an ERROR event with a 410 Status: only the
  re-lists can see it.

Each ends in ``wait`` returning FAILED with the replica's exit code and the
retry counted, and ``describe`` agreeing, soon after the server is back.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio
import pytest

from asyncsched.schedulers.api import DescribeAppResponse
from asyncsched.specs import AppDef, AppState, Resource, Role

from .fakeapi import FakeKubeServer
from .fakeapi.controller import KUBELET_SLEEP
from .fakeapi.env import KubeEnv
from .helpers import IMAGE, VOLCANO_JOBS, cfg_for, scheduler

pytestmark = [
    pytest.mark.usefixtures("kube_controller"),
    pytest.mark.fake_api,
    pytest.mark.manual_clock,
]

#: seconds the caches give up an unanswered watch after (the scheduler's
#: ``watch_answer_timeout``; the default, 30 s, would be waited out)
ANSWER_WITHIN = 3.0
#: seconds ``wait`` may take to return the end once the server is back (its
#: own timeout, 90 s, fails the test within pytest's 120 s): an
#: unanswered watch given up, the caches' reconnect backoff after a few
#: seconds of refusals, and a re-list. Below the default answer timeout: a
#: scheduler that did not give up its watches after ``ANSWER_WITHIN`` fails
BACK_WITHIN = 20.0
#: the Job caches' resources as the server counts requests: (API group,
#: plural). The pods cache is left out: its watch may be at the newest
#: version, which outlives a restart, and see the end live
JOB_CACHES = {("batch.volcano.sh", "jobs"), ("batch", "jobs")}


def _app(retries: int) -> AppDef:
    role = Role(
        "worker",
        image=IMAGE,
        entrypoint="sh",
        args=["-c", "sleep 5; exit 4"],
        max_retries=retries,
        resource=Resource(cpu=1, gpu=0, memMB=128),
    )
    return AppDef("flaky", roles=[role])


def _phase(server: FakeKubeServer, env: KubeEnv, app_id: str) -> str:
    """The app's Volcano Job phase as the server holds it (no request)."""
    job = server.store.get(VOLCANO_JOBS, env.namespace, app_id.split(":")[-1])
    return str(((job or {}).get("status") or {}).get("state", {}).get("phase"))


async def _end_the_app(env: KubeEnv, app_id: str, retries: int) -> None:
    """Let each attempt's ``sleep 5`` end (``exit 4``) until the server holds
    the Job ended (the controller's requests are never refused)."""
    server, clock = env.fake_server(), env.clock
    assert clock is not None
    for _ in range(retries + 1):
        await clock.wait_sleepers(1, KUBELET_SLEEP)
        await clock.advance(5)
    with anyio.fail_after(30):
        # Terminated: fail-fast ends it at the first failure (no retry left)
        while _phase(server, env, app_id) not in ("Failed", "Terminated"):
            await anyio.sleep(0.05)


def _down(server: FakeKubeServer) -> None:
    """Every client request answers 503; the open watches end."""
    server.faults.fail_next(503, times=1_000_000)
    server.restart()


def _relists_refused(server: FakeKubeServer) -> None:
    """Restarted: the open watches end, their versions answer 410; every
    list answers 500 (reads by GET still answer)."""
    server.faults.fail_next(500, verb="list", times=1_000_000)
    server.restart()


def _watches_unanswered(server: FakeKubeServer) -> None:
    """Restarted, and the caches' watches are taken and never answered (each
    one given up and opened again is held too, until the server is back)."""
    server.faults.hang_next(verb="watch", times=1_000_000)
    server.restart()


def _watches_expire(server: FakeKubeServer) -> None:
    """Restarted, and every watch answers an ERROR event with a 410 Status."""
    server.faults.expire_next_watch(times=1_000_000)
    server.restart()


OUTAGES: dict[str, Callable[[FakeKubeServer], None]] = {
    "down": _down,
    "relists-refused": _relists_refused,
    "watches-unanswered": _watches_unanswered,
    "watches-expire": _watches_expire,
}


async def _job_caches_met_the_outage(server: FakeKubeServer, after: int) -> None:
    """Wait until each Job cache listed or watched since the server's request
    number ``after`` (refused, held unanswered, or a watch answered 410)."""
    with anyio.fail_after(30):
        while True:
            since = server.requests.client_requests()[after:]
            met = {(r.group, r.resource) for r in since if r.verb in ("list", "watch")}
            if met >= JOB_CACHES:
                return
            await anyio.sleep(0.05)


async def _wait_across(
    env: KubeEnv, outage: Callable[[FakeKubeServer], None], retries: int
) -> tuple[DescribeAppResponse | None, float]:
    """Submit, wait in the background, cut the server off with ``outage``
    once the app runs, end the app, bring the server back: ``wait``'s answer
    and the seconds it took after the server came back."""
    server = env.fake_server()
    got: list[DescribeAppResponse | None] = []
    returned: list[float] = []
    async with scheduler(env, watch_answer_timeout=ANSWER_WITHIN) as sched:
        await sched.list()  # the caches run (the wait's own)
        app_id = await sched.submit(_app(retries), cfg_for(env, "volcano"))
        async with anyio.create_task_group() as tg:

            async def waiter() -> None:
                got.append(await sched.wait(app_id, timeout=90))
                returned.append(time.monotonic())

            tg.start_soon(waiter)
            assert env.clock is not None
            await env.clock.wait_sleepers(1, KUBELET_SLEEP)  # the replica runs
            outage(server)
            await _end_the_app(env, app_id, retries)
            # the outage lasts until the Job caches met it after the end
            await _job_caches_met_the_outage(
                server, len(server.requests.client_requests())
            )
            server.faults.reset()
            back = time.monotonic()
        took = max(0.0, returned[0] - back)
        desc = await sched.describe(app_id)
    assert desc is not None
    assert desc.state == AppState.FAILED
    return (got[0] if got else None), took


@pytest.mark.parametrize("retries", [0, 1])
@pytest.mark.parametrize("outage", list(OUTAGES))
async def test_wait_returns_an_end_that_came_during_an_api_server_restart(
    kube_env: KubeEnv, outage: str, retries: int
) -> None:
    final, took = await _wait_across(kube_env, OUTAGES[outage], retries)
    assert final is not None
    assert final.state == AppState.FAILED
    [replica] = final.roles_statuses[0].replicas
    assert (replica.state, replica.exit_code) == (AppState.FAILED, 4)
    assert final.num_restarts == retries
    assert took < BACK_WITHIN, took
