"""The scale curve of ``local_fanout.py --scale``: N apps from one process.

For each N (e.g. 100, 1,000, 10,000) and each workload (``true``, ``sleep 1``)
two variants run, each in a fresh child process:

* ``raw_bounded``: the floor -- an ``anyio.open_process`` loop doing the same N
  spawns with the same concurrency as the scheduler (a semaphore), stdout and
  stderr to files, each process awaited;
* ``runner``: ``Runner.run_many`` of N apps on ``local_cwd`` with the default
  parameters (no semaphore of the caller's: the scheduler's
  ``max_running_replicas`` paces the submits), then ``wait_all``;
* ``runner_deferred_gc``: the same inside ``defer_full_gc()`` (CPython's full
  collections postponed until the fan-out is over).

Each child reports wall time, peak RSS, the worst event-loop lag and the most
file descriptors it had open at once (sampled every 20 ms). To tell a loop
that our code blocks from a loop thread that merely waits for a CPU (on a
shared machine), the runner child also records the most CPU time the loop
thread spent in one callback (its own thread clock, not wall time) and the
pauses of CPython's full (generation 2) garbage collections (wall time, and the
collecting thread's CPU time, which waiting for a CPU does not inflate). With
``gc_freeze`` the child calls ``gc.freeze()`` before ``run_many`` (the apps
are built) and once it returned, and keeps it: ``run_many`` and ``wait_all``
then leave the heap as it is (by default they freeze it themselves for
their duration only).
"""

from __future__ import annotations

import asyncio
import asyncio.events
import gc
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import anyio
from _harness import (
    CpuMeter,
    LoopLagSampler,
    Measurement,
    current_rss_bytes,
)

__all__ = ["SCALE_VARIANTS", "run_scale_child", "scale_table"]

SCALE_VARIANTS = ("raw_bounded", "runner", "runner_deferred_gc")

#: the issue's targets at 10,000 apps
MAX_FLOOR_RATIO = 2.0
MAX_RSS_MB = 300.0
MAX_LAG_MS = 50.0


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


class _FdPeak:
    def __init__(self) -> None:
        self.peak = _open_fds()

    async def run(self) -> None:
        while True:
            self.peak = max(self.peak, _open_fds())
            await asyncio.sleep(0.02)


def _concurrency() -> int:
    from asyncsched.schedulers.local._capacity import default_max_running_replicas

    return default_max_running_replicas()


_Timed = tuple[float, int, LoopLagSampler, CpuMeter]


