"""The fast path of ``local_fanout.py --fast-path``: what one app costs.

N apps of ``true`` (default 200), each variant in a fresh child process,
repeated and interleaved (A B C ... A B C) so that a drifting machine moves
every variant alike:

* ``raw_seq`` / ``raw_conc``: the floor -- ``asyncio.create_subprocess_exec``
  of the same command, stdout/stderr to two files, awaited one after the other
  (``seq``) or all at once (``conc``);
* ``files_seq`` / ``files_conc``: the floor plus the files asyncsched keeps
  for an app, written the way it writes them, in one worker-thread job before
  the spawn and one after the exit: TorchX's layout (app, role and replica
  dirs; ``stdout.log`` and ``stderr.log``, which the process writes, and
  ``combined.log``; ``SUCCESS``), the app record another process reads
  (``app.json``, written at submit and at the end) and its index entry in the
  state dir, each JSON file by asyncsched's own ``write_json_atomic``
  (a temp file and a rename). What is left
  between this and ``sched_*`` is the scheduler's own cost;
* ``sched_seq`` / ``sched_conc``: ``LocalScheduler.submit`` + ``wait`` the
  same way;
* ``run_many``: ``Runner.run_many`` + ``wait_all`` of the N apps.

Each asyncsched child also counts its worker-thread hops (``anyio.to_thread``
calls and spawner-thread jobs: the benchmark wraps both) by kind -- spawner
jobs (which also write an app's first record), the record writer's own hops,
exit-fact reads (which also write the final record of an app that ends as its
exit code says) -- and the CPU time of the event-loop thread alone
(``time.thread_time`` in the loop). Printed per app.
"""

from __future__ import annotations

import asyncio
import functools
import os
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from _harness import CpuMeter, LoopLagSampler, Measurement, current_rss_bytes

__all__ = ["FAST_VARIANTS", "fast_path_table", "run_fast_child", "run_raw_app"]

FAST_VARIANTS = (
    "raw_seq",
    "raw_conc",
    "files_seq",
    "files_conc",
    "sched_seq",
    "sched_conc",
    "run_many",
)
_FLOOR = {
    "files_seq": "raw_seq",
    "files_conc": "raw_conc",
    "sched_seq": "raw_seq",
    "sched_conc": "raw_conc",
    "run_many": "raw_conc",
}
#: the same shape with asyncsched's files written: what is left is the scheduler's
_FILES_FLOOR = {
    "sched_seq": "files_seq",
    "sched_conc": "files_conc",
    "run_many": "files_conc",
}
#: the issue's targets: wall / floor of the same shape
TARGETS = {"sched_seq": 1.5, "sched_conc": 1.3, "run_many": 1.5}
MAX_SUBMIT_HOPS = 2.0


