"""Fixtures for the Kubernetes backend tests: a real client, two API servers.

* ``kube_env``: a :class:`KubeEnv` with a fresh namespace, once per server
  (parametrised ``fake`` / ``real``):

  - ``fake``: a :class:`FakeKubeServer` started for the test (plain HTTP on
    127.0.0.1, a kubeconfig with a token user whose context namespace is that
    namespace);
  - ``real``: the single-node Kubernetes 1.20 cluster of
    :mod:`tests.kubernetes.realcluster` (``real_kube_cluster``, started once
    per session: real etcd, API server, scheduler, controller-manager and a
    kubelet whose pods really run). Without its binaries (see
    ``realcluster/provision.sh``) these tests skip -- or fail when ``CI`` is
    set or ``ASYNCSCHED_REQUIRE_KUBE=1``. With ``ASYNCSCHED_TEST_KUBECONFIG``
    set (and optionally ``ASYNCSCHED_TEST_KUBE_CONTEXT``) ``real`` is that
    cluster instead. The namespace is created through the API and deleted
    afterwards.
  In a test marked ``manual_clock`` the fake server and its controller
  share a :class:`~.fakeapi.clock.ManualClock` (``kube_env.clock``; None on
  a real cluster): watch timeouts, bookmarks, the watch window, the
  kubelet's ``sleep`` and job TTLs wait until the test advances it.
* ``kube_controller``: a :class:`FakeController` reconciling that namespace.
  On the fake: Volcano Jobs, batch/v1 Jobs, and a fake kubelet running the
  pods' commands. On the real test cluster it only plays Volcano (pods from
  the job's tasks, the job's phase from the real pods' phases); the cluster's
  scheduler, Job controller, garbage collector and kubelet do the rest. On an
  ``ASYNCSCHED_TEST_KUBECONFIG`` cluster it plays Volcano and runs the pods
  with ``schedulerName: volcano`` itself.

The fixture's own setup requests are not counted; the controller's requests
never are, and fault rules spare them. Fault hooks, for example::

    faults = kube_env.fake_server().faults      # skips on a real cluster
    faults.fail_next(429, verb="get", resource="jobs", retry_after=1)
    faults.fail_next(500, resource="jobs/status", times=3)
    faults.expire_next_watch()                  # next watch: ERROR 410 event
    faults.drop_next_watch(after_events=2, abrupt=True)
    kube_env.fake_server().compact()            # older versions: 410 Expired
    kube_env.fake_server().restart()            # watches end; older: 410 ERROR
    await kube_env.compact()                    # both servers (etcdctl compact)
    await kube_env.restart_api_server()         # both servers
    kube_env.fake_server().requests.count("list", "pods")
    kube_env.fake_server().requests.client_received()  # every arrival, any path
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from .fakeapi import FakeKubeServer
from .fakeapi.clock import ManualClock
from .fakeapi.controller import FakeController
from .fakeapi.env import KubeEnv, unique_namespace
from .realcluster.cluster import (
    KUBE_VERSION,
    ClusterError,
    RealCluster,
    missing,
    start_cluster,
)

BOOKMARK_INTERVAL = 0.2
#: seconds the fake server's watch cache keeps events (a reconnect from an
#: older version gets 410, as from a real server's short watch cache)
WATCH_WINDOW = 5.0
#: the API servers every ``kube_env`` test runs against
KUBE_SERVERS = ("fake", "real")
#: the test node has 2 cores: pods request no CPU (their limit stays 1 cpu)
REAL_NODE_CFG = {"reserved_millicpu": 1000}


def _real_required() -> bool:
    return (
        bool(os.environ.get("CI")) or os.environ.get("ASYNCSCHED_REQUIRE_KUBE") == "1"
    )


@pytest.fixture(autouse=True)
def _no_system_ca_bundle(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Each client of a server whose kubeconfig names no CA (the fake
    server's plain HTTP) builds a TLS context that loads the system CA bundle
    on the loop, about 0.1 s of CPU, never used over HTTP: point
    ``SSL_CERT_FILE`` at an empty file for the test (a kubeconfig's own CA, as
    the real cluster's, is loaded as before; set after the package's real
    cluster started, so its processes never see it)."""
    for first in ("real_kube_cluster", "kube_server"):  # the real cluster starts first
        if first in request.fixturenames:
            request.getfixturevalue(first)
    empty = tmp_path_factory.getbasetemp() / "no-ca-bundle.pem"
    empty.touch()
    monkeypatch.setenv("SSL_CERT_FILE", str(empty))


