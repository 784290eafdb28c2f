"""Fan-out benchmark on a real (private) Slurm cluster: N apps awaited at once.

Starts the test cluster of ``tests/slurm/cluster.py`` (root, Debian packages
``slurmctld slurmd slurm-client munge``; run ``tests/slurm/provision.sh``
first), with ``--cpus`` CPUs declared per logical node so that many apps run
at once, then:

* asyncsched, for each N of ``--apps`` (default 10 and 100): N tasks each
  submit one one-replica app (``sleep S``, then the job writes its end time;
  at most ``--submit-concurrency`` submits at once) and ``wait`` on it, as an
  orchestration script does. Reported: wall time from the first submit to
  the last app done, the status commands run (``squeue``, ``sacct``,
  ``scontrol``: total, per minute, and the most in any 60 s window, which
  the scheduler caps at 60), all commands by program, the number of status
  ticks, and the wait latency (from a job's end to its ``wait`` returning:
  p50, p95, max).
* TorchX 0.7.0 (if installed): submit the same N apps one after the other
  (its API is synchronous) and try its ``describe``. TorchX 0.7.0 describes
  only through ``sacct`` (Slurm accounting, i.e. slurmdbd and a database),
  which this cluster does not run, so its wait cannot be measured here; the
  script records the error it gets.

Usage::

    python benchmarks/slurm_fanout.py [--apps 10 100 1000] [--sleep 2] [--cpus 8]
        [--submit-concurrency 16] [--skip-torchx]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _harness import busiest_window, percentile, time_calls

from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.specs import AppDef, AppState, Resource, Role
from tests.slurm.cluster import Cluster, missing_binaries, start_cluster

#: the Slurm programs that read status (the rest submit, cancel or probe)
STATUS_PROGRAMS = ("squeue", "sacct", "scontrol")


def _is_status_command(argv: Any, **_: Any) -> bool:
    return os.path.basename(str(argv[0])) in STATUS_PROGRAMS


def _app(i: int, sleep: float, ends: Path | None = None) -> AppDef:
    """``sleep``; with ``ends``, the job then writes its end time there."""
    if ends is None:
        entrypoint, args = "sleep", [str(sleep)]
    else:
        entrypoint = "sh"
        args = ["-c", f"sleep {sleep}; date +%s.%N > {ends}/fan{i}"]
    role = Role(
        "worker",
        image="/",
        entrypoint=entrypoint,
        args=args,
        resource=Resource(cpu=1, gpu=0, memMB=16),
    )
    return AppDef(f"fan{i}", roles=[role])


async def bench_asyncsched(
    cluster: Cluster, n: int, sleep: float, concurrency: int = 16
) -> dict[str, Any]:
    """N apps, each submitted (at most ``concurrency`` submits at once) then
    awaited by its own task, all on one scheduler.

    Wait latency: from the moment a job's script ended (it writes its end
    time) to the moment ``wait`` returned that app's final status.
    """
    with tempfile.TemporaryDirectory() as state, tempfile.TemporaryDirectory() as tmp:
        ends = Path(tmp)
        async with SlurmScheduler(
            "bench", slurm_conf=str(cluster.conf), state_dir=state
        ) as sched:
            # when each status command ran (to find the busiest 60 s)
            status_at = time_calls(sched.cli, "run", _is_status_command)
            gate = asyncio.Semaphore(concurrency)
            submitted_at: list[float] = []
            returned: dict[int, float] = {}

            async def run_one(i: int) -> Any:
                async with gate:
                    app_id = await sched.submit(_app(i, sleep, ends))
                submitted_at.append(time.perf_counter())
                final = await sched.wait(app_id)
                returned[i] = time.time()
                return final

            before = Counter(sched.cli.counts)
            ticks_before = sched._tracker.ticks
            started = time.perf_counter()
            finals = await asyncio.gather(*(run_one(i) for i in range(n)))
            done = time.perf_counter()
            commands = Counter(sched.cli.counts)
            commands.subtract(before)
            ticks = sched._tracker.ticks - ticks_before
        latencies = [
            returned[i] - float((ends / f"fan{i}").read_text())
            for i in range(n)
            if (ends / f"fan{i}").exists()
        ]
    states = Counter(str(f.state) if f else "None" for f in finals)
    wall = done - started
    status = sum(commands[p] for p in STATUS_PROGRAMS)
    return {
        "side": "asyncsched",
        "apps": n,
        "submit_concurrency": concurrency,
        "all_submitted_s": round(max(submitted_at) - started, 2),
        "wall_first_submit_to_all_done_s": round(wall, 2),
        "status_commands": status,
        "status_commands_per_minute": round(status / wall * 60, 1),
        "status_commands_max_in_any_60s": busiest_window(status_at),
        "by_program": {k: v for k, v in commands.items() if v},
        "status_ticks": ticks,
        "wait_latency_s": {
            "p50": round(percentile(latencies, 50, nearest=True), 2),
            "p95": round(percentile(latencies, 95, nearest=True), 2),
            "max": round(max(latencies), 2),
            "measured": len(latencies),
        }
        if latencies
        else None,
        "states": dict(states),
        "all_succeeded": states == Counter({str(AppState.SUCCEEDED): n}),
    }


def bench_torchx(cluster: Cluster, n: int, sleep: float) -> dict[str, Any]:
    """TorchX 0.7.0's SlurmScheduler on the same cluster, as far as it works."""
    try:
        from torchx.schedulers import slurm_scheduler as tx_slurm
        from torchx.specs import (
            AppDef as TxAppDef,
            Resource as TxResource,
            Role as TxRole,
        )
    except ImportError as exc:
        return {"side": "torchx-0.7.0", "error": f"not installed: {exc}"}
    counts: Counter[str] = Counter()
    real_run = subprocess.run

    def counting_run(*args: Any, **kwargs: Any) -> Any:
        argv = args[0] if args else kwargs["args"]
        counts[os.path.basename(str(argv[0]))] += 1
        return real_run(*args, **kwargs)

    tx_slurm.subprocess.run = counting_run
    old_env = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    cwd = os.getcwd()
    result: dict[str, Any] = {"side": "torchx-0.7.0", "apps": n}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            os.chdir(tmp)
            sched = tx_slurm.SlurmScheduler("bench")
            started = time.perf_counter()
            ids = []
            for i in range(n):
                role = TxRole(
                    "worker",
                    image="/",
                    entrypoint="sleep",
                    args=[str(sleep)],
                    resource=TxResource(cpu=1, gpu=0, memMB=16),
                )
                ids.append(sched.submit(TxAppDef(f"fan{i}", roles=[role]), {}))
            result["submit_s"] = round(time.perf_counter() - started, 2)
            result["submit_commands"] = dict(counts)
            try:
                sched.describe(ids[0])
                result["describe"] = "ok"
            except subprocess.CalledProcessError as exc:
                result["describe"] = (
                    f"fails: {exc.cmd} exit {exc.returncode}"
                    " (TorchX 0.7.0 describes through sacct only; this cluster has"
                    " no accounting storage)"
                )
            # leave nothing behind
            real_run(["scancel", *ids], check=False)
    finally:
        os.chdir(cwd)
        tx_slurm.subprocess.run = real_run
        if old_env is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old_env
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--apps", type=int, nargs="+", default=[10, 100], help="app counts, in turn"
    )
    parser.add_argument("--sleep", type=float, default=2.0)
    parser.add_argument("--cpus", type=int, default=8, help="CPUs per logical node")
    parser.add_argument(
        "--submit-concurrency", type=int, default=16, help="submits at once"
    )
    parser.add_argument("--skip-torchx", action="store_true")
    args = parser.parse_args()
    missing = missing_binaries()
    if missing or os.geteuid() != 0:
        why = f"not installed: {', '.join(missing)}" if missing else "needs root"
        print(f"slurm_fanout: skipped ({why}; see tests/slurm/provision.sh)")
        return
    cluster = start_cluster(cpus=args.cpus)
    cwd = os.getcwd()
    results = []
    try:
        with tempfile.TemporaryDirectory() as work:
            os.chdir(work)  # the jobs write their logs to the current directory
            for n in args.apps:
                result = asyncio.run(
                    bench_asyncsched(cluster, n, args.sleep, args.submit_concurrency)
                )
                print(json.dumps(result), file=sys.stderr, flush=True)
                results.append(result)
            if not args.skip_torchx:
                results.append(bench_torchx(cluster, max(args.apps), args.sleep))
            os.chdir(cwd)
    finally:
        os.chdir(cwd)
        cluster.stop()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
