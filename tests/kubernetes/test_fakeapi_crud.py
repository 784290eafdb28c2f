"""The fake API server answers CRUD requests like a real one (real client, real HTTP)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client, config

from .fakeapi import FakeKubeServer
from .fakeapi.env import KubeEnv
from .fakeapi.untyped import (
    ApisApi,
    BatchV1Api,
    CoreApi,
    CoreV1Api,
    CustomObjectsApi,
    VersionApi,
)

#: checks the fake API server itself: not collected for a real cluster
pytestmark = pytest.mark.fake_api

VOLCANO = ("batch.volcano.sh", "v1alpha1")


@pytest.fixture(autouse=True)
def _fake_server_only(kube_env: KubeEnv) -> None:
    """These tests check the fake server itself (skipped on a real cluster)."""
    kube_env.fake_server()


def _vjob(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"queue": "default", "tasks": []},
    }


def _pod(
    name: str, labels: dict[str, str] | None = None, **meta: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}, **meta},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


@pytest.fixture
async def api(kube_env: KubeEnv) -> AsyncIterator[Any]:
    async with await kube_env.api_client() as api_client:
        yield api_client


def _status(exc: client.ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.body or "{}")
    return body


async def test_create_answers_201_with_server_fields_and_duplicate_is_409_already_exists(
    kube_env: KubeEnv, api: Any
) -> None:
    custom = CustomObjectsApi(api)
    ns = kube_env.namespace
    created = await custom.create_namespaced_custom_object(
        *VOLCANO, ns, "jobs", _vjob("a")
    )
    meta = created["metadata"]
    assert meta["namespace"] == ns
    assert meta["generation"] == 1
    assert meta["uid"]
    assert meta["creationTimestamp"]
    assert int(meta["resourceVersion"]) > 0
    with pytest.raises(client.ApiException) as info:
        await custom.create_namespaced_custom_object(*VOLCANO, ns, "jobs", _vjob("a"))
    assert info.value.status == 409
    status = _status(info.value)
    assert status["kind"] == "Status"
    assert status["status"] == "Failure"
    assert status["reason"] == "AlreadyExists"
    assert status["code"] == 409
    assert status["details"] == {
        "name": "a",
        "group": "batch.volcano.sh",
        "kind": "jobs",
    }
    assert status["message"] == 'jobs.batch.volcano.sh "a" already exists'


async def test_get_missing_object_is_404_not_found_status(
    kube_env: KubeEnv, api: Any
) -> None:
    with pytest.raises(client.ApiException) as info:
        await CoreV1Api(api).read_namespaced_pod("nope", kube_env.namespace)
    assert info.value.status == 404
    status = _status(info.value)
    assert (status["reason"], status["message"]) == (
        "NotFound",
        'pods "nope" not found',
    )
    assert status["details"] == {"name": "nope", "kind": "pods"}


async def test_create_in_missing_namespace_is_404(api: Any) -> None:
    with pytest.raises(client.ApiException) as info:
        await CoreV1Api(api).create_namespaced_pod("no-such-ns", _pod("p"))
    assert info.value.status == 404
    assert _status(info.value)["message"] == 'namespaces "no-such-ns" not found'


async def test_missing_name_is_422_and_generate_name_makes_one(
    kube_env: KubeEnv, api: Any
) -> None:
    core = CoreV1Api(api)
    body = _pod("x")
    del body["metadata"]["name"]
    with pytest.raises(client.ApiException) as info:
        await core.create_namespaced_pod(kube_env.namespace, body)
    assert info.value.status == 422
    assert _status(info.value)["reason"] == "Invalid"
    assert "name or generateName is required" in _status(info.value)["message"]
    body["metadata"]["generateName"] = "gen-"
    pod = await core.create_namespaced_pod(kube_env.namespace, body)
    assert pod.metadata.name.startswith("gen-")
    assert len(pod.metadata.name) == 9


async def test_invalid_label_value_is_422(kube_env: KubeEnv, api: Any) -> None:
    with pytest.raises(client.ApiException) as info:
        await CoreV1Api(api).create_namespaced_pod(
            kube_env.namespace, _pod("p", {"app": "a b/c"})
        )
    assert info.value.status == 422
    assert "metadata.labels" in _status(info.value)["message"]


async def test_dry_run_validates_without_storing(kube_env: KubeEnv, api: Any) -> None:
    custom = CustomObjectsApi(api)
    ns = kube_env.namespace
    answer = await custom.create_namespaced_custom_object(
        *VOLCANO, ns, "jobs", _vjob("dry"), dry_run="All"
    )
    assert answer["metadata"]["name"] == "dry"
    listing = await custom.list_namespaced_custom_object(*VOLCANO, ns, "jobs")
    assert listing["items"] == []
    with pytest.raises(client.ApiException) as info:
        await custom.create_namespaced_custom_object(
            *VOLCANO, ns, "jobs", {"metadata": {"name": "x"}}, dry_run="All"
        )
    assert info.value.status == 400


async def test_list_reports_resource_version_and_filters_by_label_selectors(
    kube_env: KubeEnv, api: Any
) -> None:
    core = CoreV1Api(api)
    ns = kube_env.namespace
    await core.create_namespaced_pod(ns, _pod("a", {"app": "x", "tier": "web"}))
    await core.create_namespaced_pod(ns, _pod("b", {"app": "y", "tier": "db"}))
    await core.create_namespaced_pod(ns, _pod("c", {"app": "z"}))

    async def names(selector: str) -> list[str]:
        pods = await core.list_namespaced_pod(ns, label_selector=selector)
        return [p.metadata.name for p in pods.items]

    listing = await core.list_namespaced_pod(ns)
    assert listing.kind == "PodList"
    assert listing.api_version == "v1"
    assert int(listing.metadata.resource_version) >= 3
    assert await names("app=x") == ["a"]
    assert await names("app==y") == ["b"]
    assert await names("app!=x") == ["b", "c"]
    assert await names("app in (x,z)") == ["a", "c"]
    assert await names("app notin (x,z)") == ["b"]
    assert await names("tier") == ["a", "b"]
    assert await names("!tier") == ["c"]
    assert await names("tier,app=y") == ["b"]
    pods = await core.list_namespaced_pod(ns, field_selector="metadata.name=c")
    assert [p.metadata.name for p in pods.items] == ["c"]
    with pytest.raises(client.ApiException) as info:
        await core.list_namespaced_pod(ns, field_selector="spec.bogus=1")
    assert info.value.status == 400


async def test_list_pages_with_limit_and_continue(kube_env: KubeEnv, api: Any) -> None:
    core = CoreV1Api(api)
    ns = kube_env.namespace
    for i in range(5):
        await core.create_namespaced_pod(ns, _pod(f"p{i}"))
    first = await core.list_namespaced_pod(ns, limit=2)
    assert [p.metadata.name for p in first.items] == ["p0", "p1"]
    assert first.metadata.remaining_item_count == 3
    second = await core.list_namespaced_pod(
        ns, limit=2, _continue=first.metadata._continue
    )
    assert [p.metadata.name for p in second.items] == ["p2", "p3"]
    server = kube_env.fake_server()
    await core.create_namespaced_pod(ns, _pod("later"))
    server.compact()  # etcd compacted past the token's revision
    with pytest.raises(client.ApiException) as info:
        await core.list_namespaced_pod(ns, limit=2, _continue=second.metadata._continue)
    assert info.value.status == 410
    assert _status(info.value)["reason"] == "Expired"


async def test_cluster_wide_list_spans_namespaces(kube_env: KubeEnv, api: Any) -> None:
    custom = CustomObjectsApi(api)
    await custom.create_namespaced_custom_object(
        *VOLCANO, kube_env.namespace, "jobs", _vjob("here")
    )
    await custom.create_namespaced_custom_object(
        *VOLCANO, "default", "jobs", _vjob("there")
    )
    listing = await custom.list_cluster_custom_object(*VOLCANO, "jobs")
    assert listing["kind"] == "JobList"
    assert {i["metadata"]["name"] for i in listing["items"]} == {"here", "there"}


async def test_status_merge_patch_changes_only_status_and_bumps_version(
    kube_env: KubeEnv, api: Any
) -> None:
    custom = CustomObjectsApi(api)
    ns = kube_env.namespace
    job = await custom.create_namespaced_custom_object(*VOLCANO, ns, "jobs", _vjob("j"))
    patched = await custom.patch_namespaced_custom_object_status(
        *VOLCANO, ns, "jobs", "j",
        {"status": {"state": {"phase": "Aborted"}}, "spec": {"queue": "other"}},
        _content_type="application/merge-patch+json",
    )  # fmt: skip
    assert patched["status"] == {"state": {"phase": "Aborted"}}
    assert patched["spec"]["queue"] == "default"
    assert int(patched["metadata"]["resourceVersion"]) > int(
        job["metadata"]["resourceVersion"]
    )
    assert patched["metadata"]["generation"] == 1
    read = await custom.get_namespaced_custom_object_status(*VOLCANO, ns, "jobs", "j")
    assert read["status"]["state"]["phase"] == "Aborted"
    main = await custom.patch_namespaced_custom_object(
        *VOLCANO, ns, "jobs", "j", {"spec": {"queue": "q2"}, "status": None},
        _content_type="application/merge-patch+json",
    )  # fmt: skip
    assert main["spec"]["queue"] == "q2"
    assert main["metadata"]["generation"] == 2
    assert main["status"] == {"state": {"phase": "Aborted"}}


async def test_patch_content_types_follow_the_real_server(
    kube_env: KubeEnv, api: Any
) -> None:
    custom, core = CustomObjectsApi(api), CoreV1Api(api)
    ns = kube_env.namespace
    await custom.create_namespaced_custom_object(*VOLCANO, ns, "jobs", _vjob("j"))
    # The client's default for a dict body on custom objects is json-patch: 400.
    with pytest.raises(client.ApiException) as info:
        await custom.patch_namespaced_custom_object(
            *VOLCANO, ns, "jobs", "j", {"spec": {}}
        )
    assert info.value.status == 400
    ops = [{"op": "add", "path": "/metadata/labels/x", "value": "1"}]
    patched = await custom.patch_namespaced_custom_object(
        *VOLCANO, ns, "jobs", "j", ops
    )
    assert patched["metadata"]["labels"] == {"x": "1"}
    with pytest.raises(client.ApiException) as info:
        await custom.patch_namespaced_custom_object(
            *VOLCANO, ns, "jobs", "j", {"spec": {}},
            _content_type="application/strategic-merge-patch+json",
        )  # fmt: skip
    assert info.value.status == 415
    # Pods take a strategic merge patch (the client's default for a dict body).
    await core.create_namespaced_pod(ns, _pod("p"))
    full = {"name": "main", "image": "busybox", "imageID": "", "ready": True,
            "restartCount": 0}  # fmt: skip
    body = {"status": {"containerStatuses": [full]}}
    await core.patch_namespaced_pod_status("p", ns, body)
    body = {"status": {"containerStatuses": [{"name": "main", "restartCount": 1}]}}
    pod = await core.patch_namespaced_pod_status("p", ns, body)
    status = pod.status.container_statuses[0]
    assert (status.ready, status.restart_count) == (True, 1)


async def test_replace_needs_current_resource_version_on_custom_objects(
    kube_env: KubeEnv, api: Any
) -> None:
    custom = CustomObjectsApi(api)
    ns = kube_env.namespace
    job = await custom.create_namespaced_custom_object(*VOLCANO, ns, "jobs", _vjob("j"))
    job["status"] = {"state": {"phase": "Aborted"}}
    replaced = await custom.replace_namespaced_custom_object_status(
        *VOLCANO, ns, "jobs", "j", job
    )
    assert replaced["status"]["state"]["phase"] == "Aborted"
    with pytest.raises(client.ApiException) as info:  # stale resourceVersion
        await custom.replace_namespaced_custom_object_status(
            *VOLCANO, ns, "jobs", "j", job
        )
    assert info.value.status == 409
    assert _status(info.value)["reason"] == "Conflict"
    del job["metadata"]["resourceVersion"]
    with pytest.raises(client.ApiException) as info:
        await custom.replace_namespaced_custom_object(*VOLCANO, ns, "jobs", "j", job)
    assert info.value.status == 422


async def test_delete_cascades_to_owned_pods_by_propagation_policy(
    kube_env: KubeEnv, api: Any
) -> None:
    custom, core, batch = (
        CustomObjectsApi(api), CoreV1Api(api), BatchV1Api(api)
    )  # fmt: skip
    ns = kube_env.namespace
    vjob = await custom.create_namespaced_custom_object(
        *VOLCANO, ns, "jobs", _vjob("v")
    )
    ref = {"apiVersion": vjob["apiVersion"], "kind": "Job", "name": "v",
           "uid": vjob["metadata"]["uid"], "controller": True}  # fmt: skip
    await core.create_namespaced_pod(ns, _pod("v-pod", ownerReferences=[ref]))
    gone = await custom.delete_namespaced_custom_object(*VOLCANO, ns, "jobs", "v")
    assert gone["metadata"]["name"] == "v"  # custom resources answer the object

    async def pod_names() -> list[str]:
        return [p.metadata.name for p in (await core.list_namespaced_pod(ns)).items]

    from .fakeapi import wait_until

    await wait_until(lambda: _empty(pod_names()), timeout=5)
    job = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "b"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
                 "containers": [{"name": "c", "image": "busybox"}]}}},
    }  # fmt: skip
    created = await batch.create_namespaced_job(ns, job)
    assert created.spec.selector.match_labels == {
        "batch.kubernetes.io/controller-uid": created.metadata.uid
    }
    assert created.spec.template.metadata.labels["job-name"] == "b"
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": "b",
           "uid": created.metadata.uid, "controller": True}  # fmt: skip
    await core.create_namespaced_pod(ns, _pod("b-pod", ownerReferences=[ref]))
    status = await batch.delete_namespaced_job("b", ns)  # batch/v1 default: orphan
    assert status.status == "Success"
    assert status.details.name == "b"
    orphan = await core.read_namespaced_pod("b-pod", ns)
    assert not orphan.metadata.owner_references
    await batch.create_namespaced_job(ns, job)
    created = await batch.read_namespaced_job("b", ns)
    ref["uid"] = created.metadata.uid
    await core.create_namespaced_pod(ns, _pod("b-pod2", ownerReferences=[ref]))
    await batch.delete_namespaced_job("b", ns, propagation_policy="Foreground")
    await wait_until(lambda: _absent(pod_names(), "b-pod2"), timeout=5)
    with pytest.raises(client.ApiException):
        await batch.read_namespaced_job("b", ns)


async def _empty(names: Any) -> bool:
    return not await names


async def _absent(names: Any, name: str) -> bool:
    return name not in await names


async def test_requests_without_the_token_are_401(kube_env: KubeEnv, api: Any) -> None:
    api.configuration.api_key = {}
    with pytest.raises(client.ApiException) as info:
        await CoreV1Api(api).list_namespaced_pod(kube_env.namespace)
    assert info.value.status == 401


async def test_discovery_endpoints_answer(api: Any) -> None:
    version = await VersionApi(api).get_code()
    assert version.major == "1"
    groups = await ApisApi(api).get_api_versions()
    assert {g.name for g in groups.groups} >= {"batch", "batch.volcano.sh"}
    resources = await CustomObjectsApi(api).get_api_resources(*VOLCANO)
    assert "jobs" in {r.name for r in resources.resources}
    core = await CoreApi(api).get_api_versions()
    assert core.versions == ["v1"]


async def test_delete_collection_by_label_and_namespace_deletion_removes_contents(
    kube_env: KubeEnv, api: Any
) -> None:
    core = CoreV1Api(api)
    ns = kube_env.namespace
    await core.create_namespaced_pod(ns, _pod("a", {"app": "x"}))
    await core.create_namespaced_pod(ns, _pod("b", {"app": "y"}))
    await core.delete_collection_namespaced_pod(ns, label_selector="app=x")
    names = [p.metadata.name for p in (await core.list_namespaced_pod(ns)).items]
    assert names == ["b"]
    await core.delete_namespace(ns)
    with pytest.raises(client.ApiException) as info:
        await core.read_namespaced_pod("b", ns)
    assert info.value.status == 404


async def test_pod_deletion_is_graceful_once_bound_and_immediate_otherwise(
    kube_env: KubeEnv, api: Any
) -> None:
    core = CoreV1Api(api)
    ns = kube_env.namespace
    await core.create_namespaced_pod(ns, _pod("unbound"))
    await core.delete_namespaced_pod("unbound", ns)
    with pytest.raises(client.ApiException):
        await core.read_namespaced_pod("unbound", ns)
    await core.create_namespaced_pod(ns, _pod("bound"))
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "bound"},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}}  # fmt: skip
    # The server answers a Status, which the client cannot read as a V1Binding
    # (a known client quirk): read the raw response.
    first = await core.create_namespaced_pod_binding(
        "bound", ns, binding, _preload_content=False
    )
    again = await core.create_namespaced_pod_binding(
        "bound", ns, binding, _preload_content=False
    )
    assert (first.status, again.status) == (201, 409)
    assert (await first.json())["status"] == "Success"
    first.release()
    again.release()
    answer = await core.delete_namespaced_pod("bound", ns, grace_period_seconds=5)
    assert answer.metadata.deletion_grace_period_seconds == 5
    terminating = await core.read_namespaced_pod("bound", ns)
    assert terminating.metadata.deletion_timestamp is not None
    assert terminating.spec.node_name == "n1"
    await core.delete_namespaced_pod("bound", ns, grace_period_seconds=0)
    with pytest.raises(client.ApiException) as info:
        await core.read_namespaced_pod("bound", ns)
    assert info.value.status == 404


async def test_server_without_the_volcano_crd_answers_404_for_volcano_jobs(
    tmp_path: Path,
) -> None:
    async with FakeKubeServer(volcano=False) as server:
        path = server.write_kubeconfig(tmp_path / "kubeconfig", namespace="default")
        async with await config.new_client_from_config(config_file=str(path)) as api:
            custom = CustomObjectsApi(api)
            with pytest.raises(client.ApiException) as info:
                await custom.create_namespaced_custom_object(
                    *VOLCANO, "default", "jobs", _vjob("j")
                )
            assert info.value.status == 404
            assert _status(info.value)["message"] == (
                "the server could not find the requested resource"
            )
            groups = await ApisApi(api).get_api_versions()
            assert "batch.volcano.sh" not in {g.name for g in groups.groups}


async def test_unknown_fields_are_pruned_with_a_warning_or_refused_when_strict(
    kube_env: KubeEnv, api: Any
) -> None:
    core, custom = CoreV1Api(api), CustomObjectsApi(api)
    ns = kube_env.namespace
    body = _pod("p")
    body["spec"]["containers"][0]["imagePullPolicyy"] = "Always"  # a typo
    resp = await core.create_namespaced_pod(ns, body, _preload_content=False)
    assert resp.status == 201
    assert resp.headers.getall("Warning") == [
        '299 - "unknown field \\"spec.containers[0].imagePullPolicyy\\""'
    ]
    resp.release()
    stored = await core.read_namespaced_pod("p", ns)
    assert stored.spec.containers[0].image_pull_policy == "Always"  # the default
    body["metadata"]["name"] = "q"
    with pytest.raises(client.ApiException) as info:
        await core.create_namespaced_pod(ns, body, field_validation="Strict")
    assert info.value.status == 400
    assert "strict decoding error" in _status(info.value)["message"]
    job = _vjob("j")
    job["spec"]["tasks"] = [{"name": "t", "replicas": 1, "maxRetires": 3}]
    created = await custom.create_namespaced_custom_object(*VOLCANO, ns, "jobs", job)
    assert created["spec"]["tasks"] == [{"name": "t", "replicas": 1}]


async def test_value_of_the_wrong_json_type_is_400(kube_env: KubeEnv, api: Any) -> None:
    custom = CustomObjectsApi(api)
    job = _vjob("j")
    job["spec"]["tasks"] = [{"name": "t", "replicas": "2"}]
    with pytest.raises(client.ApiException) as info:
        await custom.create_namespaced_custom_object(
            *VOLCANO, kube_env.namespace, "jobs", job
        )
    assert info.value.status == 400
    assert "cannot unmarshal string" in _status(info.value)["message"]


async def test_server_side_apply_creates_then_updates_and_needs_a_field_manager(
    kube_env: KubeEnv, api: Any
) -> None:
    core = CoreV1Api(api)
    ns = kube_env.namespace
    apply = "application/apply-patch+yaml"
    svc: dict[str, Any] = {"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": "s", "labels": {"v": "1"}},
           "spec": {"clusterIP": "None", "selector": {"app": "x"}}}  # fmt: skip
    created = await core.patch_namespaced_service(
        "s", ns, svc, field_manager="tests", _content_type=apply
    )
    assert created.spec.cluster_ip == "None"
    svc["metadata"]["labels"] = {"v": "2"}
    updated = await core.patch_namespaced_service(
        "s", ns, svc, field_manager="tests", _content_type=apply
    )
    assert updated.metadata.labels == {"v": "2"}
    assert updated.metadata.uid == created.metadata.uid
    with pytest.raises(client.ApiException) as info:
        await core.patch_namespaced_service("s", ns, svc, _content_type=apply)
    assert info.value.status == 422
