"""The README's main job: a 3-replica app on ``local_cwd``, logs streamed live.

Each replica prints its ids, computes a slice of a sum of squares and prints
its partial result. The runner submits the app, the logs of all replicas are
followed concurrently with ``role/replica`` prefixes, and the final state is
printed. The exit status is 0 only when the app SUCCEEDED.

Run it with ``python docs/examples/quickstart.py``.
"""

from __future__ import annotations

import sys
from contextlib import aclosing

import anyio

from asyncsched.runner import Runner
from asyncsched.specs import AppDef, AppState, Role

REPLICAS = 3

# What each replica runs. The scheduler substitutes ${replica_id} and ${app_id};
# TORCHX_JOB_ID is the app's handle (injected by the runner).
WORKER = """
import os, sys
rank, world = int(sys.argv[1]), int(sys.argv[2])
print(f"replica {rank}/{world} of {sys.argv[3]} (job {os.environ['TORCHX_JOB_ID']})")
part = sum(i * i for i in range(rank, 1_000_000, world))
print(f"partial sum of squares: {part}")
"""


def make_app() -> AppDef:
    role = Role(
        name="worker",
        image=".",
        entrypoint=sys.executable,
        args=["-u", "-c", WORKER, "${replica_id}", str(REPLICAS), "${app_id}"],
        num_replicas=REPLICAS,
    )
    return AppDef(name="quickstart", roles=[role])


async def follow(runner: Runner, handle: str, role: str, replica: int) -> None:
    """Print one replica's lines, prefixed ``role/replica``, until it is done."""
    lines = runner.log_lines(handle, role, replica, should_tail=True)
    async with aclosing(lines):  # type: ignore[type-var]
        async for line in lines:
            print(f"{role}/{replica} {line}", end="" if line.endswith("\n") else "\n")


async def main() -> int:
    async with Runner("quickstart") as runner:
        handle = await runner.run(make_app(), "local_cwd")
        print(f"submitted {handle}")
        async with anyio.create_task_group() as tg:
            for replica in range(REPLICAS):
                tg.start_soon(follow, runner, handle, "worker", replica)
        status = await runner.wait(handle, timeout=120)
        state = status.state if status else AppState.UNKNOWN
        print(f"final state: {state}")
        return 0 if state == AppState.SUCCEEDED else 1


if __name__ == "__main__":
    sys.exit(anyio.run(main))
