"""The fixture controller runs Volcano and batch/v1 Jobs like the real controllers."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from .fakeapi import wait_until
from .fakeapi.controller import FakeController
from .fakeapi.env import KubeEnv
from .fakeapi.untyped import BatchV1Api, CoreV1Api, CustomObjectsApi

VOLCANO = ("batch.volcano.sh", "v1alpha1")


def _fake_cluster_only(env: KubeEnv) -> None:
    """The fake node (capacity, image store, binding) exists only on the fake."""
    if env.real:
        pytest.skip("needs the fixture controller's fake node")


def _needs_indexed_jobs(env: KubeEnv) -> None:
    """On the real 1.20 test cluster the Job controller is Kubernetes' own."""
    if not env.indexed_jobs:
        pytest.skip("Kubernetes 1.20 has no Indexed Jobs nor Job suspend (1.21+)")


#: seconds a job may take to settle (real pods take a few seconds each)
SETTLE = 60


def _volcano_job(name: str, tasks: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": "volcano",
            "queue": "default",
            "plugins": {"svc": ["--publish-not-ready-addresses"], "env": []},
            "tasks": tasks,
            **spec,
        },
    }


def _task(name: str, script: str, *, replicas: int = 1, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "metadata": {"labels": {"app": "demo"}},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": name,
                        "image": "busybox",
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["sh", "-c", script],
                        "env": [{"name": "ROLE", "value": name}],
                    }
                ],
            },
        },
        **extra,
    }


async def _volcano_phase(custom: Any, ns: str, name: str) -> str:
    job = await custom.get_namespaced_custom_object_status(*VOLCANO, ns, "jobs", name)
    return str(((job.get("status") or {}).get("state") or {}).get("phase", ""))


async def _log(core: Any, ns: str, pod: str) -> str:
    return str(await core.read_namespaced_pod_log(pod, ns))


async def test_volcano_job_completes_with_named_pods_env_and_logs(
    kube_env: KubeEnv, kube_controller: FakeController
) -> None:
    ns = kube_env.namespace
    async with await kube_env.api_client() as api:
        custom, core = CustomObjectsApi(api), CoreV1Api(api)
        body = _volcano_job(
            "train",
            [
                _task(
                    "worker",
                    "echo rank $VC_TASK_INDEX of $VC_WORKER_NUM on $(ROLE)",
                    replicas=2,
                )
            ],
        )
        await custom.create_namespaced_custom_object(*VOLCANO, ns, "jobs", body)
        await wait_until(
            lambda: _volcano_phase(custom, ns, "train"),
            timeout=SETTLE,
        )
        await wait_until(lambda: _is(custom, ns, "train", "Completed"), timeout=SETTLE)
        pods = await core.list_namespaced_pod(
            ns, label_selector="volcano.sh/job-name=train"
        )
        names = sorted(p.metadata.name for p in pods.items)
        assert names == ["train-worker-0", "train-worker-1"]
        pod = pods.items[1]
        assert pod.metadata.labels["volcano.sh/task-spec"] == "worker"
        assert pod.metadata.labels["app"] == "demo"
        assert pod.metadata.annotations["volcano.sh/task-index"] == "1"
        assert pod.metadata.owner_references[0].kind == "Job"
        assert (pod.spec.hostname, pod.spec.subdomain) == ("train-worker-1", "train")
        assert pod.status.phase == "Succeeded"
        assert pod.status.container_statuses[0].state.terminated.exit_code == 0
        if kube_env.logs_available:
            assert await _log(core, ns, "train-worker-1") == "rank 1 of 2 on worker\n"
        svc = await core.read_namespaced_service("train", ns)
        assert svc.spec.cluster_ip == "None"
    assert kube_controller.errors == []


async def _is(custom: Any, ns: str, name: str, phase: str) -> bool:
    return await _volcano_phase(custom, ns, name) == phase