class LoopAttribution:
    """Where the loop thread's time goes: its CPU per callback, full GC pauses.

    While active, every event-loop callback is timed on the loop thread's own
    CPU clock (``pthread_getcpuclockid``): a callback that took 300 ms of wall
    time but 2 ms of CPU waited for a CPU (or for the GIL), it did not block
    the loop itself. Generation-2 collections are timed by ``gc.callbacks``.
    """

    def __init__(self) -> None:
        self.callback_cpu_max = 0.0
        self.callback_cpu_max_no_gc = 0.0
        self.callbacks_over_20ms_cpu = 0
        self.callbacks_over_50ms_wall = 0
        self.gen2_pauses: list[float] = []
        #: the same pauses on the collecting thread's CPU clock (load-independent)
        self.gen2_cpu: list[float] = []
        self._gc_started = 0.0
        self._gc_cpu_started = 0.0
        self._full_gc_ran = False

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._gc_started = time.perf_counter()
            self._gc_cpu_started = time.thread_time()
            self._full_gc_ran = True
        else:
            self.gen2_pauses.append(time.perf_counter() - self._gc_started)
            self.gen2_cpu.append(time.thread_time() - self._gc_cpu_started)

    @contextmanager
    def active(self) -> Iterator[None]:
        clock = time.pthread_getcpuclockid(threading.get_ident())
        original: Callable[[asyncio.events.Handle], None] = asyncio.events.Handle._run

        def timed(handle: asyncio.events.Handle) -> None:
            wall = time.perf_counter()
            cpu = time.clock_gettime(clock)
            self._full_gc_ran = False
            try:
                original(handle)
            finally:
                cpu = time.clock_gettime(clock) - cpu
                wall = time.perf_counter() - wall
                self.callback_cpu_max = max(self.callback_cpu_max, cpu)
                if not self._full_gc_ran:
                    self.callback_cpu_max_no_gc = max(self.callback_cpu_max_no_gc, cpu)
                self.callbacks_over_20ms_cpu += cpu > 0.02
                self.callbacks_over_50ms_wall += wall > 0.05

        asyncio.events.Handle._run = timed  # type: ignore[method-assign,assignment]
        gc.callbacks.append(self._on_gc)
        try:
            yield
        finally:
            asyncio.events.Handle._run = original  # type: ignore[method-assign,assignment]
            gc.callbacks.remove(self._on_gc)

    def extra(self) -> dict[str, float | int]:
        return {
            "loop_callback_cpu_max_ms": self.callback_cpu_max * 1000.0,
            "loop_callback_cpu_max_no_full_gc_ms": self.callback_cpu_max_no_gc * 1000,
            "loop_callbacks_over_20ms_cpu": self.callbacks_over_20ms_cpu,
            "loop_callbacks_over_50ms_wall": self.callbacks_over_50ms_wall,
            "gc_gen2_collections": len(self.gen2_pauses),
            "gc_gen2_pause_max_ms": max(self.gen2_pauses, default=0.0) * 1000.0,
            "gc_gen2_cpu_max_ms": max(self.gen2_cpu, default=0.0) * 1000.0,
        }


async def _raw(cmd: list[str], n: int, tmp: Path) -> _Timed:
    limit = anyio.Semaphore(_concurrency())
    ok = 0

    async def one(i: int) -> None:
        nonlocal ok
        async with limit:
            with (
                open(tmp / f"{i}.stdout.log", "wb") as out,
                open(tmp / f"{i}.stderr.log", "wb") as err,
            ):
                proc = await anyio.open_process(cmd, stdout=out, stderr=err)
                async with proc:
                    returncode = await proc.wait()
            ok += returncode == 0

    async with LoopLagSampler() as lag:
        with CpuMeter() as cpu:
            started = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for i in range(n):
                    tg.start_soon(one, i)
            wall = time.perf_counter() - started
    return wall, ok, lag, cpu


async def _runner(
    cmd: list[str],
    n: int,
    tmp: Path,
    attribution: LoopAttribution,
    gc_freeze: bool,
    defer_gc: bool,
) -> _Timed:
    from asyncsched.runner import Runner, defer_full_gc
    from asyncsched.specs import AppDef, AppState, Role

    params = {"state_dir": str(tmp / "state"), "retention": None}
    apps = [
        AppDef(f"a{i}", roles=[Role("r", image="-", entrypoint=cmd[0], args=cmd[1:])])
        for i in range(n)
    ]
    cfg = {"log_dir": str(tmp)}
    async with Runner("bench", scheduler_params=params) as runner:
        # warm up (imports, the scheduler's threads and guardian): not timed
        await runner.wait(
            await runner.run(AppDef("w", roles=apps[0].roles), "local_cwd", cfg)
        )
        async with LoopLagSampler() as lag:
            if gc_freeze:
                gc.freeze()  # the app definitions built above, the imports
            deferred = defer_full_gc() if defer_gc else nullcontext()
            with CpuMeter() as cpu, attribution.active(), deferred:
                started = time.perf_counter()
                handles = await runner.run_many(apps, "local_cwd", cfg)
                if gc_freeze:
                    gc.freeze()
                results = await runner.wait_all(handles)
                wall = time.perf_counter() - started
    ok = sum(s is not None and s.state == AppState.SUCCEEDED for s in results.values())
    return wall, ok, lag, cpu


