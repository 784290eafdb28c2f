"""The caches of a namespace start together or not at all.

If the pods list fails after the job caches started, those are cancelled:
no orphan watch is left open on the server, however often the call is retried.
"""

from __future__ import annotations

import anyio
import pytest

from asyncsched.errors import SchedulerError

from .fakeapi.env import KubeEnv
from .helpers import scheduler


def _open_watches(env: KubeEnv) -> int:
    store = env.fake_server().store
    return sum(1 for w in store.watchers if w.namespace == env.namespace)


@pytest.mark.fake_api
async def test_a_failed_start_leaves_no_watch_open(kube_env: KubeEnv) -> None:
    server = kube_env.fake_server()
    faults, requests = server.faults, server.requests
    faults.fail_next(500, verb="list", resource="pods", times=1_000)
    async with scheduler(kube_env, max_retries=0) as sched:
        with anyio.fail_after(20):  # three attempts to start, each refused
            while requests.count("list", "pods") < 3:
                with pytest.raises(SchedulerError):
                    await sched.list()  # starts the namespace's caches
                await anyio.sleep(0.05)
        with anyio.fail_after(10):  # the job caches' watches are all closed
            while _open_watches(kube_env):
                await anyio.sleep(0.05)
        # once the server lists pods again, the namespace starts whole
        faults.reset()
        with anyio.fail_after(10):  # after the remembered failure's backoff
            while True:
                try:
                    assert await sched.list() == []
                    break
                except SchedulerError:
                    await anyio.sleep(0.05)
        with anyio.fail_after(10):
            while _open_watches(kube_env) < 3:
                await anyio.sleep(0.05)