async def test_volcano_restart_policy_retries_then_fails_at_max_retry(
    kube_env: KubeEnv, kube_controller: FakeController
) -> None:
    ns = kube_env.namespace
    async with await kube_env.api_client() as api:
        custom = CustomObjectsApi(api)
        policies = [{"event": "PodFailed", "action": "RestartJob"}]
        body = _volcano_job(
            "flaky", [_task("w", "echo try; exit 3", policies=policies)], maxRetry=2
        )
        await custom.create_namespaced_custom_object(*VOLCANO, ns, "jobs", body)
        await wait_until(lambda: _is(custom, ns, "flaky", "Failed"), timeout=SETTLE)
        job = await custom.get_namespaced_custom_object(*VOLCANO, ns, "jobs", "flaky")
        assert job["status"]["retryCount"] == 2
        assert job["status"]["version"] == 2
        phases = [c["status"] for c in job["status"]["conditions"]]
        assert phases.count("Restarting") == 2
    assert kube_controller.errors == []


async def test_volcano_failure_without_policy_fails_the_job(
    kube_env: KubeEnv, kube_controller: FakeController
) -> None:
    ns = kube_env.namespace
    async with await kube_env.api_client() as api:
        custom, core = CustomObjectsApi(api), CoreV1Api(api)
        body = _volcano_job("bad", [_task("a", "exit 0"), _task("b", "false")])
        await custom.create_namespaced_custom_object(*VOLCANO, ns, "jobs", body)
        await wait_until(lambda: _is(custom, ns, "bad", "Failed"), timeout=SETTLE)
        pod = await core.read_namespaced_pod("bad-b-0", ns)
        terminated = pod.status.container_statuses[0].state.terminated
        assert (pod.status.phase, terminated.exit_code, terminated.reason) == (
            "Failed",
            1,
            "Error",
        )


async def test_volcano_abort_by_status_patch_kills_pods(
    kube_env: KubeEnv, kube_controller: FakeController
) -> None:
    ns = kube_env.namespace
    async with await kube_env.api_client() as api:
        custom, core = CustomObjectsApi(api), CoreV1Api(api)
        body = _volcano_job("long", [_task("w", "echo started; sleep 30", replicas=2)])
        # a real kubelet would wait out the default 30 s for the shell (PID 1)
        body["spec"]["tasks"][0]["template"]["spec"][
            "terminationGracePeriodSeconds"
        ] = 1
        await custom.create_namespaced_custom_object(*VOLCANO, ns, "jobs", body)
        await wait_until(lambda: _is(custom, ns, "long", "Running"), timeout=SETTLE)
        job = await custom.get_namespaced_custom_object(*VOLCANO, ns, "jobs", "long")
        job["status"]["state"]["phase"] = "Aborted"
        await custom.replace_namespaced_custom_object_status(
            *VOLCANO, ns, "jobs", "long", job
        )
        # a real kubelet 1.20 takes 9-16 s per pod to leave the API after a
        # delete, much more on a loaded 2-core node: a deadline, not a sleep
        await wait_until(
            lambda: _no_pods(core, ns, "volcano.sh/job-name=long"),
            timeout=3 * SETTLE if kube_env.real else SETTLE,
        )
        assert await _volcano_phase(custom, ns, "long") == "Aborted"
    assert kube_controller.errors == []


async def _no_pods(core: Any, ns: str, selector: str) -> bool:
    return not (await core.list_namespaced_pod(ns, label_selector=selector)).items


def _indexed_job(
    name: str, script: str, completions: int, **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completions": completions,
            "parallelism": completions,
            "completionMode": "Indexed",
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "subdomain": name,
                    "containers": [
                        {"name": "main", "image": "busybox",
                         "command": ["sh", "-c", script],
                         "env": [{"name": "POD", "valueFrom": {
                             "fieldRef": {"fieldPath": "metadata.name"}}}]}
                    ],
                }
            },
            **spec,
        },
    }  # fmt: skip


async def _condition(batch: Any, ns: str, name: str, kind: str) -> bool:
    job = await batch.read_namespaced_job_status(name, ns)
    return any(
        c.type == kind and c.status == "True" for c in job.status.conditions or []
    )


