"""An orchestrator that submits detached and attached apps, for the detach test.

Usage: ``python -m tests.local._detached_owner RELEASE_FILE``. Submits, in
session ``det``: ``waits`` (detached; exits 5 once RELEASE_FILE exists),
``long`` (detached; sleeps) and ``attached`` (the default; sleeps). Prints one
JSON line ``{name: [app_id, pid]}`` once all three run, then waits to be killed.
"""

from __future__ import annotations

import json
import sys

import anyio

from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppDef, Role


def _app(name: str, script: str) -> AppDef:
    return AppDef(name, roles=[Role("w", "/", entrypoint="sh", args=["-c", script])])


async def main(release: str) -> None:
    wait_then_fail = f"while [ ! -e {release} ]; do sleep 0.05; done; exit 5"
    apps = {
        "waits": (_app("waits", wait_then_fail), {"detach": True}),
        "long": (_app("long", "sleep 60"), {"detach": True}),
        "attached": (_app("attached", "sleep 60"), {}),
    }
    async with LocalScheduler("det", cancel_grace=1.0) as sched:
        out = {}
        for name, (app, cfg) in apps.items():
            app_id = await sched.submit(app, cfg)
            desc = await sched.describe(app_id)
            assert desc is not None
            [replica] = desc.roles_statuses[0].replicas
            assert replica.pid is not None
            out[name] = [app_id, replica.pid]
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
        await anyio.sleep(1000)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
