"""Kubernetes ``events()``: change-to-event latency and API reads while following.

* ``latency``: one reader follows a namespace while this script changes the
  Volcano Jobs' phase itself (a status patch per change, nobody else plays
  Volcano: a change is exactly one write). Measured per change: from the
  moment the patch's answer arrived (the change is stored) to the moment the
  reader got the APP event. Against the test suite's real single-node
  cluster (``--test-cluster``, started and stopped here), an
  ``ASYNCSCHED_TEST_KUBECONFIG`` cluster (``--real``), or the fake server.
* ``reads``: N apps (10, 100) running on the fake API server with its
  controller, one reader following them; the client requests the server
  answers (lists, gets, watches) in a steady-state window, with the watches
  shortened (``watch_timeout=5``) so that reconnects land inside it.

Run: ``python benchmarks/kubernetes_events.py --test-cluster`` (about 3
minutes with the cluster's start), ``--fake`` for the fake server alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _harness import percentile
from kubernetes_asyncio import client, config

from asyncsched import EventKind
from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler
from asyncsched.specs import AppDef, AppState, Resource, Role
from tests.kubernetes.fakeapi import FakeKubeServer
from tests.kubernetes.fakeapi.controller import FakeController

NS = "bench-events"
#: the Volcano phases a change walks through, and the app state each reads
#: (without pods, a live phase reads PENDING: a terminal one tells apart)
PHASES = (("Completed", AppState.SUCCEEDED), ("Pending", AppState.PENDING))


def _app(i: int, script: str = "sleep 3600") -> AppDef:
    role = Role(
        "worker",
        image="busybox:1.36",
        entrypoint="sh",
        args=["-c", script],
        resource=Resource(cpu=1, gpu=0, memMB=64),
    )
    return AppDef(f"ev{i}", roles=[role])


async def _namespace(kubeconfig: str) -> None:
    async with await config.new_client_from_config(config_file=kubeconfig) as api:
        with contextlib.suppress(client.ApiException):
            await client.CoreV1Api(api).create_namespace(
                client.V1Namespace(metadata=client.V1ObjectMeta(name=NS))
            )


async def latency(kubeconfig: str, changes: int) -> list[float]:
    """Seconds from each phase change (its patch sent) to its event."""
    await _namespace(kubeconfig)
    cfg: dict[str, Any] = {"namespace": NS, "queue": "default"}
    async with (
        KubernetesScheduler("bench", kubeconfig=kubeconfig, namespace=NS) as sched,
        await config.new_client_from_config(config_file=kubeconfig) as api,
    ):
        objects = client.CustomObjectsApi(api)
        app_ids = [await sched.submit(_app(i), cfg) for i in range(10)]
        arrived: dict[tuple[str, AppState], asyncio.Event] = {}
        at: dict[tuple[str, AppState], float] = {}
        ready = asyncio.Event()

        async def follow() -> None:
            async with sched.events() as stream:
                ready.set()
                async for event in stream:
                    key = (event.app_id, event.state)
                    if event.kind == EventKind.APP and key in arrived:
                        at[key] = time.monotonic()
                        arrived[key].set()

        reader = asyncio.create_task(follow())
        await ready.wait()
        out: list[float] = []
        for made in range(changes):
            app_id = app_ids[made % len(app_ids)]
            phase, state = PHASES[made // len(app_ids) % len(PHASES)]
            key = (app_id, state)
            arrived[key] = asyncio.Event()
            # a JSON patch (what the client sends for a body it is given)
            body = [
                {"op": "add", "path": "/status", "value": {"state": {"phase": phase}}}
            ]
            sent = time.monotonic()
            await objects.patch_namespaced_custom_object_status(
                "batch.volcano.sh", "v1alpha1", NS, "jobs", app_id.split(":")[1], body
            )
            await asyncio.wait_for(arrived[key].wait(), 30)
            out.append(at[key] - sent)
            del arrived[key]
            await asyncio.sleep(0.02)
        reader.cancel()
        for app_id in app_ids:
            await sched.delete(app_id)
    return out


async def reads(n: int, window: float) -> float:
    """Client reads per minute while one reader follows ``n`` running apps."""
    async with FakeKubeServer(bookmark_interval=1.0) as server:
        with tempfile.TemporaryDirectory() as tmp:
            kubeconfig = str(server.write_kubeconfig(Path(tmp) / "kc", namespace=NS))
            server.create_namespace(NS)
            async with FakeController(kubeconfig, NS) as _controller:
                async with (
                    KubernetesScheduler(
                        "bench", kubeconfig=kubeconfig, namespace=NS, watch_timeout=5
                    ) as sched,
                    KubernetesScheduler(
                        "submit", kubeconfig=kubeconfig, namespace=NS
                    ) as submitter,
                ):
                    cfg: dict[str, Any] = {"namespace": NS, "queue": "default"}

                    # apps that change all the time: each lives 2-6 s, then
                    # another takes its place (submitted without a wait)
                    async def churn(i: int) -> None:
                        while True:
                            life = 2 + i % 5
                            await submitter.submit(_app(i, f"sleep {life}"), cfg)
                            await asyncio.sleep(life + 1)

                    async with _following(sched) as count:
                        tasks = [asyncio.create_task(churn(i)) for i in range(n)]
                        await asyncio.sleep(5)  # every app runs
                        before = _reads(server)
                        events_before = count[0]
                        await asyncio.sleep(window)
                        made = _reads(server) - before
                        print(f"  N={n}: {count[0] - events_before} events in window")
                        for task in tasks:
                            task.cancel()
                        await asyncio.gather(*tasks, return_exceptions=True)
    return made * 60.0 / window


def _reads(server: FakeKubeServer) -> int:
    """Lists, gets and watches of clients (the controller's excluded; the
    submitting scheduler only creates)."""
    return sum(server.requests.count(verb) for verb in ("list", "get", "watch"))


@contextlib.asynccontextmanager
async def _following(sched: KubernetesScheduler) -> AsyncIterator[list[int]]:
    count = [0]
    ready = asyncio.Event()

    async def follow() -> None:
        async with sched.events() as stream:
            ready.set()
            async for _ in stream:
                count[0] += 1

    task = asyncio.create_task(follow())
    await ready.wait()
    try:
        yield count
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _latency_kubeconfig(args: argparse.Namespace) -> tuple[str, Any]:
    if args.test_cluster:
        from tests.kubernetes.realcluster.cluster import start_cluster

        cluster = start_cluster()
        path = Path(tempfile.mkdtemp()) / "kubeconfig"
        return str(cluster.write_kubeconfig(path, NS)), cluster
    if args.real:
        import os

        return os.environ["ASYNCSCHED_TEST_KUBECONFIG"], None
    return "", None


async def _fake_latency(changes: int) -> list[float]:
    async with FakeKubeServer(bookmark_interval=1.0) as server:
        with tempfile.TemporaryDirectory() as tmp:
            kubeconfig = str(server.write_kubeconfig(Path(tmp) / "kc", namespace=NS))
            return await latency(kubeconfig, changes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--test-cluster", action="store_true")
    where.add_argument("--real", action="store_true")
    where.add_argument("--fake", action="store_true")
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--sizes", default="10,100")
    parser.add_argument("--window", type=float, default=30.0)
    parser.add_argument("--skip-reads", action="store_true")
    args = parser.parse_args()
    kubeconfig, cluster = _latency_kubeconfig(args)
    try:
        if kubeconfig:
            lat = asyncio.run(latency(kubeconfig, args.changes))
            where_ = "real cluster"
        else:
            lat = asyncio.run(_fake_latency(args.changes))
            where_ = "fake API server"
    finally:
        if cluster is not None:
            cluster.stop()
    ms = [x * 1000 for x in lat]
    print(
        f"change -> event ({where_}, {len(ms)} changes): p50 "
        f"{percentile(ms, 50):.1f} ms, p99 {percentile(ms, 99):.1f} ms, "
        f"max {max(ms):.1f} ms"
    )
    if args.skip_reads:
        return
    for n in (int(s) for s in args.sizes.split(",")):
        per_min = asyncio.run(reads(n, args.window))
        print(f"reads while following N={n}: {per_min:.1f} requests/min")


if __name__ == "__main__":
    main()
