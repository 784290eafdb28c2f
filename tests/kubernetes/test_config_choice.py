"""Which config is used: an explicit ``$KUBECONFIG`` beats the pod's service
account (as in client-go), and in a pod the default namespace is the pod's.

A pod is imitated by a service-account directory of our own (token, ca.crt,
namespace) and the ``KUBERNETES_SERVICE_HOST``/``_PORT`` variables.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import certifi
import pytest

from asyncsched.errors import SchedulerUnavailableError
from asyncsched.schedulers.kubernetes import _config
from asyncsched.schedulers.kubernetes._config import connect
from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler

from .fakeapi import FakeKubeServer


@pytest.fixture
def service_account(tmp_path: Path) -> Path:
    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text("pod-token")
    # any valid CA bundle: the made-up service host is never reached over TLS
    shutil.copy(certifi.where(), sa / "ca.crt")
    (sa / "namespace").write_text("team-pod\n")
    return sa


@pytest.fixture
async def server() -> AsyncIterator[FakeKubeServer]:
    async with FakeKubeServer() as srv:
        srv.create_namespace("team-kubeconfig")
        yield srv


IN_POD = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}


async def test_in_a_pod_the_service_account_and_its_namespace_are_used(
    service_account: Path,
) -> None:
    conn = await connect(service_account_dir=service_account, environ=IN_POD)
    try:
        assert conn.in_cluster
        assert conn.namespace == "team-pod"
        assert conn.client.configuration.host == "https://10.96.0.1:443"
        assert conn.client.configuration.api_key["BearerToken"] == "Bearer pod-token"
    finally:
        await conn.client.close()


async def test_an_explicit_kubeconfig_variable_wins_over_the_pod_config(
    service_account: Path, server: FakeKubeServer, tmp_path: Path
) -> None:
    path = server.write_kubeconfig(tmp_path / "kc", namespace="team-kubeconfig")
    environ = {**IN_POD, "KUBECONFIG": str(path)}
    conn = await connect(service_account_dir=service_account, environ=environ)
    try:
        assert not conn.in_cluster
        assert conn.namespace == "team-kubeconfig"
        assert conn.client.configuration.host == server.url
    finally:
        await conn.client.close()


async def test_a_kubeconfig_argument_wins_over_the_pod_config(
    service_account: Path, server: FakeKubeServer, tmp_path: Path
) -> None:
    path = server.write_kubeconfig(tmp_path / "kc", namespace="team-kubeconfig")
    conn = await connect(
        kubeconfig=str(path), service_account_dir=service_account, environ=IN_POD
    )
    try:
        assert not conn.in_cluster
        assert conn.client.configuration.host == server.url
    finally:
        await conn.client.close()


async def test_an_empty_kubeconfig_variable_leaves_the_pod_config_in_use(
    service_account: Path,
) -> None:
    environ = {**IN_POD, "KUBECONFIG": ""}
    conn = await connect(service_account_dir=service_account, environ=environ)
    try:
        assert conn.in_cluster
    finally:
        await conn.client.close()


async def test_outside_a_pod_without_any_kubeconfig_the_error_says_what_to_set(
    service_account: Path, tmp_path: Path
) -> None:
    environ = {"HOME": str(tmp_path)}  # no service host: not in a pod
    with pytest.raises(SchedulerUnavailableError, match="KUBECONFIG"):
        await connect(
            kubeconfig=str(tmp_path / "missing"),
            service_account_dir=service_account,
            environ=environ,
        )


async def test_a_scheduler_in_a_pod_lists_the_service_account_namespace(
    service_account: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_config, "SERVICE_ACCOUNT_DIR", service_account)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    # a service address where nothing listens: the first call connects
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "1")
    async with KubernetesScheduler(
        "k8s-test", max_retries=0, connect_timeout=2
    ) as sched:
        before = sched.namespace
        assert before is None  # not connected yet
        with pytest.raises(SchedulerUnavailableError, match=r"127\.0\.0\.1:1"):
            await sched.list()
        assert sched.namespace == "team-pod"
        assert sched.api is not None
        assert sched.api.host == "https://127.0.0.1:1"


async def test_a_scheduler_in_a_pod_follows_an_explicit_kubeconfig_variable(
    service_account: Path,
    server: FakeKubeServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_config, "SERVICE_ACCOUNT_DIR", service_account)
    path = server.write_kubeconfig(tmp_path / "kc", namespace="team-kubeconfig")
    monkeypatch.setenv("KUBECONFIG", str(path))
    for key, value in IN_POD.items():
        monkeypatch.setenv(key, value)
    async with KubernetesScheduler("k8s-test") as sched:
        assert await sched.list() == []
        assert sched.namespace == "team-kubeconfig"
    assert server.requests.count("list", "pods", namespace="team-kubeconfig") == 1