@pytest.fixture(scope="package")
def real_kube_cluster() -> Iterator[RealCluster]:
    """The real single-node test cluster, shared by the Kubernetes tests and
    stopped after the last of them (its node would load the machine for the
    rest of the session)."""
    absent = missing()
    if absent:
        reason = "not available: " + "; ".join(absent)
        if _real_required():
            pytest.fail(f"real Kubernetes cluster required (CI): {reason}")
        pytest.skip(f"no real Kubernetes cluster: {reason}")
    cluster = _start_real_cluster()
    try:
        yield cluster
    finally:
        cluster.stop()


#: attempts at starting the real cluster: every real-cluster test errors when
#: it cannot start, and one start can lose a race that the next does not (a
#: port found free taken meanwhile, a deadline missed on a loaded machine)
START_ATTEMPTS = 2


def _start_real_cluster() -> RealCluster:
    """:func:`start_cluster`, once more if the first start fails."""
    failures = []
    for _ in range(START_ATTEMPTS):
        try:
            return start_cluster()
        except ClusterError as exc:  # it stopped what it had started
            failures.append(str(exc))
    pytest.fail(
        "could not start the real Kubernetes test cluster:\n" + "\n---\n".join(failures)
    )


@dataclass
class _Server:
    kind: str  # "fake" or "real"
    cluster: RealCluster | None = None
    kubeconfig: str | None = None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run each ``kube_env`` test against both API servers, except those
    marked ``fake_api`` (they need the fake's hooks): the fake one only, so no
    ``[real]`` variant is collected just to be skipped."""
    chosen = any(
        "kube_server" in str(mark.args[0])
        for mark in metafunc.definition.iter_markers("parametrize")
    )
    if "kube_server" in metafunc.fixturenames and not chosen:
        fake_only = metafunc.definition.get_closest_marker("fake_api") is not None
        servers = ("fake",) if fake_only else KUBE_SERVERS
        metafunc.parametrize("kube_server", servers, indirect=True)


def _indexed_jobs_on_real(item: pytest.Item) -> bool:
    """Whether ``item`` runs ``job_api=indexed`` against the ``real`` server."""
    callspec = getattr(item, "callspec", None)
    if callspec is None or callspec.params.get("kube_server") != "real":
        return False
    # the contract's ``target`` fixture is parametrised by job API too
    return "indexed" in (callspec.params.get("job_api"), callspec.params.get("target"))


def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Leave out the ``[real]`` runs of ``job_api=indexed`` on the built-in
    test cluster: Kubernetes 1.20 has no Indexed Jobs (1.21+), so each would
    set up a namespace only to skip (the refusal itself is checked by
    test_realcluster.py). On an ``ASYNCSCHED_TEST_KUBECONFIG`` cluster they run."""
    minor = int(KUBE_VERSION.split(".")[1])
    if os.environ.get("ASYNCSCHED_TEST_KUBECONFIG") or minor >= 21:
        return
    left_out = [item for item in items if _indexed_jobs_on_real(item)]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if not _indexed_jobs_on_real(item)]


@pytest.fixture
def kube_server(request: pytest.FixtureRequest) -> _Server:
    """Which API server ``kube_env`` uses (sync: starting the cluster blocks)."""
    if request.param == "fake":
        return _Server("fake")
    external = os.environ.get("ASYNCSCHED_TEST_KUBECONFIG")
    if external:
        return _Server("real", kubeconfig=external)
    cluster: RealCluster = request.getfixturevalue("real_kube_cluster")
    return _Server("real", cluster=cluster, kubeconfig=str(cluster.kubeconfig))


