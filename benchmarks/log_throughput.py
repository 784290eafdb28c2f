"""Log throughput of the local backend's ``log_iter`` beside a plain read of the same file.

One replica writes ``--mib`` MiB of ``--line-bytes``-byte lines; then, in the
same process and run:

* ``plain read``: the floor -- ``for line in open(path, newline="\\n")`` over
  the replica's ``combined.log`` (text mode, lines split on ``\\n`` only, bad
  UTF-8 replaced: what ``log_iter`` yields, without a scheduler or a loop);
* ``async generator floor``: the same lines, split beforehand and held in
  memory, yielded by an async generator in batches of 800 (what any
  ``log_iter`` pays per line on top of splitting: one async-generator step);
* ``line-cutting floor``: the file's bytes, held in memory, cut into lines
  64 KiB at a time by the cutter ``log_iter`` uses and yielded one by one by
  an async generator: the least any ``log_iter`` pays per line (no file, no
  scheduler), so its ratio to the plain read is the ceiling of ``log_iter``'s;
* ``log_iter (finished)``: ``async for line in sched.log_iter(...)`` over the
  same, finished log;
* ``log_iter (followed)``: ``log_iter(..., should_tail=True)`` started right
  after submitting a second replica that writes the same output, timed from
  the first line to the last (the reader keeps up with the writer);
* ``no reader (supervisor only)``: the second replica alone, from submit to
  ``wait`` returning (process start-up included): the supervisor's share of
  the followed run, whose pipe pump runs on the same loop as the reader (its
  CPU time is the supervisor's: the replica is another process);
* ``log_iter (one 32 MiB line)``: a replica that writes 32 MiB without a
  newline, read back (in 1 MiB pieces) -- the case that used to stall the loop.

Each throughput is the best of ``--repeat`` runs (the variants interleaved);
times run from the start of the iteration to the last line (the followed one:
from its first line, the writer's start-up left out). Event-loop lag (how late
a task sleeping 5 ms wakes, a wake-up still pending at the end included) is
recorded during every ``log_iter`` run, including while the flooding replica
writes; the worst of every run is the one the target applies to.
The process's CPU time (every thread, ``time.process_time()``) from the start
of each read to its last line is printed too, the least of the runs: on a
shared machine it moves far less than wall time.

Usage:
    python benchmarks/log_throughput.py [--mib 64] [--line-bytes 80]
        [--repeat 3] [--json results.json] [--strict]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Self

from _harness import Target, machine_info, percentile, source_state, targets_table

from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.schedulers.shared.lines import LineAssembler
from asyncsched.specs import AppDef, AppState, Role

MiB = 1 << 20
ROOT = Path(__file__).resolve().parent.parent

# Targets: issue 32 asks a followed read for 1/2 a plain read; the rest are
# this script's own.
MIN_RATIO = 1 / 3
FOLLOWED_MIN_RATIO = 1 / 2
MAX_LAG_MS = 50.0

# writes pre-built 320 KiB blocks, so that the writer is never the bottleneck
WRITER = """\
import sys
total, width = {total}, {width}
pad = "x" * (width - 10)
block = "".join(f"{{i:08d}} {{pad}}\\n" for i in range(4096)).encode()
out = sys.stdout.buffer
for _ in range(total // len(block)):
    out.write(block)
out.write(block[: total % len(block)])
"""

LONG_LINE = """\
import sys
chunk = b"y" * (1 << 20)
for _ in range(32):
    sys.stdout.buffer.write(chunk)
"""


@dataclass
class Row:
    """One measured variant."""

    variant: str
    lines: int
    mib: float
    seconds: float
    lag_max_ms: float | None = None
    lag_p99_ms: float | None = None
    #: this process's CPU time (every thread) over the same span
    cpu_s: float | None = None

    @property
    def lines_per_s(self) -> float:
        return self.lines / self.seconds if self.seconds else float("nan")

    @property
    def mib_per_s(self) -> float:
        return self.mib / self.seconds if self.seconds else float("nan")


def _plain_pipe(code: str) -> Row:
    """The floor of following: the writer's stdout pipe read and split directly."""
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    lines = chars = 0
    started: float | None = None
    with io.TextIOWrapper(
        proc.stdout, encoding="utf-8", errors="replace", newline="\n"
    ) as f:
        for line in f:
            if started is None:
                started = time.perf_counter()
            lines += 1
            chars += len(line)
    ended = time.perf_counter()
    proc.wait()
    return Row("plain pipe read", lines, chars / MiB, ended - (started or ended))


def _read_batches(path: str) -> list[list[str]]:
    with open(path, encoding="utf-8", errors="replace", newline="\n") as f:
        lines = f.readlines()
    return [lines[i : i + _FLOOR_BATCH] for i in range(0, len(lines), _FLOOR_BATCH)]


#: lines per batch of the async-generator floor (about 64 KiB of 80-byte lines)
_FLOOR_BATCH = 800


def _read_slices(path: str) -> list[bytes]:
    with open(path, "rb") as f:
        return list(iter(lambda: f.read(_CUT_SLICE), b""))


#: bytes cut at a time by the line-cutting floor (as ``log_iter`` does)
_CUT_SLICE = 1 << 16


async def _cut_each(slices: list[bytes]) -> AsyncIterator[str]:
    cutter = LineAssembler()
    for piece in slices:
        for line in cutter.feed(piece):
            yield line
    tail = cutter.flush()
    if tail:
        yield tail


async def _yield_each(batches: list[list[str]]) -> AsyncIterator[str]:
    for batch in batches:
        for line in batch:
            yield line


def _plain_read(path: str) -> Row:
    cpu = time.process_time()
    started = time.perf_counter()
    lines = chars = 0
    with open(path, encoding="utf-8", errors="replace", newline="\n") as f:
        for line in f:
            lines += 1
            chars += len(line)
    seconds = time.perf_counter() - started
    return Row(
        "plain read", lines, chars / MiB, seconds, cpu_s=time.process_time() - cpu
    )


class _LagSampler:
    """Worst lateness of a task sleeping 5 ms, counting a wake-up still pending.

    Unlike a sampler that only records wake-ups, a loop blocked for the whole
    measurement shows up (as the time since the last wake-up was due).
    """

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._due = 0.0
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Self:
        loop = asyncio.get_running_loop()
        self._due = loop.time() + 0.005
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        now = asyncio.get_running_loop().time()
        self.samples.append(max(0.0, now - self._due))
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(max(0.0, self._due - loop.time()))
            self.samples.append(max(0.0, loop.time() - self._due))
            self._due = loop.time() + 0.005

    @property
    def max_ms(self) -> float:
        return max(self.samples) * 1000.0

    @property
    def p99_ms(self) -> float:
        return percentile(self.samples, 99) * 1000.0


async def _drain(
    lines: AsyncIterator[str], variant: str, *, from_first_line: bool = False
) -> Row:
    """Consume ``lines``; time from the start (or the first line) to the last."""
    count = chars = 0
    cpu = time.process_time()
    async with _LagSampler() as lag:
        started: float | None = None if from_first_line else time.perf_counter()
        async for line in lines:
            if started is None:
                started = time.perf_counter()
            count += 1
            chars += len(line)
        ended = time.perf_counter()
    return Row(
        variant,
        count,
        chars / MiB,
        ended - (started or ended),
        lag.max_ms,
        lag.p99_ms,
        time.process_time() - cpu,
    )


def _role(code: str) -> Role:
    return Role("writer", image="/", entrypoint=sys.executable, args=["-c", code])


async def _submit(sched: LocalScheduler, code: str, log_dir: str) -> str:
    return await sched.submit(
        AppDef("bench", roles=[_role(code)]), {"log_dir": log_dir}
    )


async def _finished(sched: LocalScheduler, code: str, log_dir: str) -> str:
    app_id = await _submit(sched, code, log_dir)
    desc = await sched.wait(app_id, timeout=600)
    if desc is None or desc.state != AppState.SUCCEEDED:
        raise RuntimeError(f"the writer did not succeed: {desc}")
    return app_id


def _best(rows: list[Row]) -> Row:
    best = min(rows, key=lambda r: r.seconds)
    lags = [r.lag_max_ms for r in rows if r.lag_max_ms is not None]
    p99s = [r.lag_p99_ms for r in rows if r.lag_p99_ms is not None]
    best.lag_max_ms = max(lags) if lags else None  # the worst lag of every run
    best.lag_p99_ms = max(p99s) if p99s else None
    cpus = [r.cpu_s for r in rows if r.cpu_s is not None]
    best.cpu_s = min(cpus) if cpus else None  # steadier than wall on a busy host
    return best


async def measure(mib: int, width: int, repeat: int, log_dir: str) -> list[Row]:
    code = WRITER.format(total=mib * MiB, width=width)
    async with LocalScheduler("bench-logs", cancel_grace=2.0) as sched:
        app_id = await _finished(sched, code, log_dir)
        desc = await sched.describe(app_id)
        assert desc is not None
        assert desc.ui_url is not None
        path = os.path.join(
            desc.ui_url.removeprefix("file://"), "writer/0/combined.log"
        )

        async def plain() -> Row:
            return await asyncio.to_thread(_plain_read, path)

        async def pipe() -> Row:
            return await asyncio.to_thread(_plain_pipe, code)

        async def agen_floor() -> Row:
            batches = await asyncio.to_thread(_read_batches, path)
            return await _drain(_yield_each(batches), "async generator floor")

        async def cut_floor() -> Row:
            slices = await asyncio.to_thread(_read_slices, path)
            return await _drain(_cut_each(slices), "line-cutting floor")

        async def finished() -> Row:
            return await _drain(sched.log_iter(app_id, "writer"), "log_iter (finished)")

        async def supervised() -> Row:
            async with _LagSampler() as lag:
                cpu = time.process_time()
                started = time.perf_counter()
                live = await _submit(sched, code, log_dir)
                await sched.wait(live, timeout=600)
                seconds = time.perf_counter() - started
                cpu = time.process_time() - cpu
            lines = mib * MiB // width
            return Row(
                "no reader (supervisor only)",
                lines,
                mib,
                seconds,
                lag.max_ms,
                lag.p99_ms,
                cpu,
            )

        async def followed() -> Row:
            live = await _submit(sched, code, log_dir)
            lines = sched.log_iter(live, "writer", should_tail=True)
            return await _drain(lines, "log_iter (followed)", from_first_line=True)

        async def long_line() -> Row:
            long_id = await _finished(sched, LONG_LINE, log_dir)
            lines = sched.log_iter(long_id, "writer")
            return await _drain(lines, "log_iter (one 32 MiB line)")

        async def idle() -> Row:
            async with _LagSampler() as lag:
                await asyncio.sleep(0.25)
            return Row("idle loop (noise floor)", 0, 0.0, 0.25, lag.max_ms, lag.p99_ms)

        variants: list[Callable[[], Awaitable[Row]]] = [
            idle,
            plain,
            agen_floor,
            cut_floor,
            finished,
            pipe,
            supervised,
            followed,
            long_line,
        ]
        runs: list[list[Row]] = [[] for _ in variants]
        for _ in range(repeat):  # interleaved, so that drift hits every variant
            for i, variant in enumerate(variants):
                runs[i].append(await variant())
    return [_best(r) for r in runs]


def _fmt(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def table(rows: list[Row]) -> str:
    by = {r.variant: r for r in rows}
    plain, pipe = by["plain read"], by["plain pipe read"]
    header = [
        "variant",
        "lines",
        "MiB",
        "seconds",
        "lines/s",
        "MiB/s",
        "vs plain read (x)",
        "CPU vs plain read (x)",
        "vs plain pipe read (x)",
        "loop lag max (ms)",
        "loop lag p99 (ms)",
        "process CPU (s)",
    ]
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        same_data = r.lines > 0 and r.variant.startswith(
            ("plain", "log_iter (", "async generator", "line-cutting")
        )
        same_data = same_data and "32 MiB" not in r.variant  # another file
        ratio_text = _fmt(r.lines_per_s / plain.lines_per_s, 2) if same_data else "n/a"
        cpu_text = "n/a"  # plain read's CPU over this one's: steadier when shared
        if same_data and r.cpu_s and plain.cpu_s:
            cpu_text = _fmt(plain.cpu_s / r.cpu_s, 2)
        pipe_text = "n/a"
        if "followed" in r.variant or r is pipe:
            pipe_text = _fmt(r.lines_per_s / pipe.lines_per_s, 2)
        moved = r.lines > 0
        cells = [
            r.variant,
            f"{r.lines:,}" if moved else "",
            _fmt(r.mib) if moved else "",
            _fmt(r.seconds, 3),
            f"{r.lines_per_s:,.0f}" if moved else "",
            _fmt(r.mib_per_s) if moved else "",
            ratio_text,
            cpu_text,
            pipe_text,
            _fmt(r.lag_max_ms),
            _fmt(r.lag_p99_ms),
            _fmt(r.cpu_s, 3),
        ]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def followed_ceiling(rows: list[Row]) -> float | None:
    """The most a followed read in the supervising process can reach against a
    plain read: the supervisor's copy of the pipe (the no-reader run's CPU)
    and one async-generator step per line (that floor's time) share its loop.
    """
    by = {r.variant: r for r in rows}
    plain, agen = by.get("plain read"), by.get("async generator floor")
    supervisor = by.get("no reader (supervisor only)")
    if plain is None or agen is None or supervisor is None or supervisor.cpu_s is None:
        return None
    return plain.seconds / (supervisor.cpu_s + agen.seconds)


def targets(rows: list[Row]) -> list[Target]:
    by = {r.variant: r for r in rows}
    plain = by["plain read"].lines_per_s
    lags = [
        r.lag_max_ms
        for r in rows
        if r.variant.startswith("log_iter") and r.lag_max_ms is not None
    ]
    return [
        Target(
            "log_iter (finished) lines/s vs plain read",
            by["log_iter (finished)"].lines_per_s / plain,
            MIN_RATIO,
            ">=",
            "x",
        ),
        Target(
            "log_iter (followed) lines/s vs plain read (issue 32)",
            by["log_iter (followed)"].lines_per_s / plain,
            FOLLOWED_MIN_RATIO,
            ">=",
            "x",
        ),
        Target(
            "log_iter (followed) lines/s vs plain pipe read",
            by["log_iter (followed)"].lines_per_s / by["plain pipe read"].lines_per_s,
            MIN_RATIO,
            ">=",
            "x",
        ),
        Target(
            "worst event-loop lag", max(lags) if lags else None, MAX_LAG_MS, "<", "ms"
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=64, help="MiB the replica writes")
    parser.add_argument("--line-bytes", type=int, default=80, help="bytes per line")
    parser.add_argument("--repeat", type=int, default=3, help="runs per variant")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--strict", action="store_true", help="exit with 1 when a target is missed"
    )
    args = parser.parse_args(argv)
    if args.line_bytes < 11:
        parser.error("--line-bytes must be at least 11")
    with tempfile.TemporaryDirectory(prefix="asyncsched-bench-logs-") as tmp:
        os.environ.setdefault("ASYNCSCHED_STATE_DIR", os.path.join(tmp, "state"))
        rows = asyncio.run(measure(args.mib, args.line_bytes, args.repeat, tmp))
    goals = targets(rows)
    info: dict[str, Any] = {**machine_info(), **source_state(ROOT, "asyncsched")}
    print(f"## log_iter throughput ({args.mib} MiB of {args.line_bytes}-byte lines)\n")
    print(table(rows))
    print()
    print(targets_table(goals))
    ceiling = followed_ceiling(rows)
    if ceiling is not None:
        print(
            f"\nceiling of a followed read in the supervising process: {ceiling:.2f}x"
        )
    print()
    print(", ".join(f"{k}: {v}" for k, v in info.items()))
    if args.json:
        payload = {
            "rows": [asdict(r) for r in rows],
            "targets": [t.to_json() for t in goals],
            "machine": info,
        }
        args.json.write_text(json.dumps(payload, indent=2))
    missed = [t.name for t in goals if t.passed is False]
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    sys.exit(main())
