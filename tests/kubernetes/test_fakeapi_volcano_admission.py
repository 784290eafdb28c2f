"""The fake API server's Volcano-admission mode acts like Volcano's job webhooks."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from asyncsched.errors import SubmitError

from .fakeapi.env import KubeEnv
from .fakeapi.untyped import CustomObjectsApi
from .fakeapi.volcano_webhook import VolcanoWebhook
from .helpers import cfg_for, make_app, scheduler

#: checks the fake API server itself: not collected for a real cluster
pytestmark = pytest.mark.fake_api

VOLCANO = ("batch.volcano.sh", "v1alpha1")


@pytest.fixture
def webhook(kube_env: KubeEnv) -> VolcanoWebhook:
    """Volcano's webhooks on (the fake server only)."""
    return kube_env.fake_server().enable_volcano_admission(
        {"default": "Open", "closed": "Closed"}
    )


@pytest.fixture
async def jobs(kube_env: KubeEnv) -> AsyncIterator[Any]:
    async with await kube_env.api_client() as api:
        yield CustomObjectsApi(api)


def _task(name: str, replicas: int = 1, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "containers": [{"name": "main", "image": "busybox"}],
                "restartPolicy": "Never",
            }
        },
        **extra,
    }


def _vjob(name: str, *tasks: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"queue": "default", "tasks": list(tasks), **spec},
    }


async def _refused(jobs: Any, namespace: str, body: dict[str, Any]) -> str:
    with pytest.raises(client.ApiException) as info:
        await jobs.create_namespaced_custom_object(*VOLCANO, namespace, "jobs", body)
    assert info.value.status == 400
    message: str = json.loads(info.value.body or "{}")["message"]
    assert message.startswith(
        'admission webhook "validatejob.volcano.sh" denied the request: '
    )
    return message


async def test_defaults_are_written_as_volcano_writes_them(
    kube_env: KubeEnv, webhook: VolcanoWebhook, jobs: Any
) -> None:
    body = _vjob("d", _task("a", 2), _task("b", maxRetry=2, minAvailable=0))
    body["spec"]["maxRetry"] = 0
    del body["spec"]["queue"]
    job = await jobs.create_namespaced_custom_object(
        *VOLCANO, kube_env.namespace, "jobs", body
    )
    spec = job["spec"]
    assert spec["maxRetry"] == 3  # a 0 is taken for "not set"
    assert spec["queue"] == "default"
    assert spec["schedulerName"] == "volcano"
    assert [(t["minAvailable"], t["maxRetry"]) for t in spec["tasks"]] == [
        (2, 3),
        (0, 2),
    ]
    assert spec["minAvailable"] == 2  # the tasks' sum
    assert webhook.admitted == 1


async def test_a_missing_or_closed_queue_is_refused_and_nothing_stored(
    kube_env: KubeEnv, webhook: VolcanoWebhook, jobs: Any
) -> None:
    ns = kube_env.namespace
    missing = await _refused(jobs, ns, _vjob("m", _task("a"), queue="nope"))
    assert 'queues.scheduling.volcano.sh "nope" not found' in missing
    closed = await _refused(jobs, ns, _vjob("c", _task("a"), queue="closed"))
    assert "queue `closed` status is `Closed`" in closed
    listed = await jobs.list_namespaced_custom_object(*VOLCANO, ns, "jobs")
    assert listed["items"] == []


async def test_invalid_tasks_and_pod_templates_are_refused(
    kube_env: KubeEnv, webhook: VolcanoWebhook, jobs: Any
) -> None:
    ns = kube_env.namespace
    bad_container = _task("a")
    bad_container["template"]["spec"]["containers"][0]["name"] = "Main_1"
    message = await _refused(jobs, ns, _vjob("p", bad_container))
    assert "spec.task[0].template.spec.containers[0].name" in message
    no_image = _task("a")
    del no_image["template"]["spec"]["containers"][0]["image"]
    assert "containers[0].image: Required value" in await _refused(
        jobs, ns, _vjob("i", no_image)
    )
    assert "duplicated task name a" in await _refused(
        jobs, ns, _vjob("t", _task("a"), _task("a"))
    )
    assert "'minAvailable' is greater than 'replicas'" in await _refused(
        jobs, ns, _vjob("n", _task("a", 1, minAvailable=2))
    )
    assert "No task specified" in await _refused(jobs, ns, _vjob("e"))
    # a dry run is admitted like a create
    with pytest.raises(client.ApiException) as info:
        await jobs.create_namespaced_custom_object(
            *VOLCANO, ns, "jobs", _vjob("dry", _task("a"), queue="nope"), dry_run="All"
        )
    assert info.value.status == 400


async def test_submit_to_a_closed_queue_names_the_queue(
    kube_env: KubeEnv, webhook: VolcanoWebhook
) -> None:
    cfg = {**cfg_for(kube_env, "volcano"), "queue": "closed"}
    async with scheduler(kube_env) as sched:
        with pytest.raises(SubmitError, match="closed"):
            await sched.submit(make_app("echo hi"), cfg)
