"""A process that owns a LocalScheduler, for the orphan and cross-process tests.

Usage: ``python -m tests.local._owner LOG_DIR SCRIPT [REPLICAS]``. Prints one JSON
line ``{"app_id": ..., "pids": [...]}`` once the replicas run, then waits. SIGINT
raises KeyboardInterrupt in it, whatever the parent ignores.
"""

from __future__ import annotations

import json
import signal
import sys

import anyio

from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppDef, Role


async def main(log_dir: str, script: str, replicas: int) -> None:
    async with LocalScheduler("owned", close_grace=0.5, cancel_grace=1.0) as sched:
        role = Role(
            "w", "/", entrypoint="sh", args=["-c", script], num_replicas=replicas
        )
        app_id = await sched.submit(AppDef("owned", roles=[role]), {"log_dir": log_dir})
        desc = await sched.describe(app_id)
        assert desc is not None
        pids = [r.pid for r in desc.roles_statuses[0].replicas]
        sys.stdout.write(json.dumps({"app_id": app_id, "pids": pids}) + "\n")
        sys.stdout.flush()
        await sched.wait(app_id)
        await anyio.sleep(100)


if __name__ == "__main__":
    # SIGINT raises KeyboardInterrupt even when this process was started with
    # it ignored (as under nohup or a CI runner's background job)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    anyio.run(
        main, sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 2
    )
