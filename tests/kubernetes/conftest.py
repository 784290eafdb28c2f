"""Fixtures for the Kubernetes backend tests: a real client, a fake API server.

* ``kube_env``: a :class:`KubeEnv` -- a fresh namespace on a
  :class:`FakeKubeServer` started for the test (plain HTTP on 127.0.0.1, a
  kubeconfig with a token user whose context namespace is that namespace).
  With ``ASYNCSCHED_TEST_KUBECONFIG`` set (and optionally
  ``ASYNCSCHED_TEST_KUBE_CONTEXT``) it uses that cluster instead: the
  namespace is created through the API and deleted afterwards.
* ``kube_controller``: a :class:`FakeController` reconciling that namespace
  (Volcano Jobs, batch/v1 Jobs, running pods' commands); stopped after the test.
  On a real cluster it only plays Volcano and runs pods with
  ``schedulerName: volcano`` (the cluster's own Job controller and kubelets
  do the rest).

The fixture's own setup requests are not counted; the controller's requests
never are, and fault rules spare them. Fault hooks, for example::

    faults = kube_env.fake_server().faults      # skips on a real cluster
    faults.fail_next(429, verb="get", resource="jobs", retry_after=1)
    faults.fail_next(500, resource="jobs/status", times=3)
    faults.expire_next_watch()                  # next watch: ERROR 410 event
    faults.drop_next_watch(after_events=2, abrupt=True)
    kube_env.fake_server().compact()            # older versions: 410 Expired
    kube_env.fake_server().requests.count("list", "pods")
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from .fakeapi import FakeKubeServer
from .fakeapi.controller import FakeController
from .fakeapi.env import KubeEnv, unique_namespace

BOOKMARK_INTERVAL = 0.2


async def _probe_fake(env: KubeEnv) -> bool:
    async with await env.api_client() as api:
        try:
            await api.call_api(
                "/fake/v1", "GET", auth_settings=["BearerToken"], response_types_map={}
            )
        except client.ApiException:
            return False
        return True


@pytest.fixture
async def kube_env(
    tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[KubeEnv]:
    namespace = unique_namespace(request.node.name)
    real_config = os.environ.get("ASYNCSCHED_TEST_KUBECONFIG")
    if real_config:
        env = KubeEnv(
            kubeconfig=real_config,
            namespace=namespace,
            context=os.environ.get("ASYNCSCHED_TEST_KUBE_CONTEXT") or None,
            server=None,
            faults=None,
            requests=None,
            real=True,
            logs_available=False,
        )
        async with await env.api_client() as api:
            core = client.CoreV1Api(api)
            await core.create_namespace(
                client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace))
            )
            env.logs_available = await _probe_fake(env)
            try:
                yield env
            finally:
                await core.delete_namespace(namespace, propagation_policy="Background")
        return
    async with FakeKubeServer(bookmark_interval=BOOKMARK_INTERVAL) as server:
        path = server.write_kubeconfig(tmp_path / "kubeconfig", namespace=namespace)
        server.create_namespace(namespace)
        yield KubeEnv(
            kubeconfig=str(path),
            namespace=namespace,
            context=None,
            server=server,
            faults=server.faults,
            requests=server.requests,
            real=False,
            logs_available=True,
        )


@pytest.fixture
async def kube_controller(kube_env: KubeEnv) -> AsyncIterator[FakeController]:
    async with FakeController(
        kube_env.kubeconfig,
        kube_env.namespace,
        context=kube_env.context,
        batch_jobs=not kube_env.real,
        kubelet_scheduler="volcano" if kube_env.real else None,
        bind_pods=not kube_env.real,
    ) as controller:
        yield controller
