"""Docker events: how long from a change in the engine to the event at a reader.

One reader follows a session with ``DockerScheduler.events()`` while another
scheduler submits N apps in waves (a quarter fail with exit 3, the rest
succeed). For every live event the latency is the reader's clock when the
event arrived minus :attr:`AppEvent.observed` (the engine's ``timeNano`` of
the change; same host, same clock). Reported: count, p50/p95/p99/max,
event-loop lag of the reader's process (the submitter shares the loop, so
this is a pessimistic reading) and the reader's Engine API calls by kind
(it inspects a container only when the event alone cannot tell its state,
e.g. an exit its restart policy may undo; nothing is polled).

Needs a Docker engine (``$DOCKER_HOST`` or the standard socket; with
``--private-daemon`` or when none answers and we are root a private
``dockerd`` is started and stopped) and ``/bin/busybox`` (static) for the
test image. Everything created is removed.

Usage::

    python benchmarks/docker_events.py [--apps 100] [--wave 10]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _harness import LoopLagSampler, percentile
from docker_fanout import IMAGE, NETWORK, _engine, _ensure_image

from tests.docker.helpers import counting_client

SESSION = f"bench-events-{os.getpid()}"


async def measure(apps: int, wave: int) -> dict[str, Any]:
    """Run the workload; the latencies and calls of the reader."""
    from asyncsched.schedulers.docker_scheduler import DockerScheduler
    from asyncsched.specs import AppDef, Role

    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    latencies: list[float] = []
    app_ids: set[str] = set()
    ended: set[str] = set()
    all_ended = asyncio.Event()
    async with (
        counting_client(host) as (client, counter),
        DockerScheduler(SESSION, client=client, network=NETWORK) as reader,
        DockerScheduler(SESSION, network=NETWORK) as submitter,
        LoopLagSampler() as lag,
    ):

        async def follow() -> None:
            async with reader.events() as stream:
                async for event in stream:
                    if event.kind in ("current", "resync"):
                        continue
                    latencies.append(time.time() - event.observed)
                    if event.terminal:
                        ended.add(event.app_id)
                        if app_ids and ended >= app_ids and len(app_ids) == apps:
                            all_ended.set()

        task = asyncio.create_task(follow())
        await asyncio.sleep(1.0)  # the stream is open
        started = time.perf_counter()
        for first in range(0, apps, wave):
            batch = []
            for i in range(first, min(first + wave, apps)):
                code = 3 if i % 4 == 0 else 0
                role = Role(
                    "worker",
                    image=IMAGE,
                    entrypoint="sh",
                    args=["-c", f"sleep 0.2; exit {code}"],
                )
                batch.append(submitter.submit(AppDef("ev", roles=[role])))
            app_ids.update(await asyncio.gather(*batch))
        if ended >= app_ids:
            all_ended.set()
        done, _ = await asyncio.wait(
            [task, asyncio.create_task(all_ended.wait())],
            timeout=300,
            return_when=asyncio.FIRST_COMPLETED,
        )
        if task in done:
            task.result()  # the reader failed: say why
            raise SystemExit("the reader ended early")
        if not all_ended.is_set():
            raise SystemExit(f"{len(app_ids - ended)} apps never ended at the reader")
        wall = time.perf_counter() - started
        task.cancel()
        calls = collections.Counter(
            re.sub(r"/containers/[0-9a-f]{12,}/", "/containers/{id}/", p)
            for p in counter.paths
        )
        for app_id in app_ids:
            await submitter.delete(app_id)
    return {
        "apps": apps,
        "events": len(latencies),
        "wall_s": round(wall, 2),
        "p50_ms": round(percentile(latencies, 50) * 1000, 1),
        "p95_ms": round(percentile(latencies, 95) * 1000, 1),
        "p99_ms": round(percentile(latencies, 99) * 1000, 1),
        "max_ms": round(max(latencies) * 1000, 1),
        "loop_lag_p99_ms": lag.p99_ms,
        "reader_calls": dict(calls.most_common()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apps", type=int, default=100)
    parser.add_argument("--wave", type=int, default=10)
    parser.add_argument("--private-daemon", action="store_true")
    args = parser.parse_args()
    with _engine(args.private_daemon):
        _ensure_image()
        result = asyncio.run(measure(args.apps, args.wave))
    print(json.dumps(result, indent=2))
    target = "met" if result["p99_ms"] <= 1000 else "MISSED"
    print(f"change -> event p99 {result['p99_ms']} ms (target <= 1000 ms: {target})")


if __name__ == "__main__":
    main()
