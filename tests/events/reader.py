"""A resumable event reader, run as its own process by the chaos tests.

``python -m tests.events.reader SPEC_JSON`` where the spec holds
``scheduler``, ``session``, ``params`` (factory keyword arguments),
``cursor_file`` and ``out``. It resumes from the cursor file (if any), appends
each event as a JSON line to ``out`` (flushed), *then* saves the event's
cursor (write to a temp file, rename): a kill between the two re-delivers the
event after the restart, which is the at-least-once boundary the tests allow.
It prints ``ready`` once it runs and ``open`` once its stream is connected
and its first batch arrived: the first event written and saved, or, when the
stream starts with a CURRENT burst (no cursor, a cursor inside a burst, a
RESYNC), the whole burst. ``Scheduler.events`` connects on the first read,
so a reader killed before that would test nothing of the resume path: the
chaos kills wait for ``open``. An engine that is down (restarting) is waited
for, as a supervised reader would be restarted until it connects.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio

from asyncsched import SchedulerUnavailableError, get_scheduler
from asyncsched.schedulers.kit import burst_restart


def _save(path: Path, cursor: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(cursor)
    os.replace(tmp, path)


async def main(spec: dict[str, Any]) -> None:
    print("ready", flush=True)  # noqa: T201 -- the parent waits for it
    cursor_file = Path(spec["cursor_file"])
    opened = anyio.Event()
    # like a reader under a supervisor (systemd, a pod): an engine that is
    # down (restarting) is waited for, and the reader resumes from its cursor
    while True:
        try:
            await _follow(spec, cursor_file, opened)
            return
        except* SchedulerUnavailableError:
            pass  # bare or from inside the scheduler's task group
        await anyio.sleep(0.5)


async def _follow(spec: dict[str, Any], cursor_file: Path, opened: anyio.Event) -> None:
    since = cursor_file.read_text() if cursor_file.exists() else None
    async with get_scheduler(
        spec["scheduler"], spec["session"], **spec.get("params", {})
    ) as sched:
        async with sched.events(since=since) as stream:
            with open(spec["out"], "a", encoding="utf-8") as out:
                async for event in stream:
                    out.write(
                        json.dumps({"pid": os.getpid(), **event.to_json()}) + "\n"
                    )
                    out.flush()
                    _save(cursor_file, event.cursor)
                    # a burst's events but the last resume the whole burst
                    if not opened.is_set() and burst_restart(event.cursor) is None:
                        opened.set()
                        print("open", flush=True)  # noqa: T201 -- the kills wait


if __name__ == "__main__":
    anyio.run(main, json.loads(sys.argv[1]))
