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
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT)]

from _harness import (
    TICK_S,
    serve_example,
    stats_ms,
    stats_row,
    with_example_server,
)

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


@dataclass
class Reader:
    first_event_s: float | None = None
    current_events: int = 0
    writes: int = 0  # chunks of the response body: one per write of the server
    seen: dict[str, float] = field(default_factory=dict)  # probe app -> its end
    error: str = ""


@dataclass
class Probes:
    """The apps submitted while the streams are open, and who saw them end."""

    clients: int
    expected: int
    posted: dict[str, float] = field(default_factory=dict)  # app id -> POST answered
    ready: int = 0
    all_ready: asyncio.Event = field(default_factory=asyncio.Event)
    done: int = 0
    all_done: asyncio.Event = field(default_factory=asyncio.Event)


_TERMINAL_STATES = tuple(f'"state": "{s}"'.encode() for s in TERMINAL)


class SseReader(asyncio.Protocol):
    """One ``GET /events`` read straight off its connection, as cheaply as
    possible: the client shares the machine with the server, and what it
    spends is taken from the server.

    It undoes the chunked encoding, counts ``current`` events with
    ``bytes.count`` and parses JSON only for an ``app`` event in a final
    state (the probe apps' ends); the first ``data:`` times the first event.
    """

    def __init__(self, reader: Reader, probes: Probes, request: bytes) -> None:
        self.reader, self.probes, self.request = reader, probes, request
        self.started = 0.0
        self.head: bytes | None = b""  # None once the response head is read
        self.raw = b""  # chunked body not yet undone
        self.text = b""  # SSE text not yet split into frames
        self.finished = False
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.started = time.perf_counter()
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        if self.head is not None:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            head, data, self.head = self.head[:end], self.head[end + 4 :], None
            if not head.startswith(b"HTTP/1.1 200"):
                self._finish(head.split(b"\r\n", 1)[0].decode())
                return
        self.raw += data
        while True:  # chunked transfer encoding
            line_end = self.raw.find(b"\r\n")
            if line_end < 0:
                break
            size = int(self.raw[:line_end], 16)
            if size == 0:
                self._finish("the stream ended")
                return
            start = line_end + 2
            if len(self.raw) < start + size + 2:
                break
            self.text += self.raw[start : start + size]
            self.raw = self.raw[start + size + 2 :]
            self.reader.writes += 1
        end = self.text.rfind(b"\n\n") + 2  # whole frames only (the server
        if end > 1:  # writes whole frames, but the test does not rely on it)
            self._frames(self.text[:end])
            self.text = self.text[end:]

    def _frames(self, text: bytes) -> None:
        """Count and time what the frames in ``text`` hold, with no loop over
        frames in Python but over the few ``app`` events."""
        reader = self.reader
        if self.finished or b"data: " not in text:
            return
        if reader.first_event_s is None:
            reader.first_event_s = time.perf_counter() - self.started
            self._ready()
        reader.current_events += text.count(b"event: current\n")
        at = text.find(b"event: app\n")
        while at >= 0:
            frame = text[at : text.find(b"\n\n", at)]
            if any(s in frame for s in _TERMINAL_STATES):
                data = json.loads(frame[frame.index(b"data: ") + 6 :])
                if data["app_id"] not in reader.seen:
                    reader.seen[data["app_id"]] = time.monotonic()
                    if len(reader.seen) >= self.probes.expected:
                        self._finish("")
                        return
            at = text.find(b"event: app\n", at + 1)

    def _ready(self) -> None:
        self.probes.ready += 1
        if self.probes.ready == self.probes.clients:
            self.probes.all_ready.set()

    def _finish(self, error: str) -> None:
        if self.finished:
            return
        self.finished = True
        self.reader.error = error
        if self.reader.first_event_s is None:
            self._ready()
        if self.transport is not None:
            self.transport.close()
        self.probes.done += 1
        if self.probes.done == self.probes.clients:
            self.probes.all_done.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish(f"connection lost: {exc!r}")


class Ticks:
    """The load generator's own loop lag: a 5 ms ticker, as in the server."""

    def __init__(self) -> None:
        self.ticks: list[tuple[float, float]] = []  # (time.monotonic(), lateness)

    async def run(self) -> None:
        while True:
            expected = time.monotonic() + TICK_S
            await asyncio.sleep(TICK_S)
            now = time.monotonic()
            self.ticks.append((now, max(0.0, now - expected)))

    def window(self, start: float, end: float) -> dict[str, float]:
        ms = [late * 1000.0 for t, late in self.ticks if start <= t <= end]
        return {"samples": len(ms), **stats_ms(ms)}