class _Hops:
    """Count worker-thread hops (anyio.to_thread calls and spawner jobs) and
    the CPU time each spends in its thread (``time.thread_time``)."""

    def __init__(self) -> None:
        self.count = 0
        self.by_name: Counter[str] = Counter()
        #: CPU seconds in worker threads, by the same names
        self.cpu_by_name: defaultdict[str, float] = defaultdict(float)

    def reset(self) -> None:
        self.count = 0
        self.by_name.clear()
        self.cpu_by_name.clear()

    def _sum(self, counter: Mapping[str, float], kind: str) -> float:
        if kind == "spawn":
            return sum(v for k, v in counter.items() if k.startswith("spawner:"))
        if kind == "records":
            return counter.get("_write_batch", 0) + counter.get("_write_records", 0)
        if kind == "exits":
            return sum(v for k, v in counter.items() if "Exit" in k or "exit" in k)
        return sum(counter.values())

    def kinds(self, n: int) -> dict[str, float]:
        """Hops per app by kind (spawner jobs, record writes, exit reads) and
        their CPU ms per app."""
        result = {
            f"{kind}_hops_per_app": self._sum(self.by_name, kind) / n
            for kind in ("spawn", "records", "exits")
        }
        result["hops_per_app"] = self.count / n
        for kind in ("spawn", "records", "exits", "all"):
            result[f"{kind}_thread_cpu_ms_per_app"] = (
                self._sum(self.cpu_by_name, kind) * 1000 / n
            )
        # the keys the tables of earlier runs used
        result["spawn_hops_per_app"] = result.pop("spawn_hops_per_app")
        result["record_hops_per_app"] = result.pop("records_hops_per_app")
        result["exit_hops_per_app"] = result.pop("exits_hops_per_app")
        return result

    def _timed(self, name: str, func: Any) -> Any:
        hops = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return func(*args, **kwargs)
            finally:
                hops.cpu_by_name[name] += time.thread_time() - started

        return timed

    def install(self) -> None:
        import anyio.to_thread

        from asyncsched.schedulers.local import _spawner

        real_to_thread = anyio.to_thread.run_sync
        real_spawner_run = _spawner.Spawner.run
        hops = self

        async def to_thread(func: Any, *args: Any, **kwargs: Any) -> Any:
            name = getattr(func, "__qualname__", "?")
            hops.count += 1
            hops.by_name[name] += 1
            return await real_to_thread(hops._timed(name, func), *args, **kwargs)

        async def spawner_run(
            spawner: Any, func: Any, *args: Any, **kwargs: Any
        ) -> Any:
            name = "spawner:" + getattr(func, "__qualname__", "?")
            hops.count += 1
            hops.by_name[name] += 1
            return await real_spawner_run(
                spawner, hops._timed(name, func), *args, **kwargs
            )

        anyio.to_thread.run_sync = to_thread  # type: ignore[assignment]
        _spawner.Spawner.run = spawner_run  # type: ignore[method-assign,assignment]


async def _timed(
    variant: str, one: Callable[[int], Awaitable[int]], n: int
) -> Measurement:
    """``one(i)`` for every app, one after the other (``*_seq``) or all at
    once, measured; ``one`` returns the exit code."""
    rss_before = current_rss_bytes()
    async with LoopLagSampler() as lag:
        with CpuMeter() as cpu:
            loop_cpu = time.thread_time()
            started = time.perf_counter()
            if variant.endswith("_seq"):
                codes = [await one(i) for i in range(n)]
            else:
                codes = list(await asyncio.gather(*(one(i) for i in range(n))))
            wall = time.perf_counter() - started
            loop_cpu = time.thread_time() - loop_cpu
    m = Measurement(variant, "true", n, wall, lag.max_ms, lag.p99_ms)
    m.succeeded = sum(c == 0 for c in codes)
    m.extra["loop_cpu_ms_per_app"] = loop_cpu * 1000 / n
    return _with_process_cpu(m.finish(rss_before, cpu))


async def run_raw_app(cmd: list[str], tmp: Path, i: int) -> int:
    """The raw floor's app ``i``: ``cmd`` with stdout/stderr to two files in
    ``tmp``, awaited; its exit code."""
    with (
        open(tmp / f"{i}.stdout.log", "wb") as out,
        open(tmp / f"{i}.stderr.log", "wb") as err,
    ):
        proc = await asyncio.create_subprocess_exec(*cmd, stdout=out, stderr=err)
        return await proc.wait()


async def _raw(variant: str, cmd: list[str], n: int, tmp: Path) -> Measurement:
    return await _timed(variant, functools.partial(run_raw_app, cmd, tmp), n)


#: about the size of a small app's record, index entry and ``SUCCESS``
_RECORD = {"app_id": "a", "state": "RUNNING", "pad": "x" * 900}
_POINTER = {"app_id": "a", "app_dir": "/x" * 30}
_SUCCESS = {"app_id": "a", "final_state": "SUCCEEDED", "pad": "x" * 250}


#: how the JSON files are written: ``write(path, data)``
_Write = Callable[[str, Any], None]