async def _measure(
    variant: str, cmd: list[str], n: int, tmp: Path, gc_freeze: bool
) -> Measurement:
    rss_before = current_rss_bytes()
    fds = _FdPeak()
    sampler = asyncio.create_task(fds.run())
    attribution = LoopAttribution()
    try:
        if variant == "raw_bounded":
            wall, ok, lag, cpu = await _raw(cmd, n, tmp)
        else:
            wall, ok, lag, cpu = await _runner(
                cmd, n, tmp, attribution, gc_freeze, variant == "runner_deferred_gc"
            )
    finally:
        sampler.cancel()
    result = Measurement(variant, "", n, wall, lag.max_ms, lag.p99_ms, succeeded=ok)
    result.extra["max_open_fds"] = fds.peak
    if variant != "raw_bounded":
        result.extra.update(attribution.extra())
        result.extra["gc_freeze"] = gc_freeze
    result.extra["concurrency"] = _concurrency()
    return result.finish(rss_before, cpu)


def run_scale_child(
    variant: str, cmd: list[str], n: int, tmp: Path, gc_freeze: bool = False
) -> Measurement:
    """Run one scale variant in this process (asyncio) and return its result."""
    return asyncio.run(_measure(variant, cmd, n, tmp, gc_freeze))


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def scale_table(results: list[Measurement]) -> str:
    """One markdown row per (workload, N): the runner beside the bounded floor."""
    header = [
        "workload",
        "apps",
        "variant",
        "concurrency",
        "raw floor (s)",
        "asyncsched (s)",
        "ratio",
        "peak RSS (MB)",
        "loop lag max (ms)",
        "loop lag p99 (ms)",
        "worst callback CPU (ms)",
        "same, no full GC in it (ms)",
        "full GCs / max pause (ms) / its max CPU (ms)",
        "max open fds",
        "raw max open fds",
        "succeeded",
    ]
    rows = []
    keys = sorted(
        {(m.workload, m.apps) for m in results}, key=lambda k: (k[0] != "true", k[1])
    )
    for (workload, n), variant in (
        (key, v) for key in keys for v in SCALE_VARIANTS if v != "raw_bounded"
    ):
        raw = next(
            (
                m
                for m in results
                if (m.variant, m.workload, m.apps) == ("raw_bounded", workload, n)
            ),
            None,
        )
        ours = next(
            (
                m
                for m in results
                if (m.variant, m.workload, m.apps) == (variant, workload, n)
            ),
            None,
        )
        if ours is None and variant != "runner":
            continue
        ratio = ours.wall_s / raw.wall_s if ours and raw and raw.wall_s else None
        either = ours or raw
        rows.append(
            [
                workload,
                str(n),
                variant,
                _fmt(either.extra.get("concurrency") if either else None),
                _fmt(raw.wall_s if raw else None, 2),
                _fmt(ours.wall_s if ours else None, 2),
                _fmt(ratio, 2),
                _fmt(ours.peak_rss_mb if ours else None),
                _fmt(ours.lag_max_ms if ours else None),
                _fmt(ours.lag_p99_ms if ours else None),
                _fmt(ours.extra.get("loop_callback_cpu_max_ms") if ours else None),
                _fmt(
                    ours.extra.get("loop_callback_cpu_max_no_full_gc_ms")
                    if ours
                    else None
                ),
                (
                    f"{ours.extra.get('gc_gen2_collections')} / "
                    f"{_fmt(ours.extra.get('gc_gen2_pause_max_ms'))} / "
                    f"{_fmt(ours.extra.get('gc_gen2_cpu_max_ms'))}"
                    if ours
                    else "n/a"
                ),
                _fmt(ours.extra.get("max_open_fds") if ours else None),
                _fmt(raw.extra.get("max_open_fds") if raw else None),
                f"{ours.succeeded}/{n}" if ours else "n/a",
            ]
        )
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return "\n".join(lines)
