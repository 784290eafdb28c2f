"""API-server load of waiting on N Kubernetes apps, and the cost of a rate limit.

Against the fake API server of the test suite (``tests/kubernetes/fakeapi``,
real HTTP on 127.0.0.1, in this process), for N in 10, 100, 1000 Volcano apps
that never finish (no controller runs, so they stay without a status):

* ``informer``: N concurrent ``KubernetesScheduler.wait`` calls, which read
  the shared list+watch caches. The watches are shortened
  (``--watch-timeout``, ``--resync``) so that reconnects and re-lists happen
  inside the window; the rate at the defaults (290 s / 600 s) is printed too.
* ``polling``: TorchX's approach, one loop per app calling the Volcano job's
  ``get_namespaced_custom_object_status`` every ``--poll-interval`` seconds
  (TorchX ``Runner.wait``'s default is 10 s), through kubernetes_asyncio.

Requests are counted by the server in a steady-state window after every
waiter has started. Then 200 apps are submitted concurrently, paced by the
server (the defaults: from 50 requests/s up to 1000 while it accepts), at a
fixed 50 requests/s (``max_qps=50``, the former default), and unpaced.

Run: ``python benchmarks/kubernetes_api_load.py`` (about 2 minutes), or
``--sizes 10,100 --window 10`` for a quicker look.

With ``--scale 1000,10000`` it records the scale curve instead (see
``_kube_scale.py``): N apps through ``Runner.run_many`` + ``wait_all`` on the
fake server with its controller, in a process of their own: submission rate,
API reads per minute while waiting, client RSS, event-loop lag, and how long
after the last terminal event ``wait_all`` returned. ``--real`` runs it
against ``ASYNCSCHED_TEST_KUBECONFIG`` instead; ``--test-cluster`` on the test
suite's real single-node cluster, started and stopped here (``--submit-only``:
the creates alone, no pods run). Through nox::

    nox -s bench -- kubernetes --scale 1000,10000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _kube_scale import (
    client_main,
    run_scale,
    scale_table,
    serve_main,
    volcano_main,
)
from kubernetes_asyncio import client, config

from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler
from asyncsched.specs import AppDef, Role
from tests.kubernetes.fakeapi import FakeKubeServer

NS = "bench"
CFG: dict[str, Any] = {"namespace": NS, "queue": "default"}
DEFAULT_WATCH_TIMEOUT = 290
DEFAULT_RESYNC = 600.0


def app(i: int) -> AppDef:
    role = Role("worker", image="busybox", entrypoint="sleep", args=["3600"])
    return AppDef(f"load{i}", roles=[role])


def api_requests(server: FakeKubeServer) -> int:
    """Requests from clients (the fake's own fixture controller excluded)."""
    return int(server.requests.count())


async def submit_all(sched: KubernetesScheduler, n: int) -> tuple[list[str], float]:
    started = time.perf_counter()
    ids = await asyncio.gather(*(sched.submit(app(i), CFG) for i in range(n)))
    return list(ids), time.perf_counter() - started


async def informer_rate(
    server: FakeKubeServer, kubeconfig: str, n: int, args: argparse.Namespace
) -> float:
    async with KubernetesScheduler(
        "bench",
        kubeconfig=kubeconfig,
        namespace=NS,
        qps=0,
        watch_timeout=args.watch_timeout,
        resync=args.resync,
    ) as sched:
        ids, _ = await submit_all(sched, n)
        waiters = [asyncio.create_task(sched.wait(i)) for i in ids]
        await asyncio.sleep(1.0)  # every waiter is parked on the caches
        before = api_requests(server)
        await asyncio.sleep(args.window)
        spent = api_requests(server) - before
        for task in waiters:
            task.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
    rate: float = spent * 60.0 / args.window
    return rate


async def polling_rate(
    server: FakeKubeServer, kubeconfig: str, n: int, args: argparse.Namespace
) -> float:
    async with KubernetesScheduler(
        "bench", kubeconfig=kubeconfig, namespace=NS, qps=0
    ) as sched:
        ids, _ = await submit_all(sched, n)
    api = await config.new_client_from_config(config_file=kubeconfig)
    custom = client.CustomObjectsApi(api)

    async def poll(app_id: str) -> None:
        namespace, _, name = app_id.partition(":")
        while True:  # TorchX: describe() is one status GET per app per interval
            await custom.get_namespaced_custom_object_status(
                "batch.volcano.sh", "v1alpha1", namespace, "jobs", name
            )
            await asyncio.sleep(args.poll_interval)

    pollers = []
    for i, app_id in enumerate(ids):  # spread the polls as independent waits do
        pollers.append(asyncio.create_task(poll(app_id)))
        if i % 50 == 49:
            await asyncio.sleep(0)
    await asyncio.sleep(args.poll_interval)  # every poller has started
    before = api_requests(server)
    await asyncio.sleep(args.window)
    spent = api_requests(server) - before
    for task in pollers:
        task.cancel()
    await asyncio.gather(*pollers, return_exceptions=True)
    await api.close()
    rate: float = spent * 60.0 / args.window
    return rate


async def submit_timing(kubeconfig: str, n: int, qps: float, max_qps: float) -> float:
    async with KubernetesScheduler(
        "bench",
        kubeconfig=kubeconfig,
        namespace=NS,
        qps=qps,
        burst=100,
        max_qps=max_qps,
    ) as sched:
        await sched.list()  # caches up: time the submits only
        _, seconds = await submit_all(sched, n)
    return seconds


@contextlib.asynccontextmanager
async def fresh_server(tmp: Path) -> Any:
    async with FakeKubeServer(bookmark_interval=60.0) as server:
        server.create_namespace(NS)
        path = server.write_kubeconfig(tmp / "kubeconfig", namespace=NS)
        yield server, str(path)


async def main(args: argparse.Namespace) -> None:
    sizes = [int(s) for s in args.sizes.split(",")]
    per_watch = 60.0 / args.watch_timeout + 60.0 / args.resync
    at_defaults = 3 * (60.0 / DEFAULT_WATCH_TIMEOUT + 60.0 / DEFAULT_RESYNC)
    print(
        f"window {args.window:.0f} s; informer watch_timeout {args.watch_timeout} s,"
        f" resync {args.resync:.0f} s (3 caches: ~{3 * per_watch:.1f} req/min"
        f" expected; ~{at_defaults:.2f} req/min at the defaults);"
        f" polling every {args.poll_interval:.0f} s\n"
    )
    print("| apps | informer req/min | polling req/min (TorchX) |")
    print("|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        for n in sizes:
            async with fresh_server(tmp) as (server, kubeconfig):
                informer = await informer_rate(server, kubeconfig, n, args)
            async with fresh_server(tmp) as (server, kubeconfig):
                polling = await polling_rate(server, kubeconfig, n, args)
            print(f"| {n} | {informer:.1f} | {polling:.1f} |", flush=True)
        print(f"\n| submit {args.submit} apps concurrently | seconds |")
        print("|---|---:|")
        for label, qps, max_qps in (
            ("paced by the server (defaults: qps 50 rising to max_qps 1000)", 50, 1e3),
            ("fixed 50/s (qps=50, max_qps=50, burst 100)", 50.0, 50.0),
            ("off (qps=0)", 0.0, 0.0),
        ):
            async with fresh_server(tmp) as (_, kubeconfig):
                seconds = await submit_timing(kubeconfig, args.submit, qps, max_qps)
            print(f"| {label} | {seconds:.2f} |", flush=True)


def orchestrate_scale(args: argparse.Namespace) -> None:
    """The scale curve: for each N a server child and a client child."""
    import os

    from _harness import machine_info

    real = os.environ.get("ASYNCSCHED_TEST_KUBECONFIG") if args.real else None
    if args.real and real is None:
        raise SystemExit("--real needs ASYNCSCHED_TEST_KUBECONFIG")
    if args.submit_only and not args.test_cluster:
        raise SystemExit("--submit-only needs --test-cluster")
    if args.real and args.test_cluster:
        raise SystemExit("--real and --test-cluster choose different servers: pick one")
    where = "the test cluster" if args.test_cluster else real or "the fake server"
    print(
        f"machine: {machine_info()}; apps run 'sleep {args.sleep:g}' on {where}",
        flush=True,
    )
    results = []
    with contextlib.ExitStack() as stack:
        tmpdir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        cluster_kubeconfig = None
        if args.test_cluster:
            cluster_kubeconfig = str(stack.enter_context(_test_cluster(tmpdir)))
        for n in (int(s) for s in args.scale.split(",") if s.strip()):
            result = run_scale(
                Path(__file__),
                n,
                args.sleep,
                tmpdir,
                real,
                cluster_kubeconfig,
                submit_only=args.submit_only,
            )
            print(f"N={n}: {result.to_json()}", flush=True)
            results.append(result)
    print("\n" + scale_table(results))


@contextlib.contextmanager
def _test_cluster(tmpdir: Path) -> Iterator[Path]:
    """The test suite's real single-node cluster, with namespace NS; stopped after."""
    from tests.kubernetes.realcluster.cluster import missing, start_cluster

    if lacking := missing():
        raise SystemExit(f"--test-cluster needs the cluster's binaries: {lacking}")
    cluster = start_cluster()
    try:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
        status, answer = cluster.request("POST", "/api/v1/namespaces", body)
        if status != 201:
            raise RuntimeError(f"creating namespace {NS}: {status} {answer[:300]!r}")
        yield cluster.write_kubeconfig(tmpdir / "kubeconfig", NS)
    finally:
        cluster.stop()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scale",
        default="",
        help="record the scale curve instead, e.g. 1000,10000 apps",
    )
    parser.add_argument(
        "--sleep", type=float, default=15.0, help="seconds each --scale app runs"
    )
    parser.add_argument(
        "--real",
        action="store_true",
        help="--scale against ASYNCSCHED_TEST_KUBECONFIG instead of the fake server",
    )
    parser.add_argument(
        "--test-cluster",
        action="store_true",
        help="--scale against the test suite's real single-node cluster (started"
        " and stopped here; Volcano played by the fixture controller)",
    )
    parser.add_argument(
        "--submit-only",
        action="store_true",
        help="with --test-cluster: submit the N apps, measure, delete them (no pods"
        " run: a single kubelet 1.20 node stalls after several hundred pods)",
    )
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--window", type=float, default=20.0, help="seconds counted")
    parser.add_argument("--watch-timeout", type=int, default=5)
    parser.add_argument("--resync", type=float, default=30.0)
    parser.add_argument("--poll-interval", type=float, default=10.0)
    parser.add_argument("--submit", type=int, default=200)
    return parser.parse_args(argv)


def parse_client_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="one --scale client (a child)")
    parser.add_argument("--apps", type=int, required=True)
    parser.add_argument("--sleep", type=float, required=True)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", default=NS)
    parser.add_argument("--real", action="store_true")
    parser.add_argument("--job-api", default=None)
    parser.add_argument("--submit-only", action="store_true")
    return parser.parse_args(argv)


if __name__ == "__main__":
    if sys.argv[1:2] == ["scale-serve"]:
        serve_main(sys.argv[2])
    elif sys.argv[1:2] == ["scale-volcano"]:
        volcano_main(sys.argv[2])
    elif sys.argv[1:2] == ["scale-client"]:
        client_main(parse_client_args(sys.argv[2:]))
    else:
        arguments = parse_args()
        if arguments.scale:
            orchestrate_scale(arguments)
        else:
            asyncio.run(main(arguments))