def _files_before(write_json_atomic: _Write, tmp: Path, i: int) -> tuple[int, int]:
    """An app's dirs, log files, first record and index entry; the process's
    stdout and stderr (open descriptors)."""
    app_dir = tmp / "logs" / f"a{i}"
    replica_dir = app_dir / "r" / "0"
    os.makedirs(replica_dir)
    out, err, combined = (
        os.open(replica_dir / name, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        for name in ("stdout.log", "stderr.log", "combined.log")
    )
    os.close(combined)
    write_json_atomic(str(app_dir / "app.json"), _RECORD)
    write_json_atomic(str(tmp / "index" / f"a{i}.json"), _POINTER)
    return out, err


def _files_after(write_json_atomic: _Write, tmp: Path, i: int) -> None:
    app_dir = tmp / "logs" / f"a{i}"
    write_json_atomic(str(app_dir / "SUCCESS"), _SUCCESS)
    write_json_atomic(str(app_dir / "app.json"), _RECORD)


async def _files(variant: str, cmd: list[str], n: int, tmp: Path) -> Measurement:
    # asyncsched's own writer (temp file, rename), imported before the timing
    # (and only here: the raw floor's process never loads asyncsched)
    from asyncsched.schedulers.local._records import write_json_atomic

    (tmp / "index").mkdir()
    (tmp / "logs").mkdir()

    async def one(i: int) -> int:
        out, err = await asyncio.to_thread(_files_before, write_json_atomic, tmp, i)
        try:
            proc = await asyncio.create_subprocess_exec(*cmd, stdout=out, stderr=err)
        finally:
            os.close(out)
            os.close(err)
        code = await proc.wait()
        await asyncio.to_thread(_files_after, write_json_atomic, tmp, i)
        return code

    return await _timed(variant, one, n)


async def _sched(variant: str, cmd: list[str], n: int, tmp: Path) -> Measurement:
    from asyncsched.runner import Runner
    from asyncsched.schedulers import get_scheduler
    from asyncsched.specs import AppDef, AppState, Role

    hops = _Hops()
    hops.install()
    role = Role("r", image="-", entrypoint=cmd[0], args=cmd[1:])
    apps = [AppDef(f"a{i}", roles=[role]) for i in range(n)]
    cfg = {"log_dir": str(tmp / "logs")}
    params = {"state_dir": str(tmp / "state"), "retention": None, "cache_size": n + 1}
    rss_before = current_rss_bytes()
    if variant == "run_many":
        async with Runner("bench", scheduler_params=params) as runner:
            # warm up (imports, threads, guardian): not timed
            await runner.wait(await runner.run(apps[0], "local_cwd", cfg))
            hops.reset()
            async with LoopLagSampler() as lag:
                with CpuMeter() as cpu:
                    loop_cpu = time.thread_time()
                    started = time.perf_counter()
                    handles = await runner.run_many(apps, "local_cwd", cfg)
                    results = await runner.wait_all(handles)
                    wall = time.perf_counter() - started
                    loop_cpu = time.thread_time() - loop_cpu
            total_hops = hops.count
        oks = [
            s is not None and s.state == AppState.SUCCEEDED for s in results.values()
        ]
    else:
        async with get_scheduler("local_cwd", session_name="bench", **params) as sched:
            await sched.wait(await sched.submit(apps[0], cfg))  # warm up
            hops.reset()

            async def one(app: AppDef) -> bool:
                app_id = await sched.submit(app, cfg)
                desc = await sched.wait(app_id)
                return desc is not None and desc.state == AppState.SUCCEEDED

            async with LoopLagSampler() as lag:
                with CpuMeter() as cpu:
                    loop_cpu = time.thread_time()
                    started = time.perf_counter()
                    if variant == "sched_seq":
                        oks = [await one(app) for app in apps]
                    else:
                        oks = list(await asyncio.gather(*(one(app) for app in apps)))
                    wall = time.perf_counter() - started
                    loop_cpu = time.thread_time() - loop_cpu
            total_hops = hops.count
    m = Measurement(variant, "true", n, wall, lag.max_ms, lag.p99_ms)
    m.succeeded = sum(oks)
    m.extra["loop_cpu_ms_per_app"] = loop_cpu * 1000 / n
    m.extra.update(hops.kinds(n))
    m.extra["hops_total"] = total_hops
    return _with_process_cpu(m.finish(rss_before, cpu))


def _with_process_cpu(m: Measurement) -> Measurement:
    """Add the whole process's CPU ms per app (every thread; ``getrusage``)."""
    if m.cpu_self_s is not None:
        m.extra["process_cpu_ms_per_app"] = m.cpu_self_s * 1000 / m.apps
    return m


def run_fast_child(variant: str, cmd: list[str], n: int, tmp: Path) -> Measurement:
    """Run one fast-path variant in this process (asyncio) and return it."""
    if variant.startswith("raw"):
        return asyncio.run(_raw(variant, cmd, n, tmp))
    if variant.startswith("files"):
        return asyncio.run(_files(variant, cmd, n, tmp))
    return asyncio.run(_sched(variant, cmd, n, tmp))


def _fmt(value: object, digits: int = 2) -> str:
    return f"{value:.{digits}f}" if isinstance(value, float | int) else "-"


def _paired_ratio(
    ms: Sequence[Measurement], floor: Sequence[Measurement]
) -> float | None:
    """The median of the run-by-run ratios of ``ms`` to ``floor``."""
    ratios = [a.wall_s / b.wall_s for a, b in zip(ms, floor, strict=False)]
    return statistics.median(ratios) if ratios else None


def fast_path_table(runs: dict[str, list[Measurement]]) -> str:
    """One row per variant: medians of its runs, ratios paired run by run."""
    header = (
        "| variant | apps | wall median (s) | / floor (paired median) | target"
        " | / files floor (paired median)"
        " | hops/app: spawn | records | exits | all"
        " | CPU ms/app: loop | spawn jobs | exit hops | record hops | process"
        " | lag p99 (ms) | lag max (ms) | peak RSS (MB) | succeeded |"
    )
    lines = [header, "|" + "---|" * 20]
    for variant in FAST_VARIANTS:
        ms = runs.get(variant)
        if not ms:
            continue
        ratio = _paired_ratio(ms, runs.get(_FLOOR.get(variant, ""), []))
        files_ratio = _paired_ratio(ms, runs.get(_FILES_FLOOR.get(variant, ""), []))
        target = TARGETS.get(variant)
        verdict = (
            "-"
            if target is None or ratio is None
            else f"<= {target} {'PASS' if ratio <= target else 'FAIL'}"
        )

        def med(key: str, ms: Sequence[Measurement] = ms) -> float | None:
            values = [
                float(v) for m in ms if isinstance(v := m.extra.get(key), float | int)
            ]
            return statistics.median(values) if values else None

        lines.append(
            f"| {variant} | {ms[0].apps} | {statistics.median(m.wall_s for m in ms):.3f}"
            f" | {_fmt(ratio)} | {verdict} | {_fmt(files_ratio)}"
            f" | {_fmt(med('spawn_hops_per_app'))}"
            f" | {_fmt(med('record_hops_per_app'))} | {_fmt(med('exit_hops_per_app'))}"
            f" | {_fmt(med('hops_per_app'))} | {_fmt(med('loop_cpu_ms_per_app'))}"
            f" | {_fmt(med('spawn_thread_cpu_ms_per_app'))}"
            f" | {_fmt(med('exits_thread_cpu_ms_per_app'))}"
            f" | {_fmt(med('records_thread_cpu_ms_per_app'))}"
            f" | {_fmt(med('process_cpu_ms_per_app'))}"
            f" | {_fmt(statistics.median(m.lag_p99_ms or 0.0 for m in ms), 1)}"
            f" | {_fmt(statistics.median(m.lag_max_ms or 0.0 for m in ms), 1)}"
            f" | {_fmt(statistics.median(m.peak_rss_mb for m in ms), 1)}"
            f" | {min(m.succeeded for m in ms)}/{ms[0].apps} |"
        )
    return "\n".join(lines)
