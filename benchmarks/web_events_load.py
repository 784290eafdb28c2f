"""Load test of the web example's event streams: N concurrent ``GET /events`` on one worker.

The server is ``docs/examples/asgi_app.py`` under one uvicorn worker, started
as in ``web_sse_load.py`` (same lag probe: a 5 ms ticker in the server's
loop, read back through ``/_bench/lag``), with room for the N streams
(``ASYNCSCHED_WEB_MAX_STREAMS``). Before the load, ``--apps`` apps (default
20) are submitted and finished, so every stream starts with that many
``current`` events.

Then N clients (default 1,000) open ``GET /events``, spread over ``--ramp``
seconds (default 5; 0: all at once, a reconnect storm), and once every one
has its first event, ``--changes`` apps (default 10) are submitted 0.5 s
apart; each client reads until it has seen all of them end. Measured:

* time to first event, per client, from sending its request; p50, p99, max;
* an app's end at every stream, from its ``POST`` answered (the app's own
  run included), and the spread between the first and the last stream to
  get the same change;
* the server's event-loop lag while the streams open and while they all
  stream, its peak RSS and CPU seconds.

The load generator runs on the same machine and competes for its CPUs; it
reads the streams over plain sockets (an HTTP client's connection pool,
scanned per request, would cost more than the server at 1,000 connections).

Usage:
    python benchmarks/web_events_load.py [-n 1000] [--apps 20] [--json results.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT)]

from _harness import serve_example, stats_ms, stats_row, with_example_server

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


@dataclass
class Reader:
    first_event_s: float | None = None
    current_events: int = 0
    seen: dict[str, float] = field(default_factory=dict)  # probe app -> its end
    error: str = ""


@dataclass
class Probes:
    """The apps submitted while the streams are open, and who saw them end."""

    expected: int
    posted: dict[str, float] = field(default_factory=dict)  # app id -> POST answered
    ready: int = 0
    all_ready: asyncio.Event = field(default_factory=asyncio.Event)


async def sse_frames(host: str, port: int, path: str) -> AsyncIterator[bytes]:
    """The frames of one SSE response, read over a plain socket (an HTTP
    client's pool, scanned per request, would cost more than the server)."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        request = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n"
        writer.write(request.encode())
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(head.split(b"\r\n", 1)[0].decode())
        buffer = b""
        while True:  # chunked transfer encoding
            size = int((await reader.readuntil(b"\r\n")).strip(), 16)
            if size == 0:
                return
            buffer += (await reader.readexactly(size + 2))[:-2]
            *frames, buffer = buffer.split(b"\n\n")
            for frame in frames:
                yield frame
    finally:
        writer.close()


async def one_reader(
    address: tuple[str, int], reader: Reader, probes: Probes, n: int, delay: float
) -> None:
    await asyncio.sleep(delay)
    started = time.perf_counter()

    def ready() -> None:
        probes.ready += 1
        if probes.ready == n:
            probes.all_ready.set()

    try:
        async for frame in sse_frames(*address, "/events"):
            lines = frame.split(b"\n")
            data_line = next((x for x in lines if x.startswith(b"data: ")), None)
            if data_line is None:
                continue
            if reader.first_event_s is None:
                reader.first_event_s = time.perf_counter() - started
                ready()
            data = json.loads(data_line.removeprefix(b"data: "))
            if data["kind"] == "current":
                reader.current_events += 1
            elif data["state"] in TERMINAL and data["app_id"] not in reader.seen:
                reader.seen[data["app_id"]] = time.monotonic()
                if len(reader.seen) >= probes.expected:
                    return
    except Exception as exc:  # noqa: BLE001 -- counted and reported
        reader.error = repr(exc)
        if reader.first_event_s is None:
            ready()


async def load(url: str, args: argparse.Namespace, server_pid: int) -> dict[str, Any]:
    import httpx2
    import psutil

    server = psutil.Process(server_pid)
    server_url = urlsplit(url)
    limits = httpx2.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx2.AsyncClient(base_url=url, timeout=300, limits=limits) as http:
        (await http.get("/apps")).raise_for_status()
        for _ in range(args.apps):
            created = await http.post("/apps", json={"cmd": ["true"]})
            created.raise_for_status()
            app_id = created.json()["app_id"]
            async with http.stream("GET", f"/apps/{app_id}/events") as ended:
                async for _ in ended.aiter_lines():
                    pass
        await asyncio.sleep(1.0)
        cpu_before = sum(server.cpu_times()[:2])
        readers = [Reader() for _ in range(args.num_clients)]
        probes = Probes(expected=args.changes)
        address = (server_url.hostname or "127.0.0.1", server_url.port or 80)
        open_start = time.monotonic()
        step = args.ramp / args.num_clients
        tasks = [
            asyncio.create_task(
                one_reader(address, r, probes, args.num_clients, i * step)
            )
            for i, r in enumerate(readers)
        ]
        await probes.all_ready.wait()
        opened = time.monotonic()
        for _ in range(args.changes):  # one app every 0.5 s while all stream
            created = await http.post("/apps", json={"cmd": ["true"]})
            created.raise_for_status()
            probes.posted[created.json()["app_id"]] = time.monotonic()
            await asyncio.sleep(0.5)
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=args.timeout)
        done = time.monotonic()
        cpu = sum(server.cpu_times()[:2]) - cpu_before

        async def lag(start: float, end: float) -> dict[str, Any]:
            window = {"start": start, "end": end}
            answer: dict[str, Any] = (
                await http.get("/_bench/lag", params=window)
            ).json()
            return answer

        lags = {
            "opening": await lag(open_start, opened),
            "change": await lag(opened, done),
        }
    first_ms = [r.first_event_s * 1000 for r in readers if r.first_event_s is not None]
    change_ms = [
        (at - probes.posted[app]) * 1000
        for r in readers
        for app, at in r.seen.items()
        if app in probes.posted
    ]
    spread_ms = []
    for app in probes.posted:
        times = [r.seen[app] for r in readers if app in r.seen]
        if times:
            spread_ms.append((max(times) - min(times)) * 1000)
    return {
        "streams": args.num_clients,
        "apps_before": args.apps,
        "open_s": opened - open_start,
        "first_event_ms": stats_ms(first_ms),
        "ramp_s": args.ramp,
        "changes": args.changes,
        "change_to_delivery_ms": stats_ms(change_ms),
        "fan_out_spread_ms": stats_ms(spread_ms),
        "lag_ms": {
            k: {x: v[x] for x in ("samples", "p50", "p99", "max")}
            for k, v in lags.items()
        },
        "current_events_per_stream": sorted({r.current_events for r in readers}),
        "deliveries": len(change_ms),
        "errors": [r.error for r in readers if r.error][:5],
        "server_peak_rss_mb": lags["change"]["peak_rss_mb"],
        "server_cpu_s": cpu,
    }


