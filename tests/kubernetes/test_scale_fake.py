"""Hundreds of Kubernetes apps from one runner, on the fake API server.

Every handle comes back with its final status, every app succeeded, each app
was created exactly once, and waiting on all of them costs a bounded number of
API reads (the shared watches answer; nothing is polled per app). Correctness
only: the time it takes is the benchmark's business
(``nox -s bench -- kubernetes --scale 1000,10000``).

The fake server, its controller (about a dozen API writes per app) and the
client share this process: 300 apps by default keep it well under 40 s on a
loaded 2-core machine; ``ASYNCSCHED_KUBE_SCALE_APPS=1000`` runs the thousand.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from asyncsched.runner import Runner
from asyncsched.specs import AppDef, AppState, Resource, Role

from .fakeapi import FakeKubeServer
from .fakeapi.controller import FakeController
from .fakeapi.env import unique_namespace

pytestmark = pytest.mark.slow

N = int(os.environ.get("ASYNCSCHED_KUBE_SCALE_APPS", "300"))
#: API reads (list/get) the client may make while waiting on all N apps:
#: the caches' lists and re-lists, nothing per app
MAX_READS_WHILE_WAITING = 30


def app(i: int) -> AppDef:
    role = Role(
        "w",
        image="busybox:1.36",
        entrypoint="sh",
        args=["-c", "true"],
        resource=Resource(cpu=1, gpu=0, memMB=64),
    )
    return AppDef(f"s{i}", roles=[role])


@pytest.fixture
async def fake(
    tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[FakeKubeServer, str, str]]:
    namespace = unique_namespace(request.node.name)
    async with FakeKubeServer(bookmark_interval=5.0) as server:
        path = server.write_kubeconfig(tmp_path / "kubeconfig", namespace=namespace)
        server.create_namespace(namespace)
        async with FakeController(str(path), namespace, batch_jobs=False) as ctl:
            yield server, str(path), namespace
        assert ctl.errors == []


@pytest.mark.timeout(300)
async def test_hundreds_of_apps_through_run_many_and_wait_all_all_answered(
    fake: tuple[FakeKubeServer, str, str],
) -> None:
    server, kubeconfig, namespace = fake
    cfg = {"namespace": namespace, "queue": "default"}
    params = {"kubeconfig": kubeconfig, "namespace": namespace}
    async with Runner("scale", scheduler_params=params) as runner:
        with anyio.fail_after(280):
            handles = await runner.run_many(
                [app(i) for i in range(N)], "kubernetes", cfg
            )
            reads_before = server.requests.count("list") + server.requests.count("get")
            results = await runner.wait_all(handles)
            reads = (
                server.requests.count("list") + server.requests.count("get")
            ) - reads_before
    assert len(set(handles)) == N
    assert list(results) == handles  # every handle answered, in order
    states = [None if s is None else s.state for s in results.values()]
    assert states.count(AppState.SUCCEEDED) == N, {str(s) for s in states}
    assert server.requests.count("create", "jobs") == N  # each created once
    assert reads <= MAX_READS_WHILE_WAITING
