"""Fan-out benchmark on a real (private) Slurm cluster: N apps awaited at once.

Starts the test cluster of ``tests/slurm/cluster.py`` (root, Debian packages
``slurmctld slurmd slurm-client munge``; run ``tests/slurm/provision.sh``
first), with ``--cpus`` CPUs declared per logical node so that many apps run
at once, then:

* asyncsched: submit N one-replica apps (``sleep S``) concurrently, then
  ``wait`` on all of them concurrently. Reported: wall time from the first
  submit to the last app done, Slurm commands run while waiting (total, per
  minute, by program) and the number of status ticks.
* TorchX 0.7.0 (if installed): submit the same N apps one after the other
  (its API is synchronous) and try its ``describe``. TorchX 0.7.0 describes
  only through ``sacct`` (Slurm accounting, i.e. slurmdbd and a database),
  which this cluster does not run, so its wait cannot be measured here; the
  script records the error it gets.

Usage::

    python benchmarks/slurm_fanout.py [--apps 100] [--sleep 2] [--cpus 8]
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

from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.specs import AppDef, AppState, Resource, Role
from tests.slurm.cluster import Cluster, missing_binaries, start_cluster


def _app(i: int, sleep: float) -> AppDef:
    role = Role(
        "worker",
        image="/",
        entrypoint="sleep",
        args=[str(sleep)],
        resource=Resource(cpu=1, gpu=0, memMB=16),
    )
    return AppDef(f"fan{i}", roles=[role])


async def bench_asyncsched(cluster: Cluster, n: int, sleep: float) -> dict[str, Any]:
    """N concurrent submits, then N concurrent waits on one scheduler."""
    with tempfile.TemporaryDirectory() as state:
        async with SlurmScheduler(
            "bench", slurm_conf=str(cluster.conf), state_dir=state
        ) as sched:
            started = time.perf_counter()
            ids = await asyncio.gather(
                *(sched.submit(_app(i, sleep)) for i in range(n))
            )
            submitted = time.perf_counter()
            before = Counter(sched.cli.counts)
            ticks_before = sched._tracker.ticks
            finals = await asyncio.gather(*(sched.wait(i) for i in ids))
            done = time.perf_counter()
            waiting = Counter(sched.cli.counts)
            waiting.subtract(before)
            ticks = sched._tracker.ticks - ticks_before
    states = Counter(str(f.state) if f else "None" for f in finals)
    wait_s = done - submitted
    total = sum(waiting.values())
    return {
        "side": "asyncsched",
        "apps": n,
        "submit_s": round(submitted - started, 2),
        "wall_submit_to_all_done_s": round(done - started, 2),
        "wait_s": round(wait_s, 2),
        "commands_while_waiting": total,
        "commands_per_minute_while_waiting": round(total / wait_s * 60, 1),
        "by_program": dict(waiting),
        "status_ticks": ticks,
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
    parser.add_argument("--apps", type=int, default=100)
    parser.add_argument("--sleep", type=float, default=2.0)
    parser.add_argument("--cpus", type=int, default=8, help="CPUs per logical node")
    parser.add_argument("--skip-torchx", action="store_true")
    args = parser.parse_args()
    missing = missing_binaries()
    if missing or os.geteuid() != 0:
        why = f"not installed: {', '.join(missing)}" if missing else "needs root"
        print(f"slurm_fanout: skipped ({why}; see tests/slurm/provision.sh)")
        return
    cluster = start_cluster(cpus=args.cpus)
    cwd = os.getcwd()
    try:
        with tempfile.TemporaryDirectory() as work:
            os.chdir(work)  # the jobs write their logs to the current directory
            results = [asyncio.run(bench_asyncsched(cluster, args.apps, args.sleep))]
            if not args.skip_torchx:
                results.append(bench_torchx(cluster, args.apps, args.sleep))
            os.chdir(cwd)
    finally:
        os.chdir(cwd)
        cluster.stop()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
