"""Fan-out benchmark of the local backend against the raw floor and TorchX 0.7.0.

Runs N apps of ``true`` and N apps of ``sleep 1`` (each submitted and awaited,
all concurrently) through three variants, each in a fresh child process:

* ``raw``: the floor -- ``asyncio.create_subprocess_exec`` of the same command,
  stdout/stderr to files in a temp dir, all N concurrently, each awaited;
* ``asyncsched``: ``get_scheduler("local_cwd")``, one task group submitting
  every app and awaiting it with ``wait`` (log_dir in a temp dir);
* ``torchx``: TorchX 0.7.0's ``local_cwd`` scheduler -- ``submit`` N apps, then
  poll ``describe`` of every unfinished app until all are terminal (what its
  synchronous Runner does), skipped when TorchX is not installed.

With ``--fast-path`` it measures what one app costs: N x ``true`` through the
raw floor, sequential and concurrent submits and ``run_many``, with worker-thread
hops and event-loop CPU per app (see ``_local_fast_path.py``).

With ``--log`` it measures ``log_iter`` instead: a followed ``log_iter``
(``should_tail=True``) and one over the finished log, beside a plain read of
the same file, with the issue's target of at least half the plain read's
lines per second (the variants of ``log_throughput.py``).

With ``--scale 100,1000,10000`` it instead records the scale curve: N apps
through ``Runner.run_many`` + ``wait_all`` beside a raw ``anyio.open_process``
loop with the same concurrency (see ``_local_scale.py``).

Then a concurrency check runs ``--concurrency-check`` (default 1000) concurrent
``sleep 1`` apps through asyncsched (and the raw floor) for peak RSS.

Each child reports wall time, its own peak RSS (VmHWM) and, for the asyncio
variants, event-loop lag while supervising; the parent prints markdown tables
with ratios and the targets.

Usage:
    python benchmarks/local_fanout.py [-n 200] [--concurrency-check 1000]
        [--skip-torchx] [--json results.json] [--repeat 1]
    python benchmarks/local_fanout.py --scale 100,1000,10000 [--workloads true]
    python benchmarks/local_fanout.py --fast-path [-n 200] [--repeat 5]
    python benchmarks/local_fanout.py --log [--log-mib 32] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from subprocess import SubprocessError
from typing import Any

from _harness import (
    CpuMeter,
    LoopLagSampler,
    Measurement,
    Ratio,
    Target,
    current_rss_bytes,
    emit,
    machine_info,
    raise_nofile_limit,
    ratio_table,
    results_table,
    run_child,
    source_state,
    targets_table,
)
from _local_fast_path import (
    FAST_VARIANTS,
    fast_path_table,
    run_fast_child,
    run_raw_app,
)
from _local_scale import SCALE_VARIANTS, run_scale_child, scale_table

WORKLOADS: dict[str, list[str]] = {
    "true": ["true"],
    "sleep 1": ["sleep", "1"],
}
VARIANTS = ("raw", "asyncsched", "torchx")
LABELS = {
    "raw": "raw floor (asyncio subprocess)",
    "asyncsched": "asyncsched {scheduler}",
    "torchx": "TorchX 0.7.0 local_cwd",
}

# Targets from the issue.
MAX_FLOOR_RATIO = 3.0
MIN_TORCHX_SPEEDUP = 20.0
MAX_LAG_P99_MS = 20.0
MAX_CONCURRENT_RSS_MB = 150.0


# -- children ------------------------------------------------------------------


async def _idle_lag_p99() -> float | None:
    """Lag of an idle loop for a moment: the machine's own noise floor."""
    async with LoopLagSampler() as idle:
        await asyncio.sleep(0.25)
    return idle.p99_ms


async def _run_raw(cmd: list[str], n: int, tmp: Path) -> Measurement:
    rss_before = current_rss_bytes()
    idle_p99 = await _idle_lag_p99()

    async with LoopLagSampler() as lag:
        with CpuMeter() as cpu:
            started = time.perf_counter()
            async with asyncio.TaskGroup() as tg:
                tasks = [tg.create_task(run_raw_app(cmd, tmp, i)) for i in range(n)]
            wall = time.perf_counter() - started
    ok = sum(t.result() == 0 for t in tasks)
    result = Measurement("raw", "", n, wall, lag.max_ms, lag.p99_ms, succeeded=ok)
    result.extra["lag_samples"] = len(lag.samples)
    result.extra["idle_lag_p99_ms"] = idle_p99
    return result.finish(rss_before, cpu)