async def load(url: str, args: argparse.Namespace, server_pid: int) -> dict[str, Any]:
    import httpx2
    import psutil

    server = psutil.Process(server_pid)
    me = psutil.Process()
    server_url = urlsplit(url)
    host, port = server_url.hostname or "127.0.0.1", server_url.port or 80
    request = f"GET /events HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
    limits = httpx2.Limits(max_connections=None, max_keepalive_connections=None)
    loop = asyncio.get_running_loop()
    ticks = Ticks()
    ticker = asyncio.create_task(ticks.run())

    def cpu() -> tuple[float, float, float]:
        """CPU seconds: the server's, the load generator's, the server's in the kernel."""
        used = server.cpu_times()
        return used.user + used.system, sum(me.cpu_times()[:2]), used.system

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
        readers = [Reader() for _ in range(args.num_clients)]
        probes = Probes(clients=args.num_clients, expected=args.changes)
        connections: list[asyncio.Task[Any]] = []

        def open_one(reader: Reader) -> None:
            def protocol() -> SseReader:
                return SseReader(reader, probes, request)

            connect = loop.create_connection(protocol, host, port)
            connections.append(asyncio.ensure_future(connect))

        cpu_before = cpu()
        open_start = time.monotonic()
        step = args.ramp / args.num_clients
        for i, r in enumerate(readers):
            loop.call_at(loop.time() + i * step, open_one, r)
        await probes.all_ready.wait()
        opened = time.monotonic()
        cpu_opened = cpu()
        for _ in range(args.changes):  # one app every 0.5 s while all stream
            created = await http.post("/apps", json={"cmd": ["true"]})
            created.raise_for_status()
            probes.posted[created.json()["app_id"]] = time.monotonic()
            await asyncio.sleep(0.5)
        await asyncio.wait_for(probes.all_done.wait(), timeout=args.timeout)
        done = time.monotonic()
        cpu_done = cpu()
        for task in connections:
            if (exc := task.exception()) is not None:
                raise exc

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
    ticker.cancel()
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
        "full_gc_ms": {k: v["full_gc_ms"] for k, v in lags.items()},
        "client_lag_ms": {
            "opening": ticks.window(open_start, opened),
            "change": ticks.window(opened, done),
        },
        "current_events_per_stream": sorted({r.current_events for r in readers}),
        "writes_per_stream": stats_ms([float(r.writes) for r in readers]),
        "deliveries": len(change_ms),
        "errors": [r.error for r in readers if r.error][:5],
        "server_peak_rss_mb": lags["change"]["peak_rss_mb"],
        "server_cpu_s": {
            "opening": cpu_opened[0] - cpu_before[0],
            "change": cpu_done[0] - cpu_opened[0],
        },
        "server_kernel_cpu_s": {
            "opening": cpu_opened[2] - cpu_before[2],
            "change": cpu_done[2] - cpu_opened[2],
        },
        "client_cpu_s": {
            "opening": cpu_opened[1] - cpu_before[1],
            "change": cpu_done[1] - cpu_opened[1],
        },
        "loadavg_1m": os.getloadavg()[0],
    }


def report(r: dict[str, Any]) -> str:
    lag, client = r["lag_ms"], r["client_lag_ms"]
    cpu, own = r["server_cpu_s"], r["client_cpu_s"]
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
            stats_row("load generator loop lag, opening", client["opening"], 1),
            stats_row("load generator loop lag, all streaming", client["change"], 1),
            "",
            f"deliveries {r['deliveries']}/{r['streams'] * r['changes']},"
            + f" current events per stream {r['current_events_per_stream']},"
            + " body writes per stream p50 / max"
            + f" {r['writes_per_stream']['p50']:.0f} / {r['writes_per_stream']['max']:.0f},"
            + f" errors {len(r['errors'])}; server peak RSS"
            + f" {r['server_peak_rss_mb']:.0f} MiB; CPU s opening / streaming:"
            + f" server {cpu['opening']:.2f} / {cpu['change']:.2f},"
            + f" load generator {own['opening']:.2f} / {own['change']:.2f};"
            + f" load average {r['loadavg_1m']:.1f}",
            "server full garbage collections opening / streaming: "
            + " / ".join(
                f"{g['count']} ({g['total']:.0f} ms, longest {g['max']:.0f})"
                for g in r["full_gc_ms"].values()
            ),
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
