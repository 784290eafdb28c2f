"""What the ``kube_env`` fixture hands a test: where the API server is.

Example::

    async def test_something(kube_env: KubeEnv) -> None:
        async with await kube_env.api_client() as api:
            await CoreV1Api(api).list_namespaced_pod(kube_env.namespace)
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from typing import Any

import anyio
from kubernetes_asyncio import config

from .clock import ManualClock
from .faults import Faults, RequestLog
from .server import FakeKubeServer


@dataclass
class KubeEnv:
    """An API server and a fresh namespace for one test.

    ``server``/``faults``/``requests`` are None against a real cluster
    (``ASYNCSCHED_TEST_KUBECONFIG``, or the test cluster of
    tests/kubernetes/realcluster); ``logs_available`` says whether pod
    output can be produced (the fake's log endpoint, or a real node).
    ``cluster`` is the test cluster when the tests started it (its
    ``/metrics``, an API server restart); ``nodes`` says whether real
    kubelets run the pods; ``indexed_jobs`` whether the server keeps
    ``completionMode`` (Kubernetes 1.21+); ``run_cfg`` is merged into every
    test's scheduler cfg.
    """

    kubeconfig: str
    namespace: str
    context: str | None
    server: FakeKubeServer | None
    faults: Faults | None
    requests: RequestLog | None
    real: bool
    logs_available: bool
    cluster: Any = None
    nodes: bool = False
    indexed_jobs: bool = True
    run_cfg: dict[str, Any] = field(default_factory=dict)
    #: the fake server's clock in a ``manual_clock`` test (else None)
    clock: ManualClock | None = None

    def fake_server(self) -> FakeKubeServer:
        """The fake server; skips the test on a real cluster."""
        if self.server is None:
            import pytest

            # a test that needs it is marked ``fake_api``: never collected
            # for a real cluster (this skip is the fallback)
            pytest.skip("needs the fake API server (its internals or fault hooks)")
        return self.server

    async def compact(self) -> None:
        """Compact the history: an exact list at an older version answers 410
        (on the test cluster: etcd compacted at its current revision; on the
        fake its watch window is emptied too). Skips on a cluster the tests
        did not start (``ASYNCSCHED_TEST_KUBECONFIG``)."""
        if self.server is not None:
            self.server.compact()
            return
        await anyio.to_thread.run_sync(self._cluster().compact_etcd)

    async def restart_api_server(self) -> None:
        """Restart the API server (etcd keeps the data): open watches end and
        the new watch cache starts at the current version, so a watch from an
        older one gets an ERROR event with a 410 Status. The fake does what
        its clients would see. Skips on a cluster the tests did not start."""
        if self.server is not None:
            self.server.restart()
            return
        await anyio.to_thread.run_sync(self._cluster().restart_apiserver, 0.0, 240)

    def _cluster(self) -> Any:
        if self.cluster is None:
            import pytest

            pytest.skip("changes the test cluster's etcd or API server")
        return self.cluster

    async def api_client(self) -> Any:
        """A new kubernetes_asyncio ApiClient for this server (caller closes it)."""
        return await config.new_client_from_config(
            config_file=self.kubeconfig, context=self.context
        )


def unique_namespace(test_name: str) -> str:
    """A DNS-1123 label derived from the test name plus a random suffix."""
    base = re.sub(r"[^a-z0-9-]+", "-", test_name.lower()).strip("-")[:40].strip("-")
    return f"{base or 't'}-{secrets.token_hex(3)}"
