"""The scale curve of ``kubernetes_api_load.py --scale``: N Kubernetes apps from one process.

Two processes per N, so the client's memory and CPU are its own:

* ``serve``: the fake API server of the test suite and its fixture controller
  (Volcano, scheduler and kubelet in one: each pod "runs" its command), on
  127.0.0.1. It notes when each app first looks final on the server (its
  pod's terminal phase or its Volcano Job's, whichever is written first) and,
  when its stdin closes, prints the time of the last app to get there
  (``time.monotonic()``: one clock for every process of the machine);
* ``client``: ``Runner.run_many`` of N one-replica Volcano apps
  (``sleep S``) with the Runner's and the scheduler's defaults (no
  semaphore of the caller's, the submission paced by the server), then
  ``wait_all``. It reports the submission rate (creates/s), the API reads
  per minute while waiting (from the server's request counters: list and get,
  watches excluded), its peak RSS, the worst event-loop lag, the pacer's
  final rate, and when ``wait_all`` returned.

Against a real server (``--real``, ``ASYNCSCHED_TEST_KUBECONFIG``) only the
client runs, with Indexed Jobs; reads and the latency after the last terminal
event are not measured there (no server-side counters).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _harness import (
    CpuMeter,
    LoopLagSampler,
    Measurement,
    current_rss_bytes,
    emit,
    run_child,
)

__all__ = ["run_scale", "scale_table", "serve_main", "volcano_main", "client_main"]

ROOT = Path(__file__).resolve().parent.parent
NS = "bench"
READY = "READY "
_TERMINAL = ("Completed", "Failed", "Aborted", "Terminated")
_POD_DONE = ("Succeeded", "Failed")


# -- the server process ---------------------------------------------------------------
async def _serve(workdir: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.kubernetes.fakeapi import FakeKubeServer
    from tests.kubernetes.fakeapi.controller import FakeController

    async with FakeKubeServer(bookmark_interval=60.0) as server:
        server.create_namespace(NS)
        kubeconfig = server.write_kubeconfig(workdir / "kubeconfig", namespace=NS)
        terminal: dict[str, float] = {}
        update = server.store.update

        def noting(kind: Any, namespace: str, obj: Any) -> Any:
            """Note when each app first looked final: its pod's or its Job's phase."""
            stored = update(kind, namespace, obj)
            meta, status = stored["metadata"], stored.get("status") or {}
            if kind.plural == "pods" and status.get("phase") in _POD_DONE:
                app = (meta.get("labels") or {}).get("volcano.sh/job-name")
                if app:
                    terminal.setdefault(app, time.monotonic())
            phase = (status.get("state") or {}).get("phase")
            if kind.group == "batch.volcano.sh" and phase in _TERMINAL:
                terminal.setdefault(meta["name"], time.monotonic())
            return stored

        server.store.update = noting  # type: ignore[method-assign]
        async with FakeController(str(kubeconfig), NS, batch_jobs=False) as ctl:
            print(READY + str(kubeconfig), flush=True)
            await asyncio.to_thread(sys.stdin.read)  # until the parent closes it
            result = {
                "terminal": len(terminal),
                "last_terminal": max(terminal.values(), default=None),
                "controller_errors": [repr(e) for e in ctl.errors[:5]],
            }
        print(json.dumps(result), flush=True)


def serve_main(workdir: str) -> None:
    asyncio.run(_serve(Path(workdir)))


async def _play_volcano(kubeconfig: str) -> None:
    """On the test cluster: the fixture controller plays Volcano only.

    The cluster's own scheduler, garbage collector and kubelet do the rest:
    the pods really run in the node's Docker engine.
    """
    sys.path.insert(0, str(ROOT))
    from tests.kubernetes.fakeapi.controller import FakeController

    async with FakeController(kubeconfig, NS, batch_jobs=False, kubelet=False) as ctl:
        print(READY + kubeconfig, flush=True)
        await asyncio.to_thread(sys.stdin.read)  # until the parent closes it
        result = {"controller_errors": [repr(e) for e in ctl.errors[:5]]}
    print(json.dumps(result), flush=True)


def volcano_main(kubeconfig: str) -> None:
    asyncio.run(_play_volcano(kubeconfig))


# -- the client process ---------------------------------------------------------------
async def _reads(url: str) -> int:
    """Client list/get requests the fake server answered so far."""
    import aiohttp

    async with aiohttp.ClientSession() as session:
        async with session.get(f"{url}/fake/requests") as resp:
            counts: dict[str, int] = await resp.json()
    return sum(n for key, n in counts.items() if key.split()[0] in ("list", "get"))


async def _client(args: Any) -> Measurement:
    from asyncsched.runner import Runner
    from asyncsched.specs import AppDef, AppState, Role

    rss_before = current_rss_bytes()
    real = bool(args.real)
    url = None if real else _server_url(args.kubeconfig)
    cfg: dict[str, Any] = {"namespace": args.namespace, "queue": "default"}
    if args.job_api:
        cfg["job_api"] = args.job_api
    script = f"sleep {args.sleep:g}"
    apps = [
        AppDef(
            f"s{i}",
            roles=[
                Role("w", image="busybox:1.36", entrypoint="sh", args=["-c", script])
            ],
        )
        for i in range(args.apps)
    ]
    params = {"kubeconfig": args.kubeconfig, "namespace": args.namespace}
    async with Runner("bench", scheduler_params=params) as runner:
        async with LoopLagSampler() as lag:
            with CpuMeter() as cpu:
                started = time.perf_counter()
                handles = await runner.run_many(apps, "kubernetes", cfg)
                submitted = time.perf_counter()
                reads_before = 0 if url is None else await _reads(url)
                if args.submit_only:
                    results = {}
                else:
                    results = await runner.wait_all(handles)
                returned = time.monotonic()
                ended = time.perf_counter()
                reads_after = 0 if url is None else await _reads(url)
        sched: Any = await runner._scheduler("kubernetes")
        pacer = None if sched.api is None else sched.api.pacer
        if real:
            for handle in handles:  # leave the cluster as we found it
                await sched.delete(handle.rsplit("/", 1)[-1])
    ok = sum(s is not None and s.state == AppState.SUCCEEDED for s in results.values())
    result = Measurement(
        "runner", script, args.apps, ended - started, lag.max_ms, lag.p99_ms
    )
    result.succeeded = ok
    result.extra["submit_only"] = bool(args.submit_only)
    if args.submit_only:  # every handle came back: run_many raises otherwise
        result.succeeded = len(handles)
    waited = ended - submitted
    result.extra.update(
        submit_s=submitted - started,
        creates_per_s=args.apps / (submitted - started),
        wait_s=waited,
        reads_per_min=None
        if url is None or not waited
        else (reads_after - reads_before) * 60 / waited,
        answered=sum(s is not None for s in results.values()),
        wait_all_returned=returned,
        pacer_qps=None if pacer is None else pacer.qps,
        pacer_throttled=None if pacer is None else pacer.throttled_count,
    )
    return result.finish(rss_before, cpu)


def _server_url(kubeconfig: str) -> str:
    import yaml

    doc = yaml.safe_load(Path(kubeconfig).read_text())
    return str(doc["clusters"][0]["cluster"]["server"])


def client_main(args: Any) -> None:
    emit(asyncio.run(_client(args)))


# -- the parent -----------------------------------------------------------------------
def run_scale(
    script: Path,
    n: int,
    sleep: float,
    workdir: Path,
    real: str | None,
    cluster_kubeconfig: str | None = None,
    submit_only: bool = False,
) -> Measurement:
    """One N: a server child (unless ``real``), then a client child; merged result.

    With ``cluster_kubeconfig`` (the test suite's real cluster, started by the
    parent) the server child is only the controller playing Volcano, and with
    ``submit_only`` there is none: the client submits, then deletes its apps.
    """
    base = [sys.executable, str(script)]
    client = ["--apps", str(n), "--sleep", str(sleep)]
    if real is not None:
        cmd = [*base, "scale-client", *client, "--kubeconfig", real, "--real"]
        cmd += ["--job-api", "indexed"]
        cmd += ["--namespace", os.environ.get("ASYNCSCHED_BENCH_NAMESPACE", "default")]
        return run_child(cmd, timeout=3600)
    if cluster_kubeconfig is None:
        serve = [*base, "scale-serve", str(workdir)]
    elif submit_only:  # no pods to run: the Jobs only need to be stored
        cmd = [*base, "scale-client", *client, "--kubeconfig", cluster_kubeconfig]
        return run_child([*cmd, "--real", "--submit-only"], timeout=3600)
    else:
        serve = [*base, "scale-volcano", cluster_kubeconfig]
        client.append("--real")
    server = subprocess.Popen(
        serve,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdin is not None
    assert server.stdout is not None
    try:
        line = server.stdout.readline()
        if not line.startswith(READY):
            raise RuntimeError(f"the fake server did not start: {line!r}")
        kubeconfig = line[len(READY) :].strip()
        cmd = [*base, "scale-client", *client, "--kubeconfig", kubeconfig]
        result = run_child([*cmd, "--namespace", NS], timeout=3600)
        server.stdin.close()
        stats = json.loads(server.stdout.readline())
    finally:
        server.wait(timeout=120)
    last = stats.get("last_terminal")
    returned = result.extra.get("wait_all_returned")
    result.extra["terminal_seen_by_server"] = stats.get("terminal")
    result.extra["controller_errors"] = stats.get("controller_errors")
    result.extra["latency_after_last_terminal_s"] = (
        None if last is None or returned is None else returned - last
    )
    return result


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def scale_table(results: list[Measurement]) -> str:
    """The Markdown rows of docs/benchmarks.md's Kubernetes table (scale)."""
    header = (
        "| N | all SUCCEEDED | wall s | submit s | creates/s | pacer qps at end"
        " | reads/min while waiting | client peak RSS MiB | loop lag max ms"
        " | wait_all after last terminal event s |"
    )
    rows = [header, "|---:|:---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        x = r.extra
        answered = "yes" if r.succeeded == r.apps else f"{r.succeeded}"
        if x.get("submit_only"):
            answered = f"(submitted only: {r.succeeded:,})"
        rows.append(
            f"| {r.apps:,} | {answered}"
            f" | {r.wall_s:.1f} | {_fmt(x.get('submit_s'))}"
            f" | {_fmt(x.get('creates_per_s'), 0)} | {_fmt(x.get('pacer_qps'), 0)}"
            f" | {_fmt(x.get('reads_per_min'))} | {r.peak_rss_mb:.0f}"
            f" | {_fmt(r.lag_max_ms, 0)}"
            f" | {_fmt(x.get('latency_after_last_terminal_s'), 2)} |"
        )
    return "\n".join(rows)
