"""A resumable event reader, run as its own process by the chaos tests.

``python -m tests.events.reader SPEC_JSON`` where the spec holds
``scheduler``, ``session``, ``params`` (factory keyword arguments),
``cursor_file`` and ``out``. It resumes from the cursor file (if any), appends
each event as a JSON line to ``out`` (flushed), *then* saves the event's
cursor (write to a temp file, rename): a kill between the two re-delivers the
event after the restart, which is the at-least-once boundary the tests allow.
It prints ``ready`` once it runs and ``open`` each time its event stream is
open (the chaos kills wait for that: a reader killed before it connected
would test nothing); an engine that is down (restarting) is waited for, as a
supervised reader would be restarted until it connects.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio

from asyncsched import SchedulerUnavailableError, get_scheduler


def _save(path: Path, cursor: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(cursor)
    os.replace(tmp, path)


async def main(spec: dict[str, Any]) -> None:
    print("ready", flush=True)  # noqa: T201 -- the parent waits for it
    cursor_file = Path(spec["cursor_file"])
    # like a reader under a supervisor (systemd, a pod): an engine that is
    # down (restarting) is waited for, and the reader resumes from its cursor
    while True:
        try:
            await _follow(spec, cursor_file)
            return
        except* SchedulerUnavailableError:
            pass  # bare or from inside the scheduler's task group
        await anyio.sleep(0.5)


async def _follow(spec: dict[str, Any], cursor_file: Path) -> None:
    since = cursor_file.read_text() if cursor_file.exists() else None
    async with get_scheduler(
        spec["scheduler"], spec["session"], **spec.get("params", {})
    ) as sched:
        async with sched.events(since=since) as stream:
            print("open", flush=True)  # noqa: T201 -- the chaos kills wait for it
            with open(spec["out"], "a", encoding="utf-8") as out:
                async for event in stream:
                    out.write(
                        json.dumps({"pid": os.getpid(), **event.to_json()}) + "\n"
                    )
                    out.flush()
                    _save(cursor_file, event.cursor)


if __name__ == "__main__":
    anyio.run(main, json.loads(sys.argv[1]))
