"""A server that accepts a connection and never answers does not hang a call.

Every non-streaming request has a connect and a total timeout
(``connect_timeout``/``request_timeout``); past it the call raises
:class:`SchedulerUnavailableError` naming the silent server.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from asyncsched.errors import InvalidArgumentError, SchedulerUnavailableError
from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler

from .fakeapi.env import KubeEnv
from .helpers import scheduler


@pytest.mark.fake_api
async def test_a_silent_server_gives_unavailable_within_the_request_timeout(
    kube_env: KubeEnv,
) -> None:
    faults = kube_env.fake_server().faults
    faults.hang_next(verb="list", times=100)
    async with scheduler(kube_env, request_timeout=1.5) as sched:
        began = time.monotonic()
        with anyio.fail_after(30), pytest.raises(SchedulerUnavailableError) as info:
            await sched.describe(f"{kube_env.namespace}:some-app")
        took = time.monotonic() - began
    assert "no answer from the API server" in str(info.value)
    assert took < 10


@pytest.mark.fake_api
async def test_a_silent_server_does_not_hang_cancel(kube_env: KubeEnv) -> None:
    from kubernetes_asyncio import client as k8s

    faults = kube_env.fake_server().faults
    async with await kube_env.api_client() as api:
        # an app another process made: found by a GET, cancelled by a PATCH
        job: dict[str, Any] = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "hung",
                "labels": {
                    "app.kubernetes.io/managed-by": "asyncsched",
                    "asyncsched.io/app-id": "hung",
                },
            },
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "busybox"}],
                    }
                }
            },
        }
        await k8s.BatchV1Api(api).create_namespaced_job(kube_env.namespace, job)  # type: ignore[arg-type]
    faults.hang_next(verb="patch", times=100)
    async with scheduler(kube_env, request_timeout=1.5) as sched:
        with anyio.fail_after(30), pytest.raises(SchedulerUnavailableError):
            await sched.cancel(f"{kube_env.namespace}:hung")


@pytest.mark.parametrize("seconds", [0, -1.0, float("nan")])
def test_a_watch_answer_timeout_that_is_not_positive_is_refused(
    seconds: float,
) -> None:
    with pytest.raises(InvalidArgumentError, match="watch_answer_timeout"):
        KubernetesScheduler("k8s-test", watch_answer_timeout=seconds)
