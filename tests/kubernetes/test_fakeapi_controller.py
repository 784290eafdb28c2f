"""The fixture controller runs Volcano and batch/v1 Jobs like the real controllers."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client

from .fakeapi import wait_until
from .fakeapi.controller import FakeController
from .fakeapi.env import KubeEnv

VOLCANO = ("batch.volcano.sh", "v1alpha1")


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
                        "command": ["sh", "-c", script],
                        "env": [{"name": "ROLE", "value": name}],
                    }
                ],
            },
        },
        **extra,
    }


async def _volcano_phase(custom: client.CustomObjectsApi, ns: str, name: str) -> str:
    job = await custom.get_namespaced_custom_object_status(*VOLCANO, ns, "jobs", name)
    return str(((job.get("status") or {}).get("state") or {}).get("phase", ""))


async def _log(core: client.CoreV1Api, ns: str, pod: str) -> str:
    return str(await core.read_namespaced_pod_log(pod, ns))


async def test_volcano_job_completes_with_named_pods_env_and_logs(
    kube_env: KubeEnv, kube_controller: FakeController
) -> None:
    ns = kube_env.namespace
    async with await kube_env.api_client() as api:
        custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
        body = _volcano_job(
            "train",
            [_task("worker", "echo rank $VC_TASK_INDEX of $VC_WORKER_NUM on $(ROLE)", replicas=2)],
        )
        await custom.create_namespaced_custom_object(*VOLCANO, ns, "jobs", body)
        await wait_until(
            lambda: _volcano_phase(custom, ns, "train"),
            timeout=10,
        )
        await wait_until(
            lambda: _is(custom, ns, "train", "Completed"), timeout=10
        )
        pods = await core.list_namespaced_pod(ns, label_selector="volcano.sh/job-name=train")
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


async def _is(custom: client.CustomObjectsApi, ns: str, name: str, phase: str) -> bool:
    return await _volcano_phase(custom, ns, name) == phase
