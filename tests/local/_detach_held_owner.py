"""A submitter held between "the detached app runs" and its ack, for the detach test.

Usage: ``python -m tests.local._detach_held_owner SESSION MARKER ACK_TIMEOUT``.
Submits, detached, an app whose replica sleeps (``MARKER`` in its command
line), its supervisor waiting ``ACK_TIMEOUT`` seconds for the ack; once the
supervisor has given the app id, prints it as one line and waits there,
before acknowledging it, to be killed.
"""

from __future__ import annotations

import sys
import threading

import anyio

from asyncsched.schedulers.local import LocalFaults
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppDef, Role


def _hold(app_id: str) -> None:
    sys.stdout.write(app_id + "\n")
    sys.stdout.flush()
    threading.Event().wait()  # blocks this process until it is killed


async def main(session: str, marker: str, ack_timeout: str) -> None:
    role = Role("w", "/", entrypoint="sh", args=["-c", f"sleep 60; : {marker}"])
    faults = LocalFaults(before_detach_ack=_hold, detach_ack_timeout=float(ack_timeout))
    async with LocalScheduler(session, cancel_grace=1.0, faults=faults) as sched:
        await sched.submit(AppDef("held", roles=[role]), {"detach": True})


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3])
