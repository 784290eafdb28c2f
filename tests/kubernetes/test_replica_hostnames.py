"""Replica hostnames: the pod's stable DNS name, ``{hostname}.{subdomain}``.

Both job APIs give every pod a ``hostname`` and the app's headless Service
as ``subdomain``; that name resolves inside the namespace, whatever the
cluster domain or IP family, and is the one the replicas rendezvous at.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from asyncsched.schedulers.kubernetes import _state
from asyncsched.schedulers.kubernetes._state import describe_indexed
from asyncsched.specs import AppState
from asyncsched.testing import wait_for_state

from .fakeapi.env import KubeEnv
from .helpers import JOB_APIS, cfg_for, make_app, scheduler

JSON = dict[str, Any]


def _indexed_pod(index: int, ip: str) -> JSON:
    return {
        "metadata": {
            "name": f"a-b-w-{index}-x7k2q",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"asyncsched.io/role-name": "w", "asyncsched.io/role-index": "0"},
            "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
        },
        "spec": {"hostname": f"a-b-w-{index}", "subdomain": "a-b"},
        "status": {"phase": "Running", "podIP": ip},
    }


def test_hostname_of_an_ipv6_pod_is_its_dns_name_without_a_cluster_domain() -> None:
    job = {
        "metadata": {
            "name": "a-b-w",
            "labels": {"asyncsched.io/role-name": "w", "asyncsched.io/role-index": "0"},
        },
        "spec": {"completions": 1, "completionMode": "Indexed"},
        "status": {"active": 1},
    }
    snapshot = describe_indexed("ns:a-b", [job], [_indexed_pod(0, "fd00:10:244::5")])
    [replica] = snapshot.replicas
    assert replica.hostname == "a-b-w-0.a-b"
    assert ":" not in replica.hostname
    assert "cluster.local" not in replica.hostname


def test_pod_without_subdomain_is_named_by_its_hostname_or_name() -> None:
    pod_hostname = _state.pod_hostname
    assert pod_hostname({"metadata": {"name": "p"}, "spec": {"hostname": "h"}}) == "h"
    assert pod_hostname({"metadata": {"name": "p"}, "spec": {}}) == "p"


@pytest.mark.parametrize("job_api", JOB_APIS)
@pytest.mark.usefixtures("kube_controller")
async def test_rank0_hostname_is_where_the_replicas_rendezvous(
    kube_env: KubeEnv, job_api: str
) -> None:
    # the rank-0 address the other replicas are given: Volcano's svc plugin
    # variable, or the TORCHX_RANK0_HOST of the Indexed Jobs
    rank0_var = "VC_WORKER_0_HOSTS" if job_api == "volcano" else "TORCHX_RANK0_HOST"
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(
            make_app("sleep 60", replicas=2), cfg_for(kube_env, job_api)
        )
        try:
            desc = await wait_for_state(
                sched,
                app_id,
                lambda d: (
                    len(d.roles_statuses[0].replicas) == 2
                    and all(
                        r.state == AppState.RUNNING
                        for r in d.roles_statuses[0].replicas
                    )
                ),
                timeout=60,
            )
            replicas = desc.roles_statuses[0].replicas
            async with await kube_env.api_client() as api:
                pods = await client.CoreV1Api(api).list_namespaced_pod(
                    kube_env.namespace
                )
            given = {
                e.value
                for pod in pods.items
                for e in pod.spec.containers[0].env or []
                if e.name == rank0_var
            }
            hosts = [r.hostname for r in replicas]
            assert given == {hosts[0]}
            assert hosts[1] != hosts[0]
            assert hosts[1].endswith(hosts[0][hosts[0].index(".") :])
        finally:
            await sched.cancel(app_id)