async def test_indexed_job_completes_with_index_env_hostnames_and_logs(
    kube_env: KubeEnv, kube_controller: FakeController
) -> None:
    _needs_indexed_jobs(kube_env)
    ns = kube_env.namespace
    async with await kube_env.api_client() as api:
        batch, core = BatchV1Api(api), CoreV1Api(api)
        body = _indexed_job(
            "idx", "echo index $JOB_COMPLETION_INDEX host $HOSTNAME pod $POD", 3
        )
        await batch.create_namespaced_job(ns, body)
        await wait_until(
            lambda: _condition(batch, ns, "idx", "Complete"), timeout=SETTLE
        )
        job = await batch.read_namespaced_job_status("idx", ns)
        assert (job.status.succeeded, job.status.completed_indexes) == (3, "0-2")
        pods = (await core.list_namespaced_pod(ns, label_selector="job-name=idx")).items
        by_index = {
            p.metadata.labels["batch.kubernetes.io/job-completion-index"]: p
            for p in pods
        }
        assert sorted(by_index) == ["0", "1", "2"]
        pod = by_index["1"]
        assert pod.metadata.name.startswith("idx-1-")
        assert len(pod.metadata.name) == 11
        assert (
            pod.metadata.annotations["batch.kubernetes.io/job-completion-index"] == "1"
        )
        assert (pod.spec.hostname, pod.spec.subdomain) == ("idx-1", "idx")
        assert pod.metadata.labels["controller-uid"] == job.metadata.uid
        if kube_env.logs_available:
            log = await core.read_namespaced_pod_log(pod.metadata.name, ns)
            assert log == f"index 1 host idx-1 pod {pod.metadata.name}\n"


async def test_indexed_job_fails_after_backoff_limit(
    kube_env: KubeEnv, kube_controller: FakeController
) -> None:
    _needs_indexed_jobs(kube_env)
    ns = kube_env.namespace
    async with await kube_env.api_client() as api:
        batch = BatchV1Api(api)
        body = _indexed_job("fail", "exit $JOB_COMPLETION_INDEX", 2, backoffLimit=1)
        await batch.create_namespaced_job(ns, body)
        await wait_until(
            lambda: _condition(batch, ns, "fail", "Failed"), timeout=SETTLE
        )
        job = await batch.read_namespaced_job_status("fail", ns)
        assert job.status.failed == 2  # index 1 failed twice: > backoffLimit 1
        assert job.status.completed_indexes == "0"
        failed = next(c for c in job.status.conditions if c.type == "Failed")
        assert failed.reason == "BackoffLimitExceeded"
    assert kube_controller.errors == []


async def test_suspended_job_runs_no_pods_until_resumed(
    kube_env: KubeEnv, kube_controller: FakeController
) -> None:
    _needs_indexed_jobs(kube_env)
    ns = kube_env.namespace
    async with await kube_env.api_client() as api:
        batch, core = BatchV1Api(api), CoreV1Api(api)
        await batch.create_namespaced_job(
            ns, _indexed_job("s", "true", 1, suspend=True)
        )
        await wait_until(
            lambda: _condition(batch, ns, "s", "Suspended"), timeout=SETTLE
        )
        assert await _no_pods(core, ns, "job-name=s")
        await batch.patch_namespaced_job("s", ns, {"spec": {"suspend": False}})
        await wait_until(lambda: _condition(batch, ns, "s", "Complete"), timeout=SETTLE)


async def test_volcano_pod_with_too_long_hostname_is_refused_and_job_stays_pending(
    kube_env: KubeEnv, kube_controller: FakeController
) -> None:
    ns = kube_env.namespace
    async with await kube_env.api_client() as api:
        custom, core = CustomObjectsApi(api), CoreV1Api(api)
        name, task = "j" * 40, "t" * 25  # pod/host name "{job}-{task}-0": 68 chars
        body = _volcano_job(name, [_task(task, "true")])
        await custom.create_namespaced_custom_object(*VOLCANO, ns, "jobs", body)
        await wait_until(lambda: kube_controller.api_errors, timeout=SETTLE)
        assert kube_controller.api_errors[0].status == 422
        assert "spec.hostname" in str(kube_controller.api_errors[0].body)
        assert await _volcano_phase(custom, ns, name) == "Pending"
        assert await _no_pods(core, ns, f"volcano.sh/job-name={name}")
    assert kube_controller.errors == []