async def _run_asyncsched(
    cmd: list[str], n: int, tmp: Path, scheduler: str
) -> Measurement:
    from asyncsched.schedulers import get_scheduler
    from asyncsched.schedulers.api import Scheduler
    from asyncsched.specs import AppDef, AppState, CfgVal, Role

    # Keep the backend's app index (pointer files) out of the user's state dir.
    os.environ["ASYNCSCHED_STATE_DIR"] = str(tmp / "state")
    sched: Scheduler[Any]
    if scheduler == "inmemory":  # harness self-test without processes
        from asyncsched.testing import InMemoryScheduler

        sched = InMemoryScheduler("bench")
    else:
        # like the TorchX variant: room for every app in flight
        sched = get_scheduler(scheduler, session_name="bench", cache_size=max(n, 100))
    cfg: dict[str, CfgVal] = {}
    if sched.run_opts().get("log_dir") is not None:
        cfg["log_dir"] = str(tmp)
    rss_before = current_rss_bytes()

    async def one() -> bool:
        role = Role("r", image="-", entrypoint=cmd[0], args=cmd[1:])
        app_id = await sched.submit(AppDef("bench", roles=[role]), cfg)
        desc = await sched.wait(app_id)
        return desc is not None and desc.state == AppState.SUCCEEDED

    async with sched:
        idle_p99 = await _idle_lag_p99()
        async with LoopLagSampler() as lag:
            with CpuMeter() as cpu:
                started = time.perf_counter()
                async with asyncio.TaskGroup() as tg:
                    tasks = [tg.create_task(one()) for _ in range(n)]
                wall = time.perf_counter() - started
        closing = time.perf_counter()
    close_s = time.perf_counter() - closing
    ok = sum(t.result() for t in tasks)
    result = Measurement(
        "asyncsched",
        "",
        n,
        wall,
        lag.max_ms,
        lag.p99_ms,
        succeeded=ok,
        extra={
            "close_s": close_s,
            "scheduler": scheduler,
            "lag_samples": len(lag.samples),
            "idle_lag_p99_ms": idle_p99,
        },
    )
    return result.finish(rss_before, cpu)


def _torchx_role(role_cls: Any, cmd: list[str]) -> Any:
    return role_cls("r", image="-", entrypoint=cmd[0], args=cmd[1:])


def _torchx_poll(
    sched: Any, app_ids: list[str], interval: float, states: Any, is_terminal: Any
) -> tuple[int, int]:
    """Describe every unfinished app, sleep, repeat; return (succeeded, rounds)."""
    pending = app_ids
    ok = rounds = 0
    while pending:
        unfinished: list[str] = []
        for app_id in pending:
            desc = sched.describe(app_id)
            if desc is None:
                continue
            if is_terminal(desc.state):
                ok += desc.state == states.SUCCEEDED
            else:
                unfinished.append(app_id)
        pending = unfinished
        if pending:
            rounds += 1
            time.sleep(interval)
    return ok, rounds


def _run_torchx(cmd: list[str], n: int, tmp: Path, poll_interval: float) -> Measurement:
    # TorchX has no type hints; everything from it is Any.
    from torchx.schedulers.local_scheduler import create_scheduler
    from torchx.specs import AppDef, AppState, Role, is_terminal

    # The default cache (100 apps) raises IndexError when N unfinished apps
    # are in flight, so size it to N.
    sched = create_scheduler("bench", cache_size=max(n, 100))
    cfg = {"log_dir": str(tmp)}
    rss_before = current_rss_bytes()

    with CpuMeter() as cpu:
        started = time.perf_counter()
        app_ids = [
            sched.submit(AppDef("bench", roles=[_torchx_role(Role, cmd)]), cfg)
            for _ in range(n)
        ]
        submitted = time.perf_counter() - started
        ok, polls = _torchx_poll(sched, app_ids, poll_interval, AppState, is_terminal)
        wall = time.perf_counter() - started
    closing = time.perf_counter()
    sched.close()
    close_s = time.perf_counter() - closing
    result = Measurement(
        "torchx",
        "",
        n,
        wall,
        succeeded=ok,
        extra={
            "submit_all_s": submitted,
            "sleeps_between_polls": polls,
            "poll_interval_s": poll_interval,
            "close_s": close_s,
        },
    )
    return result.finish(rss_before, cpu)


