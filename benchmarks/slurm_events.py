"""Events on a real (private) Slurm cluster: change -> event latency and the
status commands a reader costs.

Starts the test cluster of ``tests/slurm/cluster.py`` (root; run
``tests/slurm/provision.sh`` first), without accounting (the job completion
log) and/or with it (``--mode``), then on each: one scheduler submits
``--apps`` one-replica apps, one every ``--every`` seconds (each ``sleep``
``--sleep`` s, then writes the time it ended), while a second scheduler (the
reader, default intervals unless ``--max-interval``) follows
``events()``. Nothing else queries Slurm: the submitting scheduler never
waits or describes.

Reported per cluster: change -> event latency p50 / p99 / max (from the
moment a job's script ended to the reader's terminal event of that app),
and the reader's status commands (``squeue``, ``sacct``): total, per
minute over the run, and the most in any 60 s window.

Usage::

    python benchmarks/slurm_events.py [--mode jobcomp accounting] [--apps 60]
        [--every 1.5] [--sleep 2] [--max-interval 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _harness import busiest_window, percentile, time_calls

from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.specs import AppDef, Resource, Role
from tests.slurm.cluster import Cluster, missing_binaries, start_cluster

STATUS_PROGRAMS = ("squeue", "sacct")


def _is_status_command(argv: Any, **_: Any) -> bool:
    return os.path.basename(str(argv[0])) in STATUS_PROGRAMS


def _app(i: int, sleep: float, ends: Path) -> AppDef:
    role = Role(
        "worker",
        image="/",
        entrypoint="sh",
        args=["-c", f"sleep {sleep}; date +%s.%N > {ends}/ev{i}"],
        resource=Resource(cpu=1, gpu=0, memMB=16),
    )
    return AppDef(f"ev{i}", roles=[role])


async def bench(
    cluster: Cluster, n: int, every: float, sleep: float, max_interval: float
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as state, tempfile.TemporaryDirectory() as tmp:
        ends = Path(tmp)
        conf = str(cluster.conf)
        async with (
            SlurmScheduler("bench", slurm_conf=conf, state_dir=state) as submitter,
            SlurmScheduler(
                "bench", slurm_conf=conf, state_dir=state, max_interval=max_interval
            ) as reader,
        ):
            # when each status command ran (to find the busiest 60 s)
            status_at = time_calls(reader.cli, "run", _is_status_command)
            ids: dict[str, int] = {}
            seen_terminal: dict[str, float] = {}
            all_seen = asyncio.Event()

            async def follow() -> None:
                async with reader.events() as stream:
                    async for event in stream:
                        if event.terminal and event.app_id not in seen_terminal:
                            seen_terminal[event.app_id] = time.time()
                            if len(seen_terminal) == n and len(ids) == n:
                                all_seen.set()

            started = time.monotonic()
            task = asyncio.create_task(follow())
            for i in range(n):
                # each job runs (and logs) in a directory of its own under tmp
                job_dir = str(ends / f"job{i}")
                app_id = await submitter.submit(
                    _app(i, sleep, ends), {"job_dir": job_dir}
                )
                ids[app_id] = i
                await asyncio.sleep(every)
            await asyncio.wait_for(all_seen.wait(), timeout=600)
            wall = time.monotonic() - started
            task.cancel()
            latencies = []
            for app_id, i in ids.items():
                end_file = ends / f"ev{i}"
                if end_file.exists():
                    ended = float(end_file.read_text().strip())
                    latencies.append(seen_terminal[app_id] - ended)
    return {
        "apps": n,
        "wall_s": round(wall, 1),
        "latency_p50_s": round(percentile(latencies, 50, nearest=True), 2),
        "latency_p99_s": round(percentile(latencies, 99, nearest=True), 2),
        "latency_max_s": round(max(latencies), 2),
        "status_commands": len(status_at),
        "per_minute": round(len(status_at) * 60 / wall, 1),
        "most_in_60s": busiest_window(status_at),
        "max_interval_s": max_interval,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--mode",
        nargs="+",
        default=["jobcomp", "accounting"],
        choices=["jobcomp", "accounting"],
    )
    parser.add_argument("--apps", type=int, default=60)
    parser.add_argument("--every", type=float, default=1.5)
    parser.add_argument("--sleep", type=float, default=2.0)
    parser.add_argument("--max-interval", type=float, default=10.0)
    parser.add_argument("--cpus", type=int, default=8)
    args = parser.parse_args()
    for mode in args.mode:
        accounting = mode == "accounting"
        missing = missing_binaries(accounting=accounting)
        if missing:
            sys.exit(f"not installed: {', '.join(missing)}")
        cluster = start_cluster(cpus=args.cpus, accounting=accounting)
        try:
            result = asyncio.run(
                bench(cluster, args.apps, args.every, args.sleep, args.max_interval)
            )
        finally:
            cluster.stop()
        print(json.dumps({"cluster": mode, **result}))


if __name__ == "__main__":
    main()