@pytest.mark.fake_api
async def test_deleting_a_running_pod_is_graceful_and_the_kubelet_confirms(
    kube_env: KubeEnv, kube_controller: FakeController
) -> None:
    _fake_cluster_only(kube_env)
    ns = kube_env.namespace
    async with await kube_env.api_client() as api:
        custom, core = CustomObjectsApi(api), CoreV1Api(api)
        body = _volcano_job("g", [_task("w", "sleep 30")])
        await custom.create_namespaced_custom_object(*VOLCANO, ns, "jobs", body)
        await wait_until(lambda: _is(custom, ns, "g", "Running"), timeout=SETTLE)
        pod = await core.read_namespaced_pod("g-w-0", ns)
        assert pod.spec.node_name == "fake-node"  # bound through pods/binding
        answer = await core.delete_namespaced_pod("g-w-0", ns)
        assert answer.metadata.deletion_timestamp is not None
        assert answer.metadata.deletion_grace_period_seconds == 30
        # The kubelet stops it and confirms; Volcano then replaces the lost pod.
        old_uid = pod.metadata.uid
        await wait_until(lambda: _recreated(core, ns, "g-w-0", old_uid), timeout=SETTLE)
    assert kube_controller.errors == []


async def _recreated(core: Any, ns: str, name: str, old_uid: str) -> bool:
    try:
        pod = await core.read_namespaced_pod(name, ns)
    except client.ApiException:
        return False
    return bool(pod.metadata.uid != old_uid)


async def _pod_status(core: Any, ns: str, name: str) -> Any:
    try:
        return (await core.read_namespaced_pod(name, ns)).status
    except client.ApiException:
        return None


@pytest.mark.fake_api
async def test_pod_asking_more_than_the_node_has_stays_pending_unschedulable(
    kube_env: KubeEnv, kube_controller: FakeController
) -> None:
    _fake_cluster_only(kube_env)
    ns = kube_env.namespace
    async with await kube_env.api_client() as api:
        custom, core = CustomObjectsApi(api), CoreV1Api(api)
        task = _task("w", "true")
        container = task["template"]["spec"]["containers"][0]
        container["resources"] = {"limits": {"nvidia.com/gpu": "16", "cpu": "2"}}
        await custom.create_namespaced_custom_object(
            *VOLCANO, ns, "jobs", _volcano_job("big", [task])
        )

        async def unschedulable() -> Any:
            status = await _pod_status(core, ns, "big-w-0")
            conditions = (status and status.conditions) or []
            return next((c for c in conditions if c.reason == "Unschedulable"), None)

        condition = await wait_until(unschedulable, timeout=SETTLE)
        assert condition.type == "PodScheduled"
        assert condition.status == "False"
        assert "Insufficient nvidia.com/gpu" in condition.message
        assert await _volcano_phase(custom, ns, "big") == "Pending"


@pytest.mark.fake_api
async def test_missing_image_leaves_the_pod_in_image_pull_back_off(
    kube_env: KubeEnv, kube_controller: FakeController
) -> None:
    _fake_cluster_only(kube_env)
    ns = kube_env.namespace
    async with await kube_env.api_client() as api:
        batch, core = BatchV1Api(api), CoreV1Api(api)
        body = _indexed_job("img", "true", 1)
        body["spec"]["template"]["spec"]["containers"][0]["image"] = "does-not-exist:1"
        await batch.create_namespaced_job(ns, body)

        async def backing_off() -> Any:
            pods = (
                await core.list_namespaced_pod(ns, label_selector="job-name=img")
            ).items
            statuses = (pods and pods[0].status.container_statuses) or []
            waiting = statuses and statuses[0].state.waiting
            return waiting if waiting and waiting.reason == "ImagePullBackOff" else None

        waiting = await wait_until(backing_off, timeout=SETTLE)
        assert waiting.message == 'Back-off pulling image "does-not-exist:1"'
        job = await batch.read_namespaced_job_status("img", ns)
        assert job.status.active == 1
        assert not job.status.ready
    assert kube_controller.errors == []


async def test_volcano_exit_code_policy_aborts_the_job(
    kube_env: KubeEnv, kube_controller: FakeController
) -> None:
    ns = kube_env.namespace
    async with await kube_env.api_client() as api:
        custom = CustomObjectsApi(api)
        policies = [{"exitCode": 3, "action": "AbortJob"}]
        tasks = [_task("bad", "exit 3", policies=policies), _task("slow", "sleep 30")]
        await custom.create_namespaced_custom_object(
            *VOLCANO, ns, "jobs", _volcano_job("ab", tasks)
        )
        await wait_until(lambda: _is(custom, ns, "ab", "Aborted"), timeout=SETTLE)
        job = await custom.get_namespaced_custom_object(*VOLCANO, ns, "jobs", "ab")
        assert job["status"]["state"]["reason"] == "PodFailed:AbortJob"
    assert kube_controller.errors == []