def child_main(args: argparse.Namespace) -> int:
    """Run one variant on one workload in this (fresh) process and emit it."""
    nofile = raise_nofile_limit()
    cmd = WORKLOADS[args.workload]
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-{args.child}-"))
    try:
        if args.child in FAST_VARIANTS:
            result = run_fast_child(args.child, cmd, args.num_apps, tmp)
        elif args.child in SCALE_VARIANTS:
            result = run_scale_child(
                args.child, cmd, args.num_apps, tmp, gc_freeze=args.gc_freeze
            )
        elif args.child == "raw":
            result = asyncio.run(_run_raw(cmd, args.num_apps, tmp))
        elif args.child == "asyncsched":
            result = asyncio.run(
                _run_asyncsched(cmd, args.num_apps, tmp, args.scheduler)
            )
        else:
            result = _run_torchx(cmd, args.num_apps, tmp, args.torchx_poll_interval)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result.workload = args.workload
    result.extra["nofile_limit"] = nofile
    emit(result)
    return 0


# -- orchestration -------------------------------------------------------------


def _child_cmd(
    args: argparse.Namespace, variant: str, workload: str, n: int
) -> list[str]:
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        variant,
        "--workload",
        workload,
        "--num-apps",
        str(n),
        "--scheduler",
        args.scheduler,
        "--torchx-poll-interval",
        str(args.torchx_poll_interval),
        *(["--gc-freeze"] if args.gc_freeze else []),
    ]