def report(r: dict[str, Any]) -> str:
    lag = r["lag_ms"]
    ramp = f"opened over {r['ramp_s']:g} s" if r["ramp_s"] else "opened at once"
    return "\n".join(
        [
            f"{r['streams']} concurrent GET /events streams on one uvicorn worker,"
            + f" {ramp} (all delivering after {r['open_s']:.2f} s), {r['apps_before']}"
            + f" apps before; then {r['changes']} apps submitted 0.5 s apart",
            "",
            "| ms | p50 | p99 | max |",
            "|---|---:|---:|---:|",
            stats_row("time to first event, from the request", r["first_event_ms"]),
            stats_row(
                "an app's end at every stream, from its POST",
                r["change_to_delivery_ms"],
            ),
            stats_row(
                "first to last stream getting the same change", r["fan_out_spread_ms"]
            ),
            stats_row(
                f"server loop lag, streams opening ({lag['opening']['samples']} ticks)",
                lag["opening"],
                1,
            ),
            stats_row(
                f"server loop lag, all streaming ({lag['change']['samples']} ticks)",
                lag["change"],
                1,
            ),
            "",
            f"deliveries {r['deliveries']}/{r['streams'] * r['changes']},"
            + f" current events per stream {r['current_events_per_stream']},"
            + f" errors {len(r['errors'])}; server peak RSS"
            + f" {r['server_peak_rss_mb']:.0f} MiB, server CPU {r['server_cpu_s']:.1f} s",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--num-clients", type=int, default=1000)
    parser.add_argument("--apps", type=int, default=20, help="apps before the load")
    parser.add_argument(
        "--ramp",
        type=float,
        default=5.0,
        help="s over which the streams open (0: at once)",
    )
    parser.add_argument(
        "--changes", type=int, default=10, help="apps submitted while all stream"
    )
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    parser.add_argument("--serve", type=int, metavar="FD", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve is not None:
        serve_example(args.serve)
        return 0

    def run(url: str, server_pid: int) -> Any:
        return load(url, args, server_pid)

    env = {"ASYNCSCHED_WEB_MAX_STREAMS": str(args.num_clients + 16)}
    result = with_example_server(__file__, run, backlog=4096, env=env)
    print(report(result))
    if result["errors"]:
        print("first errors:", *result["errors"], sep="\n  ")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0 if result["deliveries"] == args.num_clients * args.changes else 1


if __name__ == "__main__":
    sys.exit(main())
