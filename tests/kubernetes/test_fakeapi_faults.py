"""Fault hooks and request counters of the fake API server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from .fakeapi import Faults, RequestLog
from .fakeapi.env import KubeEnv
from .fakeapi.untyped import CustomObjectsApi

#: checks the fake API server itself: not collected for a real cluster
pytestmark = pytest.mark.fake_api

VOLCANO = ("batch.volcano.sh", "v1alpha1")
JOB = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
       "metadata": {"name": "j"}, "spec": {"tasks": []}}  # fmt: skip


@pytest.fixture(autouse=True)
def _fake_server_only(kube_env: KubeEnv) -> None:
    """These tests check the fake server itself (skipped on a real cluster)."""
    kube_env.fake_server()


@pytest.fixture
async def custom(kube_env: KubeEnv) -> AsyncIterator[Any]:
    async with await kube_env.api_client() as api:
        yield CustomObjectsApi(api)


def _hooks(env: KubeEnv) -> tuple[Faults, RequestLog]:
    server = env.fake_server()
    return server.faults, server.requests


async def test_injected_500_hits_only_the_matching_request_once(
    kube_env: KubeEnv, custom: Any
) -> None:
    faults, _ = _hooks(kube_env)
    ns = kube_env.namespace
    await custom.create_namespaced_custom_object(*VOLCANO, ns, "jobs", JOB)
    faults.fail_next(500, verb="get", resource="jobs")
    await custom.list_namespaced_custom_object(*VOLCANO, ns, "jobs")  # not a get
    with pytest.raises(client.ApiException) as info:
        await custom.get_namespaced_custom_object(*VOLCANO, ns, "jobs", "j")
    assert info.value.status == 500
    body = json.loads(info.value.body or "{}")
    assert (body["kind"], body["reason"], body["code"]) == (
        "Status",
        "InternalError",
        500,
    )
    assert (await custom.get_namespaced_custom_object(*VOLCANO, ns, "jobs", "j"))[
        "metadata"
    ]


async def test_injected_429_carries_retry_after(kube_env: KubeEnv, custom: Any) -> None:
    faults, _ = _hooks(kube_env)
    faults.fail_next(429, verb="list", retry_after=2, times=2)
    for _ in range(2):
        with pytest.raises(client.ApiException) as info:
            await custom.list_namespaced_custom_object(
                *VOLCANO, kube_env.namespace, "jobs"
            )
        assert info.value.status == 429
        assert info.value.headers is not None
        assert info.value.headers["Retry-After"] == "2"
        assert json.loads(info.value.body or "{}")["details"]["retryAfterSeconds"] == 2
    await custom.list_namespaced_custom_object(*VOLCANO, kube_env.namespace, "jobs")


async def test_injected_409_on_status_subresource(
    kube_env: KubeEnv, custom: Any
) -> None:
    faults, _ = _hooks(kube_env)
    ns = kube_env.namespace
    await custom.create_namespaced_custom_object(*VOLCANO, ns, "jobs", JOB)
    faults.fail_next(409, resource="jobs/status")
    await custom.patch_namespaced_custom_object(
        *VOLCANO, ns, "jobs", "j", [{"op": "add", "path": "/spec/queue", "value": "q"}]
    )  # the main resource is not affected
    with pytest.raises(client.ApiException) as info:
        await custom.patch_namespaced_custom_object_status(
            *VOLCANO, ns, "jobs", "j", {"status": {}},
            _content_type="application/merge-patch+json",
        )  # fmt: skip
    assert info.value.status == 409


async def test_request_counters_by_verb_and_resource_and_reset(
    kube_env: KubeEnv, custom: Any
) -> None:
    _, requests = _hooks(kube_env)
    ns = kube_env.namespace
    assert requests.count() == 0  # the fixture's own setup is not counted
    await custom.create_namespaced_custom_object(*VOLCANO, ns, "jobs", JOB)
    await custom.get_namespaced_custom_object(*VOLCANO, ns, "jobs", "j")
    await custom.get_namespaced_custom_object_status(*VOLCANO, ns, "jobs", "j")
    await custom.list_namespaced_custom_object(*VOLCANO, ns, "jobs")
    await custom.delete_namespaced_custom_object(*VOLCANO, ns, "jobs", "j")
    assert requests.count("get", "jobs") == 2
    assert requests.count("get", "jobs/status") == 1
    assert requests.count("get", "jobs", group="batch") == 0
    assert requests.by_verb() == {"create": 1, "get": 2, "list": 1, "delete": 1}
    assert requests.snapshot()["get jobs/status"] == 1
    requests.reset()
    assert requests.count() == 0


async def test_faults_can_be_set_over_http(kube_env: KubeEnv, custom: Any) -> None:
    api: Any = custom.api_client
    await api.call_api(
        "/fake/faults", "POST", body={"fail": {"status": 503, "verb": "list"}},
        header_params={"Content-Type": "application/json"},
        auth_settings=["BearerToken"], response_types_map={200: "object"},
    )  # fmt: skip
    with pytest.raises(client.ApiException) as info:
        await custom.list_namespaced_custom_object(*VOLCANO, kube_env.namespace, "jobs")
    assert info.value.status == 503


async def test_fault_matching_a_path_substring_and_name(
    kube_env: KubeEnv, custom: Any
) -> None:
    faults, _ = _hooks(kube_env)
    ns = kube_env.namespace
    await custom.create_namespaced_custom_object(*VOLCANO, ns, "jobs", JOB)
    faults.fail_next(500, path="/jobs/j/status")
    await custom.get_namespaced_custom_object(*VOLCANO, ns, "jobs", "j")
    with pytest.raises(client.ApiException) as info:
        await custom.get_namespaced_custom_object_status(*VOLCANO, ns, "jobs", "j")
    assert info.value.status == 500
    faults.fail_next(500, name="other")
    await custom.get_namespaced_custom_object(*VOLCANO, ns, "jobs", "j")
    assert len(faults.rules) == 1  # still waiting for a request on "other"
