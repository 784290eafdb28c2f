"""File descriptors per running replica of the local backend, and what a chatty
workload costs the supervising process.

* ``quiet``: ``--replicas`` replicas that print one line and sleep; the
  scheduler process's open descriptors (``/proc/self/fd``) once all run,
  minus those before, per replica;
* ``chatty``: the same with replicas printing a line to stdout and to stderr
  every millisecond;
* ``chatty throughput``: ``--writers`` replicas each printing ``--lines``
  lines to stdout and as many to stderr, one flush per line; wall time and the
  scheduler process's CPU time (user + system) from the first submit until
  every app is awaited.

Compare two versions by running the script with each on ``PYTHONPATH``.

Usage:
    python benchmarks/local_fds.py [--replicas 50] [--writers 20]
        [--lines 20000] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio

from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppDef, AppState, Role

QUIET = "import time; print('ready', flush=True); time.sleep(600)"
CHATTY = """\
import sys, time
while True:
    print('o' * 60, flush=True)
    print('e' * 60, file=sys.stderr, flush=True)
    time.sleep(0.001)
"""
WRITER = """\
import sys
for i in range({lines}):
    print(f'{{i:08d}} ' + 'o' * 60, flush=True)
    print(f'{{i:08d}} ' + 'e' * 60, file=sys.stderr, flush=True)
"""


def _nfds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _app(code: str) -> AppDef:
    role = Role("r", image="/", entrypoint=sys.executable, args=["-c", code])
    return AppDef("fds", roles=[role])


async def _fds_per_replica(
    sched: LocalScheduler, code: str, replicas: int, log_dir: str
) -> float:
    """Open descriptors per replica while ``replicas`` apps of ``code`` run."""
    before = _nfds()
    ids = [
        await sched.submit(_app(code), {"log_dir": log_dir}) for _ in range(replicas)
    ]
    try:
        for app_id in ids:  # every replica has printed (its logs are written)
            async with aclosing(sched.log_iter(app_id, "r", should_tail=True)) as it:
                await anext(it)
        peak = 0
        for _ in range(20):  # chatty replicas keep writing: the most seen
            peak = max(peak, _nfds())
            await anyio.sleep(0.05)
    finally:
        for app_id in ids:
            await sched.cancel(app_id)
        for app_id in ids:
            await sched.wait(app_id, timeout=60)
    return (peak - before) / replicas


async def _chatty_throughput(
    sched: LocalScheduler, writers: int, lines: int, log_dir: str
) -> dict[str, Any]:
    code = WRITER.format(lines=lines)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    ids = [await sched.submit(_app(code), {"log_dir": log_dir}) for _ in range(writers)]
    for app_id in ids:
        desc = await sched.wait(app_id, timeout=600)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
    wall = time.perf_counter() - start
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
    got = 0
    async for _ in sched.log_iter(ids[0], "r"):
        got += 1
    assert got == 2 * lines, f"{got} lines, {2 * lines} written"
    return {"wall_s": round(wall, 2), "supervisor_cpu_s": round(cpu, 2)}


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-fds-") as log_dir:
        async with LocalScheduler("bench-fds", cancel_grace=2.0) as sched:
            # a first app starts what the scheduler keeps (spawner, guardian...)
            warm = await sched.submit(_app("pass"), {"log_dir": log_dir})
            await sched.wait(warm, timeout=60)
            out["fds_per_quiet_replica"] = round(
                await _fds_per_replica(sched, QUIET, args.replicas, log_dir), 2
            )
            out["fds_per_chatty_replica"] = round(
                await _fds_per_replica(sched, CHATTY, args.replicas, log_dir), 2
            )
            out["chatty_throughput"] = await _chatty_throughput(
                sched, args.writers, args.lines, log_dir
            )
            out["max_running_replicas"] = sched.max_running_replicas
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=50, help="running at once")
    parser.add_argument("--writers", type=int, default=20, help="chatty replicas")
    parser.add_argument("--lines", type=int, default=20000, help="lines per stream")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    result = anyio.run(_main, args)
    w = result["chatty_throughput"]
    print("| measure | value |\n|---|---|")
    print(
        f"| fds per quiet replica ({args.replicas}) | {result['fds_per_quiet_replica']} |"
    )
    print(
        f"| fds per chatty replica ({args.replicas}) | {result['fds_per_chatty_replica']} |"
    )
    print(
        f"| chatty: {args.writers} x {args.lines} x 2 lines, wall | {w['wall_s']} s |"
    )
    print(f"| chatty: supervisor CPU | {w['supervisor_cpu_s']} s |")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
