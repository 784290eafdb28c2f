"""Local events: change -> event latency, and one reader following many apps.

A reader process follows ``events()`` of a fresh session (started before the
first app, so it sees every change live) while this process runs ``--apps``
apps (``true``, at most ``--concurrency`` submitted at once). The reader
reports, once it has the terminal event of every app:

* change -> event: the time it received each event minus the event's
  ``observed`` (when the supervising process made the change; same host
  clock), p50/p99/max;
* its loop lag: a task asking to sleep 10 ms, how late it woke, p99/max;
* its peak RSS (``ru_maxrss``);

and this process adds the journal's size on disk, and whether every
terminal change arrived. ``--in-process`` runs the reader in this process
instead, on the scheduler that runs the apps (the writer hands it its lines
and wakes it; no cross-process poll, no read of the file).

Usage:
    python benchmarks/local_events.py [--apps 10000] [--concurrency 64]
        [--in-process] [--json results.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from asyncsched.schedulers.local import LocalScheduler
from asyncsched.specs import AppDef, Role

SESSION = "bench-events"


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def follow(
    apps: int, ready: Any = None, sched: LocalScheduler | None = None
) -> dict[str, Any]:
    """Read events until ``apps`` apps had their terminal event; the numbers
    (``sched``: read the scheduler that runs the apps, else a new one)."""
    latencies: list[float] = []
    lags: list[float] = []
    done: set[str] = set()
    events = 0

    async def ticker() -> None:
        while True:
            start = time.perf_counter()
            await anyio.sleep(0.01)
            lags.append(time.perf_counter() - start - 0.01)

    async with contextlib.AsyncExitStack() as stack:
        if sched is None:
            sched = await stack.enter_async_context(LocalScheduler(SESSION))
        stream = await stack.enter_async_context(sched.events())
        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            if ready is not None:
                ready()
            async for event in stream:
                events += 1
                latencies.append(time.time() - event.observed)
                if event.terminal and event.kind.value == "app":
                    done.add(event.app_id)
                    if len(done) >= apps:
                        break
            tg.cancel_scope.cancel()
    ms = 1000.0
    return {
        "events": events,
        "terminal_apps": len(done),
        "latency_ms_p50": round(_pct(latencies, 0.5) * ms, 2),
        "latency_ms_p99": round(_pct(latencies, 0.99) * ms, 2),
        "latency_ms_max": round(max(latencies) * ms, 2),
        "loop_lag_ms_p99": round(_pct(lags, 0.99) * ms, 2),
        "loop_lag_ms_max": round(max(lags) * ms, 2),
        "reader_rss_mib": round(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
        ),
    }


async def run_apps(
    apps: int, concurrency: int, sched: LocalScheduler | None = None
) -> float:
    app = AppDef("e", roles=[Role("r", image="/", entrypoint="true")])
    limiter = anyio.Semaphore(concurrency)
    start = time.perf_counter()
    async with contextlib.AsyncExitStack() as stack:
        if sched is None:
            sched = await stack.enter_async_context(
                LocalScheduler(SESSION, retention=None)
            )

        async def one() -> None:
            async with limiter:
                app_id = await sched.submit(app, {})
                await sched.wait(app_id)

        async with anyio.create_task_group() as tg:
            for _ in range(apps):
                await limiter.acquire()  # bounded tasks, not 10,000 at once
                limiter.release()
                tg.start_soon(one)
    return time.perf_counter() - start


async def main(args: argparse.Namespace) -> dict[str, Any]:
    state = tempfile.mkdtemp(prefix="bench-events-")
    os.environ["ASYNCSCHED_STATE_DIR"] = state
    result: dict[str, Any] = {"apps": args.apps, "in_process": args.in_process}
    if args.in_process:  # one scheduler runs the apps and reads their events
        sched = LocalScheduler(SESSION, retention=None)
        async with sched, anyio.create_task_group() as tg:
            started = anyio.Event()
            got: dict[str, Any] = {}

            async def reader() -> None:
                got.update(await follow(args.apps, started.set, sched))

            tg.start_soon(reader)
            await started.wait()
            wall = await run_apps(args.apps, args.concurrency, sched)
            result["wall_s"] = round(wall, 1)
        result.update(got)
    else:
        code = (
            "import anyio, json, sys\n"
            "sys.path.insert(0, sys.argv[2])\n"
            "from local_events import follow\n"
            "print(json.dumps(anyio.run(follow, int(sys.argv[1]),"
            " lambda: print('ready', flush=True))))\n"
        )
        proc = subprocess.Popen(
            [sys.executable, "-c", code, str(args.apps), str(Path(__file__).parent)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        line = await anyio.to_thread.run_sync(proc.stdout.readline)
        assert line.strip() == "ready", line
        result["wall_s"] = round(await run_apps(args.apps, args.concurrency), 1)
        out = await anyio.to_thread.run_sync(proc.stdout.read)
        proc.wait()
        result.update(json.loads(out))
    journal = Path(state) / "events" / SESSION
    size = sum(p.stat().st_size for p in journal.glob("seg-*.jsonl"))
    result["journal_mib"] = round(size / (1 << 20), 2)
    result["journal_bytes_per_app"] = round(size / args.apps)
    result["every_terminal_delivered"] = result["terminal_apps"] == args.apps
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--apps", type=int, default=10000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--in-process", action="store_true")
    parser.add_argument("--json")
    ns = parser.parse_args()
    res = anyio.run(main, ns)
    print(json.dumps(res, indent=2))
    if ns.json:
        Path(ns.json).write_text(json.dumps(res, indent=2))
