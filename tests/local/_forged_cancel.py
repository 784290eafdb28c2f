"""Cancel an app whose record names a dangerous pid, for the forged-record tests.

Usage: ``python -m tests.local._forged_cancel SESSION APP_ID RECORD CASE`` with
CASE one of ``0``, ``1``, ``-1``, ``own-group`` or ``caller-group``. The
process first leads a session of its own (so ``killpg(0)`` cannot reach its
parent) and starts a canary (``sleep``) in its group; then it writes the pid
of CASE (with that process's real start time, as an attacker would read it
from ``/proc``) into the record and cancels the app -- for ``caller-group``
from a child in its group (the record names the canceller's group, not its
pid, as when a replica's script runs ``asyncsched cancel``). It prints ``outcome: cancelled`` or
``outcome: refused: <error>``, then ``canary: alive`` or ``canary: dead``.

A pid of 1 is ``kill(-1)``: run it only in a PID namespace of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import anyio

from asyncsched.errors import SchedulerError
from asyncsched.schedulers.local_scheduler import LocalScheduler


def _start_time(pid: int) -> int | None:
    if pid <= 0:
        return None
    with open(f"/proc/{pid}/stat", "rb") as f:
        data = f.read()
    return int(data[data.rfind(b")") + 2 :].split()[19])


async def _cancel(session: str, app_id: str) -> str:
    async with LocalScheduler(session, cancel_grace=0.5) as sched:
        try:
            await sched.cancel(app_id)
        except SchedulerError as exc:
            return f"refused: {exc}"
    return "cancelled"


def main(session: str, app_id: str, record_path: str, case: str) -> None:
    os.setsid()
    # Popen returns once the canary has exec'd sleep: it is ready
    canary = subprocess.Popen(["sleep", "60"])
    pid = os.getpgrp() if case in ("own-group", "caller-group") else int(case)
    with open(record_path, encoding="utf-8") as f:
        record = json.load(f)
    for reps in record["roles"].values():
        for r in reps:
            r["pid"] = pid
            r["start_time"] = _start_time(pid)
    with open(record_path, "w", encoding="utf-8") as f:
        json.dump(record, f)
    if case == "caller-group":  # the canceller is a member, not the leader
        child = subprocess.run(
            [
                sys.executable,
                "-m",
                "tests.local._forged_cancel",
                "cancel",
                session,
                app_id,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        outcome = child.stdout.strip() or f"killed ({child.returncode})"
    else:
        outcome = anyio.run(_cancel, session, app_id)
    sys.stdout.write(f"outcome: {outcome}\n")
    try:  # a SIGKILL sent by the cancel lands within this wait
        canary.wait(timeout=0.5)
    except subprocess.TimeoutExpired:
        sys.stdout.write("canary: alive\n")
    else:
        sys.stdout.write("canary: dead\n")
    sys.stdout.flush()
    canary.kill()
    canary.wait()


if __name__ == "__main__":
    if sys.argv[1] == "cancel":  # the canceller of the caller-group case
        sys.stdout.write(anyio.run(_cancel, sys.argv[2], sys.argv[3]))
    else:
        main(*sys.argv[1:5])