def _median_run(runs: list[Measurement]) -> Measurement:
    """The run with the median wall time; all wall times go into ``extra``."""
    ordered = sorted(runs, key=lambda m: m.wall_s)
    chosen = ordered[(len(ordered) - 1) // 2]
    if len(runs) > 1:
        chosen.extra["wall_s_runs"] = ",".join(f"{m.wall_s:.3f}" for m in runs)
        chosen.extra["wall_s_median"] = statistics.median(m.wall_s for m in runs)
    return chosen


def _find(
    results: Sequence[Measurement], variant: str, workload: str, n: int
) -> Measurement | None:
    for m in results:
        if (m.variant, m.workload, m.apps) == (variant, workload, n):
            return m
    return None


def _ratio(a: Measurement | None, b: Measurement | None) -> float | None:
    if a is None or b is None or b.wall_s == 0:
        return None
    return a.wall_s / b.wall_s


def build_targets(
    results: Sequence[Measurement], n: int, concurrency: int
) -> list[Target]:
    """The issue's targets, evaluated on the measurements."""
    targets: list[Target] = []
    for workload in WORKLOADS:
        ours = _find(results, "asyncsched", workload, n)
        raw = _find(results, "raw", workload, n)
        targets.append(
            Target(
                f"wall, asyncsched / raw floor, {n} x `{workload}`",
                _ratio(ours, raw),
                MAX_FLOOR_RATIO,
                "<=",
                "x",
            )
        )
    targets.append(
        Target(
            f"wall, TorchX / asyncsched, {n} x `true`",
            _ratio(
                _find(results, "torchx", "true", n),
                _find(results, "asyncsched", "true", n),
            ),
            MIN_TORCHX_SPEEDUP,
            ">=",
            "x",
        )
    )
    targets.extend(
        Target(
            f"loop lag p99, asyncsched, {m.apps} x `{m.workload}`",
            m.lag_p99_ms,
            MAX_LAG_P99_MS,
            "<",
            "ms",
        )
        for m in results
        if m.variant == "asyncsched"
    )
    if concurrency > 0:
        big = _find(results, "asyncsched", "sleep 1", concurrency)
        targets.append(
            Target(
                f"peak RSS, asyncsched, {concurrency} concurrent `sleep 1`",
                None if big is None else big.peak_rss_mb,
                MAX_CONCURRENT_RSS_MB,
                "<",
                "MB",
            )
        )
    return targets


def orchestrate_scale(args: argparse.Namespace) -> int:
    """The scale curve: each N and workload, raw floor and runner, one child each."""
    sizes = [int(n) for n in args.scale.split(",") if n.strip()]
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    load_before = machine_info()["loadavg_1m"]
    results: list[Measurement] = []
    failures: list[str] = []
    for workload in workloads:
        for n in sizes:
            for variant in SCALE_VARIANTS:
                what = f"{variant} {n} x {workload!r}"
                print(f"running {what} ...", file=sys.stderr, flush=True)
                try:
                    m = run_child(_child_cmd(args, variant, workload, n), timeout=1800)
                except (RuntimeError, OSError, ValueError, SubprocessError) as exc:
                    failures.append(f"{what}: {exc}")
                    print(f"  FAILED: {exc}", file=sys.stderr, flush=True)
                    continue
                m.workload = workload
                print(
                    f"  wall {m.wall_s:.2f} s, peak RSS {m.peak_rss_mb:.1f} MB, "
                    f"lag max {m.lag_max_ms or 0:.1f} ms, "
                    f"max fds {m.extra.get('max_open_fds')}, "
                    f"{m.succeeded}/{m.apps} succeeded",
                    file=sys.stderr,
                    flush=True,
                )
                results.append(m)
    machine = machine_info()
    print(
        f"\nMachine: {machine['cpu_model']}, {machine['usable_cpus']} usable CPUs, "
        f"{machine['mem_total_mb']} MB RAM, Python {machine['python']}; "
        f"{machine['date']}; 1-minute load average {load_before} before, "
        f"{machine['loadavg_1m']} after."
    )
    print("\n" + scale_table(results))
    for failure in failures:
        print(f"\nFAILED: {failure}")
    if args.json:
        payload = {
            "machine": {**machine, "loadavg_1m_before": load_before},
            "results": [m.to_json() for m in results],
            "failures": failures,
        }
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n")
    return 1 if failures else 0


def orchestrate_fast_path(args: argparse.Namespace) -> int:
    """The fast path: floor, sequential and concurrent submits, run_many, side
    by side, interleaved ``--repeat`` times (medians; ratios paired by run)."""
    load_before = machine_info()["loadavg_1m"]
    runs: dict[str, list[Measurement]] = {}
    failures: list[str] = []
    for rep in range(args.repeat):
        for variant in FAST_VARIANTS:
            what = f"{variant} {args.num_apps} x 'true' (run {rep + 1}/{args.repeat})"
            print(f"running {what} ...", file=sys.stderr, flush=True)
            try:
                m = run_child(_child_cmd(args, variant, "true", args.num_apps))
            except (RuntimeError, OSError, ValueError, SubprocessError) as exc:
                failures.append(f"{what}: {exc}")
                continue
            print(f"  wall {m.wall_s:.3f} s", file=sys.stderr, flush=True)
            runs.setdefault(variant, []).append(m)
    machine = machine_info()
    source = source_state(Path(__file__).resolve().parent.parent, "asyncsched")
    print(
        f"\nMachine: {machine['cpu_model']}, {machine['usable_cpus']} usable CPUs,"
        f" Python {machine['python']}; {machine['date']}; 1-minute load average"
        f" {load_before} before, {machine['loadavg_1m']} after; commit"
        f" {source['commit']}. Medians of {args.repeat} interleaved runs.\n"
    )
    print(fast_path_table(runs))
    for failure in failures:
        print(f"\nFAILED: {failure}")
    if args.json:
        payload = {
            "machine": {**machine, "loadavg_1m_before": load_before},
            "source": source,
            "runs": {v: [m.to_json() for m in ms] for v, ms in runs.items()},
            "failures": failures,
        }
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n")
    return 1 if failures else 0


#: the issue's target for ``log_iter`` against a plain read of the same file
LOG_MIN_RATIO = 0.5


def orchestrate_log(args: argparse.Namespace) -> int:
    """``log_iter``, followed and finished, beside a plain read of the same file."""
    import log_throughput

    load_before = machine_info()["loadavg_1m"]
    with tempfile.TemporaryDirectory(prefix="asyncsched-bench-logs-") as tmp:
        os.environ.setdefault("ASYNCSCHED_STATE_DIR", os.path.join(tmp, "state"))
        rows = asyncio.run(log_throughput.measure(args.log_mib, 80, args.repeat, tmp))
    by = {r.variant: r for r in rows}
    plain = by["plain read"].lines_per_s
    goals = [
        Target(
            f"log_iter ({kind}) lines/s vs plain read",
            by[f"log_iter ({kind})"].lines_per_s / plain,
            LOG_MIN_RATIO,
            ">=",
            "x",
        )
        for kind in ("followed", "finished")
    ]
    machine = machine_info()
    source = source_state(Path(__file__).resolve().parent.parent, "asyncsched")
    print(
        f"\nMachine: {machine['cpu_model']}, {machine['usable_cpus']} usable CPUs,"
        f" Python {machine['python']}; {machine['date']}; 1-minute load average"
        f" {load_before} before, {machine['loadavg_1m']} after; commit"
        f" {source['commit']}. Best of {args.repeat} interleaved runs,"
        f" {args.log_mib} MiB of 80-byte lines.\n"
    )
    print(log_throughput.table(rows))
    print()
    print(targets_table(goals))
    ceiling = log_throughput.followed_ceiling(rows)
    if ceiling is not None:
        print(
            "\nCeiling of a followed read in the supervising process (the"
            " supervisor's copy of the pipe, CPU of the no-reader run, plus one"
            " async-generator step per line, both on the one loop):"
            f" {ceiling:.2f}x a plain read"
        )
    return 0


def orchestrate(args: argparse.Namespace) -> int:
    """Run every variant in its own child process and print the tables."""
    if args.log:
        return orchestrate_log(args)
    if args.scale:
        return orchestrate_scale(args)
    if args.fast_path:
        return orchestrate_fast_path(args)
    variants = list(VARIANTS)
    torchx_note = ""
    if args.skip_torchx:
        variants.remove("torchx")
        torchx_note = "TorchX skipped (--skip-torchx)."
    elif importlib.util.find_spec("torchx") is None:
        variants.remove("torchx")
        torchx_note = "TorchX not installed (pip install torchx==0.7.0); skipped."
    plan = [(v, w, args.num_apps) for w in WORKLOADS for v in variants]
    if args.concurrency_check > 0:
        plan += [
            ("raw", "sleep 1", args.concurrency_check),
            ("asyncsched", "sleep 1", args.concurrency_check),
        ]

    load_before = machine_info()["loadavg_1m"]
    runs: dict[tuple[str, str, int], list[Measurement]] = {}
    failures: list[str] = []
    for rep in range(args.repeat):
        for variant, workload, n in plan:
            what = f"{variant} {n} x {workload!r} (run {rep + 1}/{args.repeat})"
            print(f"running {what} ...", file=sys.stderr, flush=True)
            try:
                m = run_child(_child_cmd(args, variant, workload, n))
            except (RuntimeError, OSError, ValueError, SubprocessError) as exc:
                failures.append(f"{what}: {exc}")
                print(f"  FAILED: {exc}", file=sys.stderr, flush=True)
                continue
            print(
                f"  wall {m.wall_s:.3f} s, peak RSS {m.peak_rss_mb:.1f} MB, "
                f"{m.succeeded}/{m.apps} succeeded",
                file=sys.stderr,
                flush=True,
            )
            runs.setdefault((variant, workload, n), []).append(m)
    results = [_median_run(runs[key]) for key in plan if key in runs]
    targets = build_targets(results, args.num_apps, args.concurrency_check)
    ratios = [
        Ratio("asyncsched / raw floor", "asyncsched", "raw"),
        Ratio("TorchX / asyncsched", "torchx", "asyncsched"),
        Ratio("TorchX / raw floor", "torchx", "raw"),
    ]
    machine = machine_info()
    source = source_state(Path(__file__).resolve().parent.parent, "asyncsched")

    print(
        f"\nMachine: {machine['cpu_model']}, {machine['usable_cpus']} usable CPUs, "
        f"{machine['mem_total_mb']} MB RAM, Python {machine['python']}, "
        f"{machine['platform']}; {machine['date']}; 1-minute load average "
        f"{load_before} before, {machine['loadavg_1m']} after."
    )
    print(
        f"asyncsched at commit {source['commit']}, sources sha256 "
        f"{source['sources_sha256']} (includes uncommitted edits)."
    )
    if args.repeat > 1:
        print(f"Each row is the median-wall run of {args.repeat}.")
    if torchx_note:
        print(torchx_note)
    idle = [
        v
        for m in results
        if isinstance(v := m.extra.get("idle_lag_p99_ms"), float | int)
    ]
    if idle:
        print(
            f"Idle-loop lag p99 just before each asyncio workload (machine noise): "
            f"{min(idle):.1f}-{max(idle):.1f} ms."
        )
    labels = {k: v.format(scheduler=args.scheduler) for k, v in LABELS.items()}
    print("\n" + results_table(results, labels))
    print("\nWall-time ratios:\n\n" + ratio_table(results, ratios))
    print("\nTargets:\n\n" + targets_table(targets))
    for failure in failures:
        print(f"\nFAILED: {failure}")

    if args.json:
        payload = {
            "machine": {**machine, "loadavg_1m_before": load_before},
            "source": source,
            "args": {k: v for k, v in vars(args).items() if k != "child"},
            "results": [m.to_json() for m in results],
            "targets": [t.to_json() for t in targets],
            "failures": failures,
        }
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n")
    return 1 if failures else 0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument(
        "-n", "--num-apps", type=int, default=200, help="apps per workload (200)"
    )
    parser.add_argument(
        "--concurrency-check",
        type=int,
        default=1000,
        metavar="N",
        help="N concurrent `sleep 1` apps through asyncsched for peak RSS "
        "(default 1000; 0 disables)",
    )
    parser.add_argument("--skip-torchx", action="store_true", help="skip TorchX")
    parser.add_argument("--json", metavar="PATH", help="write raw results as JSON")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run every variant this many times and report the median (1)",
    )
    parser.add_argument(
        "--torchx-poll-interval",
        type=float,
        default=0.1,
        metavar="S",
        help="seconds between TorchX describe rounds (0.1; its CLI uses 1)",
    )
    parser.add_argument(
        "--scheduler",
        default="local_cwd",
        help="asyncsched scheduler to measure (local_cwd; 'inmemory' self-tests "
        "the harness)",
    )
    parser.add_argument(
        "--scale",
        metavar="N,N,...",
        help="record the scale curve instead: e.g. 100,1000,10000 apps through "
        "Runner.run_many + wait_all beside a raw anyio.open_process loop with the "
        "same concurrency",
    )
    parser.add_argument(
        "--workloads",
        default="true,sleep 1",
        help="workloads of --scale, comma-separated ('true,sleep 1')",
    )
    parser.add_argument(
        "--gc-freeze",
        action="store_true",
        help="with --scale: gc.freeze() before and after run_many (docs/benchmarks.md)",
    )
    parser.add_argument(
        "--fast-path",
        action="store_true",
        help="measure the fast path instead: N x `true` through the raw floor,"
        " sequential and concurrent submits and run_many, with thread hops and"
        " loop CPU per app",
    )
    parser.add_argument(
        "--log",
        action="store_true",
        help="measure log_iter instead: followed and over a finished log, beside"
        " a plain read of the same file",
    )
    parser.add_argument(
        "--log-mib", type=int, default=32, help="MiB the --log replica writes (32)"
    )
    parser.add_argument(
        "--child",
        choices=VARIANTS + SCALE_VARIANTS + FAST_VARIANTS,
        help=argparse.SUPPRESS,
    )
    parser.add_argument(
        "--workload", choices=list(WORKLOADS), default="true", help=argparse.SUPPRESS
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return child_main(args)
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
