"""Retries on Volcano as a cluster with Volcano's admission webhook sees them.

Volcano's mutating webhook turns a job-level ``maxRetry`` of 0 (or none)
into 3, so an app whose roles ask for fewer retries must say so explicitly;
a REPLICA role restarts its failed replica (task) instead of never retrying.
The fake API server plays the webhook; its controller plays Volcano's job
controller (every restart counts against the job's ``maxRetry``).
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from asyncsched.specs import AppDef, AppState, Resource, RetryPolicy, Role

from .fakeapi.env import KubeEnv
from .helpers import IMAGE, cfg_for, scheduler

pytestmark = pytest.mark.usefixtures("kube_controller")


def _role(name: str, script: str, **kwargs: Any) -> Role:
    return Role(
        name,
        image=IMAGE,
        entrypoint="sh",
        args=["-c", script],
        resource=Resource(cpu=1, gpu=0, memMB=128),
        **kwargs,
    )


async def _stored_job(env: KubeEnv, app_id: str) -> Any:
    async with await env.api_client() as api:
        return await client.CustomObjectsApi(api).get_namespaced_custom_object(
            "batch.volcano.sh", "v1alpha1", env.namespace, "jobs", app_id.split(":")[1]
        )


async def _failed_job(kube_env: KubeEnv, app: AppDef, timeout: float) -> Any:
    """Run ``app`` as a Volcano job under Volcano's admission; once it has
    FAILED, return the job as the server stores it."""
    kube_env.fake_server().enable_volcano_admission()
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(app, cfg_for(kube_env, "volcano"))
        final = await sched.wait(app_id, timeout=timeout)
    assert final is not None
    assert final.state == AppState.FAILED
    return await _stored_job(kube_env, app_id)


@pytest.mark.fake_api
async def test_app_fails_after_the_retries_its_roles_ask_for(kube_env: KubeEnv) -> None:
    app = AppDef(
        "retries",
        roles=[
            _role("flaky", "exit 3", max_retries=1),
            _role("steady", "sleep 30"),  # no retries of its own
        ],
    )
    job = await _failed_job(kube_env, app, timeout=40)
    # one restart, as asked: not the 3 Volcano puts in place of a job-level 0
    assert job["spec"]["maxRetry"] == 1
    assert job["status"]["retryCount"] == 1


@pytest.mark.fake_api
async def test_app_without_retries_is_not_given_any_by_the_job_level(
    kube_env: KubeEnv,
) -> None:
    app = AppDef("noretry", roles=[_role("once", "exit 3")])
    job = await _failed_job(kube_env, app, timeout=30)
    assert job["status"].get("retryCount", 0) == 0


@pytest.mark.fake_api
async def test_replica_retry_policy_restarts_the_failed_replica(
    kube_env: KubeEnv,
) -> None:
    app = AppDef(
        "replica",
        roles=[
            _role(
                "worker",
                "exit 3",
                num_replicas=2,
                max_retries=1,
                retry_policy=RetryPolicy.REPLICA,
            )
        ],
    )
    job = await _failed_job(kube_env, app, timeout=40)
    task = job["spec"]["tasks"][0]
    assert {"event": "PodFailed", "action": "RestartTask"} in task["policies"]
    assert task["maxRetry"] == 1
    # each of the 2 replicas may use its retry: the job level allows both
    assert job["spec"]["maxRetry"] == 2
    assert job["status"]["retryCount"] >= 1