async def _probe_fake(env: KubeEnv) -> bool:
    async with await env.api_client() as api:
        try:
            await api.call_api(
                "/fake/v1", "GET", auth_settings=["BearerToken"], response_types_map={}
            )
        except client.ApiException:
            return False
        return True


#: server -> whether it keeps ``completionMode``
_INDEXED_JOBS: dict[str, bool] = {}


async def _keeps_completion_mode(env: KubeEnv) -> bool:
    """Whether the server keeps ``completionMode`` (a dry-run create answers)."""
    server = env.cluster.api_url if env.cluster is not None else env.kubeconfig
    if server in _INDEXED_JOBS:
        return _INDEXED_JOBS[server]
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "probe"},
        "spec": {
            "completionMode": "Indexed",
            "completions": 1,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox"}],
                }
            },
        },
    }
    async with await env.api_client() as api:
        answer = await api.call_api(
            f"/apis/batch/v1/namespaces/{env.namespace}/jobs",
            "POST",
            query_params=[("dryRun", "All")],
            body=job,
            auth_settings=["BearerToken"],
            response_types_map={201: "object", 200: "object"},
            _return_http_data_only=True,
        )
    kept = bool((answer.get("spec") or {}).get("completionMode"))
    _INDEXED_JOBS[server] = kept
    return kept


@pytest.fixture
async def kube_env(
    tmp_path: Path, request: pytest.FixtureRequest, kube_server: _Server
) -> AsyncIterator[KubeEnv]:
    namespace = unique_namespace(request.node.name)
    if kube_server.kind == "real":
        assert kube_server.kubeconfig is not None
        local = kube_server.cluster is not None
        kubeconfig = kube_server.kubeconfig
        if kube_server.cluster is not None:
            path = tmp_path / "kubeconfig"
            kubeconfig = str(kube_server.cluster.write_kubeconfig(path, namespace))
        env = KubeEnv(
            kubeconfig=kubeconfig,
            namespace=namespace,
            context=None if local else os.environ.get("ASYNCSCHED_TEST_KUBE_CONTEXT"),
            server=None,
            faults=None,
            requests=None,
            real=True,
            logs_available=local,
            cluster=kube_server.cluster,
            nodes=local,
            run_cfg=dict(REAL_NODE_CFG) if local else {},
        )
        async with await env.api_client() as api:
            core = client.CoreV1Api(api)
            await core.create_namespace(
                client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace))
            )
            if not local:
                env.logs_available = await _probe_fake(env)
            env.indexed_jobs = await _keeps_completion_mode(env)
            try:
                yield env
            finally:
                if local:
                    # no 30 s grace for the test's leftover pods: they would
                    # keep the node's kubelet busy during the next tests
                    await core.delete_collection_namespaced_pod(
                        namespace, grace_period_seconds=0
                    )
                await core.delete_namespace(namespace, propagation_policy="Background")
        return
    manual = request.node.get_closest_marker("manual_clock") is not None
    clock = ManualClock() if manual else None
    async with FakeKubeServer(
        bookmark_interval=BOOKMARK_INTERVAL, watch_window=WATCH_WINDOW, clock=clock
    ) as server:
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
            clock=clock,
        )


@pytest.fixture
async def kube_controller(kube_env: KubeEnv) -> AsyncIterator[FakeController]:
    if kube_env.nodes:
        # real scheduler, Job controller, garbage collector and kubelet
        async with FakeController(
            kube_env.kubeconfig,
            kube_env.namespace,
            context=kube_env.context,
            batch_jobs=False,
            kubelet=False,
        ) as controller:
            yield controller
        return
    async with FakeController(
        kube_env.kubeconfig,
        kube_env.namespace,
        context=kube_env.context,
        clock=None if kube_env.server is None else kube_env.server.clock,
        batch_jobs=not kube_env.real,
        kubelet_scheduler="volcano" if kube_env.real else None,
        bind_pods=not kube_env.real,
    ) as controller:
        yield controller
