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
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT)]

from _harness import serve_example, stats_ms, stats_row, with_example_server

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
        "submit_ms": stats_ms([s * 1000.0 for s in submit]),
        "first_line_ms": stats_ms([s * 1000.0 for s in first]),
        "first_line_after_open_ms": stats_ms([s * 1000.0 for s in after_open]),
        "lag_ms": {
            window: {k: v for k, v in stats.items() if k != "peak_rss_mb"}
            for window, stats in lags.items()
        },
        "server_peak_rss_mb": lags["streaming"]["peak_rss_mb"],
        "server_cpu_s": cpu,
    }


LAG_WINDOWS = {
    "idle": "idle, 1 s before",
    "load": "whole load",
    "submits": "until every POST answered",
    "streaming": "after that (streaming only)",
}


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
            stats_row("submit (POST /apps)", r["submit_ms"]),
            stats_row("time to first line, from the POST", r["first_line_ms"]),
            stats_row(
                "time to first line, from opening the stream",
                r["first_line_after_open_ms"],
            ),
            *(
                stats_row(
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
        serve_example(args.serve)
        return 0

    def run(url: str, server_pid: int) -> Any:
        return load(url, args, server_pid)

    result = with_example_server(__file__, run, backlog=1024, stop_timeout=30)
    print(report(result))
    if result["errors"]:
        print("first errors:", *result["errors"], sep="\n  ")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    ok = result["succeeded"] == args.num_clients
    return 0 if ok and result["lines_received"] == result["lines_expected"] else 1


if __name__ == "__main__":
    sys.exit(main())
