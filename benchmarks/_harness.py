"""Measuring helpers shared by the benchmark scripts (backend-agnostic).

Nothing here knows about schedulers: a benchmark runs each variant in a child
process of its own (:func:`run_child`), the child measures itself with
:class:`LoopLagSampler` and :func:`peak_rss_bytes` and prints one
:class:`Measurement` as JSON (:func:`emit`), and the parent prints the results
side by side with :func:`results_table`, :func:`ratio_table` and
:func:`targets_table`. The web benchmarks serve the example app with
:func:`with_example_server` (its child runs :func:`serve_example`).

Example:
    >>> async def child() -> Measurement:
    ...     async with LoopLagSampler() as lag:
    ...         started = time.perf_counter()
    ...         await asyncio.sleep(0.1)
    ...         wall = time.perf_counter() - started
    ...     return Measurement("demo", "sleep", 1, wall, lag.max_ms, lag.p99_ms)
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import json
import math
import operator
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

__all__ = [
    "JSON_MARKER",
    "CpuMeter",
    "LoopLagSampler",
    "Measurement",
    "Ratio",
    "Target",
    "busiest_window",
    "cpu_seconds",
    "current_rss_bytes",
    "emit",
    "machine_info",
    "peak_rss_bytes",
    "percentile",
    "raise_nofile_limit",
    "ratio_table",
    "results_table",
    "run_child",
    "serve_example",
    "source_state",
    "stats_ms",
    "stats_row",
    "targets_table",
    "time_calls",
    "with_example_server",
]

#: Prefix of the one stdout line a child uses to hand its result to the parent.
JSON_MARKER = "@@BENCH-RESULT@@ "

MiB = 1024 * 1024


# -- statistics ----------------------------------------------------------------


def percentile(values: Sequence[float], q: float, *, nearest: bool = False) -> float:
    """The ``q``-th percentile (0..100) with linear interpolation (``nearest``:
    the nearest rank's value); nan if empty.

    Example:
        >>> percentile([1.0, 2.0, 3.0, 4.0], 50), percentile([1.0, 2.0, 3.0, 4.0], 50, nearest=True)
        (2.5, 3.0)
    """
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    if nearest:
        return ordered[min(len(ordered) - 1, round(pos))]
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def busiest_window(times: Iterable[float], seconds: float = 60.0) -> int:
    """The most of ``times`` that fall within any window of ``seconds``.

    Example:
        >>> busiest_window([0.0, 10.0, 59.0, 61.0, 62.0])
        4
    """
    ordered = sorted(times)
    best, first = 0, 0
    for last, t in enumerate(ordered):
        while t - ordered[first] >= seconds:
            first += 1
        best = max(best, last - first + 1)
    return best


def time_calls(owner: Any, name: str, counted: Callable[..., bool]) -> list[float]:
    """Wrap the coroutine method ``owner.<name>`` in place; return the list it
    fills with the time (``time.monotonic``) of each call ``counted(*args,
    **kwargs)`` accepts (e.g. the status commands a scheduler runs)."""
    times: list[float] = []
    real = getattr(owner, name)

    async def timed(*args: Any, **kwargs: Any) -> Any:
        if counted(*args, **kwargs):
            times.append(time.monotonic())
        return await real(*args, **kwargs)

    setattr(owner, name, timed)
    return times


# -- event-loop lag ------------------------------------------------------------


class LoopLagSampler:
    """Measure how late the running asyncio loop wakes a sleeping task.

    While active, a task sleeps ``interval`` seconds in a loop and records
    ``actual wake-up - expected wake-up``. Any callback that hogs the loop
    (blocking I/O, long CPU bursts, big synchronous loops) shows up as lag.
    """

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.samples: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Self:
        self._task = asyncio.create_task(self._run(), name="loop-lag-sampler")
        await asyncio.sleep(0)  # let it take its first timestamp
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            expected = loop.time() + self.interval
            await asyncio.sleep(self.interval)
            self.samples.append(max(0.0, loop.time() - expected))

    @property
    def max_ms(self) -> float | None:
        """Worst lag in milliseconds; None when nothing was sampled."""
        return max(self.samples) * 1000.0 if self.samples else None

    @property
    def p99_ms(self) -> float | None:
        """99th-percentile lag in milliseconds; None when nothing was sampled."""
        return percentile(self.samples, 99) * 1000.0 if self.samples else None


# -- memory --------------------------------------------------------------------


def _proc_status_kib(key: str, pid: int | str) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def peak_rss_bytes(pid: int | str = "self") -> int:
    """Peak resident set size of a process (Linux ``VmHWM``: exact, no sampling).

    Falls back to ``getrusage`` (own process only) where /proc is missing.
    """
    kib = _proc_status_kib("VmHWM", pid)
    if kib is not None:
        return kib * 1024
    if pid != "self":
        raise OSError(f"cannot read the peak RSS of pid {pid}")
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss if sys.platform == "darwin" else maxrss * 1024


def current_rss_bytes(pid: int | str = "self") -> int:
    """Current resident set size (``VmRSS``); 0 if unknown."""
    kib = _proc_status_kib("VmRSS", pid)
    return 0 if kib is None else kib * 1024


def cpu_seconds() -> tuple[float, float]:
    """``(self, children)`` user+system CPU seconds so far (children: reaped ones)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


class CpuMeter:
    """CPU seconds this process (all threads) and its reaped children used.

    Example:
        >>> with CpuMeter() as cpu:
        ...     pass
        >>> cpu.self_s >= 0.0
        True
    """

    def __init__(self) -> None:
        self.self_s = 0.0
        self.children_s = 0.0
        self._start = (0.0, 0.0)

    def __enter__(self) -> Self:
        self._start = cpu_seconds()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        me, kids = cpu_seconds()
        self.self_s = me - self._start[0]
        self.children_s = kids - self._start[1]


def raise_nofile_limit() -> int:
    """Raise the soft open-files limit to the hard limit; return the new limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return hard
    return soft


# -- results -------------------------------------------------------------------

Extra = dict[str, float | int | str | None]


@dataclass
class Measurement:
    """One variant running one workload, as measured inside its own process."""

    variant: str
    workload: str
    apps: int
    wall_s: float
    lag_max_ms: float | None = None
    lag_p99_ms: float | None = None
    peak_rss_mb: float = 0.0
    rss_before_mb: float = 0.0
    succeeded: int = 0
    cpu_self_s: float | None = None
    cpu_children_s: float | None = None
    extra: Extra = field(default_factory=dict)

    def finish(self, rss_before: int, cpu: CpuMeter | None = None) -> Self:
        """Fill the memory (and CPU) fields from this process (call at the end)."""
        if cpu is not None:
            self.cpu_self_s = cpu.self_s
            self.cpu_children_s = cpu.children_s
        self.rss_before_mb = rss_before / MiB
        self.peak_rss_mb = peak_rss_bytes() / MiB
        return self

    @property
    def ms_per_app(self) -> float:
        return self.wall_s * 1000.0 / self.apps if self.apps else math.nan

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Measurement:
        return cls(**dict(data))


def emit(measurement: Measurement) -> None:
    """Print the child's result for :func:`run_child` (one marked stdout line)."""
    print(JSON_MARKER + json.dumps(measurement.to_json()), flush=True)


def run_child(cmd: Sequence[str], timeout: float = 900.0) -> Measurement:
    """Run ``cmd`` (a child that calls :func:`emit`) and return its measurement.

    The child's stderr is passed through so warnings stay visible.

    Raises:
        RuntimeError: the child failed or printed no result.
    """
    proc = subprocess.run(
        list(cmd),
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        timeout=timeout,
        check=False,
    )
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(JSON_MARKER):
            result = Measurement.from_json(json.loads(line[len(JSON_MARKER) :]))
            if proc.returncode != 0:
                result.extra["child_returncode"] = proc.returncode
            return result
    raise RuntimeError(
        f"benchmark child {' '.join(cmd)!r} exited with {proc.returncode} "
        f"and no result; stdout tail:\n{proc.stdout[-2000:]}"
    )


def machine_info() -> dict[str, str | int | None]:
    """What the numbers were measured on."""
    cpu_model = platform.processor() or None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_total = _meminfo_kib()
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "cpu_model": cpu_model,
        "mem_total_mb": None if mem_total is None else mem_total // 1024,
        "loadavg_1m": f"{os.getloadavg()[0]:.2f}"
        if hasattr(os, "getloadavg")
        else None,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def source_state(root: str | os.PathLike[str], *packages: str) -> dict[str, str]:
    """Git commit of ``root`` plus a digest of ``packages``' ``*.py`` files.

    The digest covers uncommitted edits, so a row can be tied to the code it
    measured even in a dirty work tree.
    """
    base = Path(root)
    digest = hashlib.sha256()
    for package in packages:
        for path in sorted((base / package).rglob("*.py")):
            digest.update(str(path.relative_to(base)).encode())
            digest.update(path.read_bytes())
    try:
        commit = subprocess.run(
            ["git", "-C", str(base), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        commit = ""
    return {"commit": commit or "unknown", "sources_sha256": digest.hexdigest()[:12]}


def _meminfo_kib() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


# -- tables --------------------------------------------------------------------


def _fmt(value: float | None, digits: int = 1) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    return f"{value:.{digits}f}"


def _markdown(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |"]
    lines.append("|" + "|".join("---" for _ in header) + "|")
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return "\n".join(lines)


def results_table(
    results: Sequence[Measurement], labels: Mapping[str, str] | None = None
) -> str:
    """One markdown row per measurement, in the given order."""
    labels = labels or {}
    header = [
        "workload",
        "variant",
        "apps",
        "wall (s)",
        "ms/app",
        "CPU self (s)",
        "CPU apps (s)",
        "peak RSS (MB)",
        "RSS before (MB)",
        "loop lag max (ms)",
        "loop lag p99 (ms)",
        "succeeded",
    ]
    rows = [
        [
            m.workload,
            labels.get(m.variant, m.variant),
            str(m.apps),
            _fmt(m.wall_s, 3),
            _fmt(m.ms_per_app, 2),
            _fmt(m.cpu_self_s, 2),
            _fmt(m.cpu_children_s, 2),
            _fmt(m.peak_rss_mb),
            _fmt(m.rss_before_mb),
            _fmt(m.lag_max_ms),
            _fmt(m.lag_p99_ms),
            f"{m.succeeded}/{m.apps}",
        ]
        for m in results
    ]
    return _markdown(header, rows)


@dataclass(frozen=True)
class Ratio:
    """``numerator``'s metric divided by ``denominator``'s, per workload."""

    label: str
    numerator: str
    denominator: str
    metric: Callable[[Measurement], float | None] = lambda m: m.wall_s

    def compute(self, by_variant: Mapping[str, Measurement]) -> float | None:
        num = by_variant.get(self.numerator)
        den = by_variant.get(self.denominator)
        if num is None or den is None:
            return None
        a, b = self.metric(num), self.metric(den)
        if a is None or b is None or b == 0:
            return None
        return a / b


def ratio_table(
    results: Sequence[Measurement],
    ratios: Sequence[Ratio],
    workloads: Sequence[str] | None = None,
) -> str:
    """One markdown row per workload (and apps count), one column per ratio."""
    groups: dict[tuple[str, int], dict[str, Measurement]] = {}
    for m in results:
        groups.setdefault((m.workload, m.apps), {})[m.variant] = m
    keys = [k for k in groups if workloads is None or k[0] in workloads]
    header = ["workload", "apps", *(f"{r.label} (x)" for r in ratios)]
    rows = [
        [w, str(n), *(_fmt(r.compute(groups[(w, n)]), 2) for r in ratios)]
        for (w, n) in keys
    ]
    return _markdown(header, rows)


@dataclass
class Target:
    """A performance goal: ``measured <op> limit``."""

    name: str
    measured: float | None
    limit: float
    op: Literal["<", "<=", ">", ">="] = "<="
    unit: str = ""

    @property
    def passed(self) -> bool | None:
        """None when it could not be measured."""
        if self.measured is None or math.isnan(self.measured):
            return None
        compare: dict[str, Callable[[float, float], bool]] = {
            "<": operator.lt,
            "<=": operator.le,
            ">": operator.gt,
            ">=": operator.ge,
        }
        return compare[self.op](self.measured, self.limit)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "passed": self.passed}


def targets_table(targets: Sequence[Target]) -> str:
    """Markdown table of the targets with PASS / FAIL / not measured."""
    verdict = {True: "PASS", False: "**FAIL**", None: "not measured"}
    rows = [
        [
            t.name,
            f"{_fmt(t.measured, 2)} {t.unit}".strip(),
            f"{t.op} {t.limit:g} {t.unit}".strip(),
            verdict[t.passed],
        ]
        for t in targets
    ]
    return _markdown(["target", "measured", "goal", "result"], rows)


# -- the web example under one uvicorn worker ------------------------------------

#: the server's lag probe: a ticker sleeping this long in a loop
TICK_S = 0.005


def stats_ms(ms: Sequence[float]) -> dict[str, float]:
    """p50, p99 and max of ``ms``."""
    return {
        "p50": percentile(ms, 50),
        "p99": percentile(ms, 99),
        "max": max(ms, default=float("nan")),
    }


def stats_row(name: str, stats: Mapping[str, float], digits: int = 0) -> str:
    """A markdown row ``| name | p50 | p99 | max |`` of :func:`stats_ms`."""
    p50, p99, top = (f"{stats[k]:.{digits}f}" for k in ("p50", "p99", "max"))
    return f"| {name} | {p50} | {p99} | {top} |"


def serve_example(fd: int) -> None:
    """Run the web example under uvicorn on the inherited socket ``fd``, with a
    lag probe.

    A ticker task, started in the lifespan, sleeps 5 ms in a loop and records
    ``(time.monotonic(), lateness)``; ``GET /_bench/lag?start=&end=`` answers
    the statistics of the ticks in that window (monotonic clock seconds, the
    same clock in every process), the full collections of the garbage
    collector in it (count, total and longest ms) and the server's peak RSS.
    """
    import socket
    from contextlib import asynccontextmanager

    import anyio
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

    from docs.examples.asgi_app import app

    ticks: list[tuple[float, float]] = []
    collections: list[tuple[float, float]] = []  # (time.monotonic(), seconds)
    started = [0.0]

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        """Time each full collection of the cyclic garbage collector."""
        if info["generation"] != 2:
            return
        if phase == "start":
            started[0] = time.monotonic()
        else:
            now = time.monotonic()
            collections.append((now, now - started[0]))

    gc.callbacks.append(on_gc)

    async def ticker() -> None:
        while True:
            expected = time.monotonic() + TICK_S
            await anyio.sleep(TICK_S)
            now = time.monotonic()
            ticks.append((now, max(0.0, now - expected)))

    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Starlette) -> Any:
        async with inner(a) as state, anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            yield state
            tg.cancel_scope.cancel()

    async def lag(request: Request) -> Response:
        start = float(request.query_params.get("start", "0"))
        end = float(request.query_params.get("end", "inf"))
        ms = [late * 1000.0 for t, late in ticks if start <= t <= end]
        stats = {"samples": len(ms), **stats_ms(ms)}
        full = [s * 1000.0 for t, s in collections if start <= t <= end]
        gcs = {"count": len(full), "total": sum(full), "max": max(full, default=0.0)}
        answer = {**stats, "full_gc_ms": gcs, "peak_rss_mb": peak_rss_bytes() / MiB}
        return JSONResponse(answer)

    app.router.lifespan_context = lifespan
    app.add_route("/_bench/lag", lag)
    raise_nofile_limit()
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2)
    uvicorn.Server(config).run(sockets=[socket.socket(fileno=fd)])


def with_example_server(
    script: str,
    load: Callable[[str, int], Any],
    *,
    backlog: int,
    env: Mapping[str, str] | None = None,
    stop_timeout: float = 60.0,
) -> dict[str, Any]:
    """Serve the web example from a child (``script --serve FD``, or the
    command in ``$BENCH_SERVER``) on a loopback socket bound here, with its own
    state dir; ``asyncio.run(load(url, server_pid))``; stop the child."""
    import signal
    import socket
    import tempfile

    raise_nofile_limit()
    root = Path(script).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="asyncsched-web-bench-") as tmp:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(backlog)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        child_env = {
            **os.environ,
            "ASYNCSCHED_STATE_DIR": str(Path(tmp) / "state"),
            **(env or {}),
        }
        server = os.environ.get("BENCH_SERVER", f"{script} --serve").split()
        proc = subprocess.Popen(
            [sys.executable, *server, str(sock.fileno())],
            cwd=root,
            env=child_env,
            pass_fds=[sock.fileno()],
        )
        sock.close()
        try:
            result: dict[str, Any] = asyncio.run(load(url, proc.pid))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=stop_timeout)
    result["machine"] = machine_info()
    return result
