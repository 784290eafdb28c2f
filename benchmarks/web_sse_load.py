"""Load test of the web example: N concurrent SSE log streams from one uvicorn worker.

The script starts ``docs/examples/asgi_app.py`` under one uvicorn worker in a
child process (this script with ``--serve``), on a loopback socket it binds
and hands over. Then N clients (default 200) at once each ``POST /apps`` an
app that prints ``--lines`` lines ``--interval`` seconds apart (one ``perl``
process per app, ``sh`` + ``sleep`` without perl) and reads
``GET /apps/{id}/logs`` until the ``end`` event.

Measured:

* time to first line, per client: from the start of its ``POST`` (submit
  included) and from the opening of its stream; p50, p99, max;
* the server's event-loop lag: a ticker task in the server process (started
  from the lifespan) sleeps 5 ms in a loop and records how late it wakes;
  ``/_bench/lag`` reports it per window: idle (1 s before the load), the whole
  load, the submit burst (until every ``POST`` was answered) and after it
  (streaming only);
* the server's peak RSS and CPU seconds; every line received, every app
  SUCCEEDED.

The load generator (httpx2) runs on the same machine and competes for its
CPUs: the numbers are an upper bound on what the server alone would show.

Usage:
    python benchmarks/web_sse_load.py [-n 200] [--lines 15] [--interval 0.2]
        [--json results.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT)]

from _harness import (
    machine_info,
    peak_rss_bytes,
    percentile,
    raise_nofile_limit,
)

MiB = 1024 * 1024


# -- the server (child process) ------------------------------------------------


TICK_S = 0.005


def serve(fd: int) -> None:
    """Run the example under uvicorn on the inherited socket ``fd``, with a lag probe.

    A ticker task, started in the lifespan, sleeps 5 ms in a loop and records
    ``(time.monotonic(), lateness)``; ``GET /_bench/lag?start=&end=`` answers
    the statistics of the ticks in that window (monotonic clock seconds, the
    same clock in every process).
    """
    import anyio
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

    from docs.examples.asgi_app import app

    ticks: list[tuple[float, float]] = []

    async def ticker() -> None:
        while True:
            expected = time.monotonic() + TICK_S
            await anyio.sleep(TICK_S)
            now = time.monotonic()
            ticks.append((now, max(0.0, now - expected)))

    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Starlette) -> AsyncIterator[Any]:
        async with inner(a) as state, anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            yield state
            tg.cancel_scope.cancel()

    async def lag(request: Request) -> Response:
        start = float(request.query_params.get("start", "0"))
        end = float(request.query_params.get("end", "inf"))
        ms = [lag * 1000.0 for t, lag in ticks if start <= t <= end]
        stats = {"samples": len(ms), **_stats(ms)}
        return JSONResponse({**stats, "peak_rss_mb": peak_rss_bytes() / MiB})

    app.router.lifespan_context = lifespan
    app.add_route("/_bench/lag", lag)
    raise_nofile_limit()
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2)
    uvicorn.Server(config).run(sockets=[socket.socket(fileno=fd)])


# -- the load generator (parent) -----------------------------------------------


@dataclass
class Client:
    submitted_at: float = 0.0  # time.monotonic() when its POST answered
    submit_s: float = 0.0
    first_line_s: float | None = None  # from the POST
    first_line_after_open_s: float | None = None  # from opening the stream
    lines: int = 0
    state: str = ""
    error: str = ""


def app_command(lines: int, interval: float) -> list[str]:
    if shutil.which("perl"):
        code = f'$|=1; for (1..{lines}) {{ print "line $_\\n"; select(undef,undef,undef,{interval}) }}'
        return ["perl", "-e", code]
    loop = f'i=1; while [ $i -le {lines} ]; do echo "line $i"; sleep {interval}; i=$((i+1)); done'
    return ["sh", "-c", loop]


async def one_client(http: Any, cmd: list[str], client: Client) -> None:
    started = time.perf_counter()
    try:
        created = await http.post("/apps", json={"cmd": cmd})
        created.raise_for_status()
        client.submitted_at = time.monotonic()
        client.submit_s = time.perf_counter() - started
        opened = time.perf_counter()
        path = f"/apps/{created.json()['app_id']}/logs"
        async with http.stream("GET", path) as response:
            event = "message"
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    event = line.removeprefix("event: ")
                elif line.startswith("data: ") and event == "end":
                    client.state = json.loads(line.removeprefix("data: "))["state"]
                elif line.startswith("data: "):
                    if client.first_line_s is None:
                        now = time.perf_counter()
                        client.first_line_s = now - started
                        client.first_line_after_open_s = now - opened
                    client.lines += 1
    except Exception as exc:  # noqa: BLE001 -- counted and reported
        client.error = repr(exc)


async def load(url: str, args: argparse.Namespace, server_pid: int) -> dict[str, Any]:
    import httpx2
    import psutil

    server = psutil.Process(server_pid)
    limits = httpx2.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx2.AsyncClient(base_url=url, timeout=120, limits=limits) as http:

        async def lag(start: float, end: float) -> dict[str, Any]:
            window = {"start": start, "end": end}
            answer: dict[str, Any] = (
                await http.get("/_bench/lag", params=window)
            ).json()
            return answer

        (await http.get("/apps")).raise_for_status()  # uvicorn has started
        idle_start = time.monotonic()
        await asyncio.sleep(1.0)
        idle_end = time.monotonic()
        cpu_before = sum(server.cpu_times()[:2])
        cmd = app_command(args.lines, args.interval)
        clients = [Client() for _ in range(args.num_clients)]
        started, load_start = time.perf_counter(), time.monotonic()
        await asyncio.gather(*(one_client(http, cmd, c) for c in clients))
        wall, load_end = time.perf_counter() - started, time.monotonic()
        cpu = sum(server.cpu_times()[:2]) - cpu_before
        submitted = max((c.submitted_at for c in clients), default=load_start)
        lags = {
            "idle": await lag(idle_start, idle_end),
            "load": await lag(load_start, load_end),
            "submits": await lag(load_start, submitted),
            "streaming": await lag(submitted, load_end),
        }
    first = [c.first_line_s for c in clients if c.first_line_s is not None]
    after_open = [
        c.first_line_after_open_s
        for c in clients
        if c.first_line_after_open_s is not None
    ]
    submit = [c.submit_s for c in clients if c.submit_s]
    return {
        "clients": args.num_clients,
        "lines_per_app": args.lines,
        "interval_s": args.interval,
        "command": cmd[0],
        "wall_s": wall,
        "submit_burst_s": submitted - load_start,
        "lines_received": sum(c.lines for c in clients),
        "lines_expected": args.num_clients * args.lines,
        "succeeded": sum(c.state == "SUCCEEDED" for c in clients),
        "errors": [c.error for c in clients if c.error][:5],
        "submit_ms": _stats([s * 1000.0 for s in submit]),
        "first_line_ms": _stats([s * 1000.0 for s in first]),
        "first_line_after_open_ms": _stats([s * 1000.0 for s in after_open]),
        "lag_ms": {
            window: {k: v for k, v in stats.items() if k != "peak_rss_mb"}
            for window, stats in lags.items()
        },
        "server_peak_rss_mb": lags["streaming"]["peak_rss_mb"],
        "server_cpu_s": cpu,
    }


def _stats(ms: list[float]) -> dict[str, float]:
    return {
        "p50": percentile(ms, 50),
        "p99": percentile(ms, 99),
        "max": max(ms, default=float("nan")),
    }


LAG_WINDOWS = {
    "idle": "idle, 1 s before",
    "load": "whole load",
    "submits": "until every POST answered",
    "streaming": "after that (streaming only)",
}


def _row(name: str, stats: dict[str, float], digits: int = 0) -> str:
    p50, p99, top = (f"{stats[k]:.{digits}f}" for k in ("p50", "p99", "max"))
    return f"| {name} | {p50} | {p99} | {top} |"


def report(r: dict[str, Any]) -> str:
    """The results as a markdown table and a summary line."""
    lag = r["lag_ms"]
    return "\n".join(
        [
            f"{r['clients']} concurrent SSE log streams, one uvicorn worker;"
            + f" {r['lines_per_app']} lines per app, {r['interval_s']} s apart"
            + f" ({r['command']}); wall {r['wall_s']:.2f} s, of which"
            + f" {r['submit_burst_s']:.2f} s until every POST was answered",
            "",
            "| ms | p50 | p99 | max |",
            "|---|---:|---:|---:|",
            _row("submit (POST /apps)", r["submit_ms"]),
            _row("time to first line, from the POST", r["first_line_ms"]),
            _row(
                "time to first line, from opening the stream",
                r["first_line_after_open_ms"],
            ),
            *(
                _row(
                    f"server loop lag, {name} ({lag[key]['samples']} ticks)",
                    lag[key],
                    1,
                )
                for key, name in LAG_WINDOWS.items()
            ),
            "",
            f"lines received {r['lines_received']}/{r['lines_expected']},"
            + f" SUCCEEDED {r['succeeded']}/{r['clients']}, errors {len(r['errors'])};"
            + f" server peak RSS {r['server_peak_rss_mb']:.0f} MiB,"
            + f" server CPU {r['server_cpu_s']:.1f} s",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--num-clients", type=int, default=200)
    parser.add_argument("--lines", type=int, default=15, help="lines per app")
    parser.add_argument("--interval", type=float, default=0.2, help="s between lines")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    parser.add_argument("--serve", type=int, metavar="FD", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve is not None:
        serve(args.serve)
        return 0

    raise_nofile_limit()
    with tempfile.TemporaryDirectory(prefix="asyncsched-web-bench-") as tmp:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(1024)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        env = {**os.environ, "ASYNCSCHED_STATE_DIR": str(Path(tmp) / "state")}
        proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(sock.fileno())],
            cwd=ROOT,
            env=env,
            pass_fds=[sock.fileno()],
        )
        sock.close()
        try:
            result = asyncio.run(load(url, args, proc.pid))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    result["machine"] = machine_info()
    print(report(result))
    if result["errors"]:
        print("first errors:", *result["errors"], sep="\n  ")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    ok = result["succeeded"] == args.num_clients
    return 0 if ok and result["lines_received"] == result["lines_expected"] else 1


if __name__ == "__main__":
    sys.exit(main())
