"""A runner imports a backend's heavy dependencies outside the event loop's thread."""

from __future__ import annotations

import subprocess
import sys

_SCRIPT = """
import asyncio, sys, threading

importers = {}


def note_import(event, args):
    if event == "import" and args[0] in ("aiohttp", "aiodocker"):
        importers[args[0]] = threading.get_ident()


sys.addaudithook(note_import)
from asyncsched.runner import Runner


async def main():
    async with Runner("t") as runner:
        await runner.scheduler_run_opts("local_docker")
    assert set(importers) == {"aiohttp", "aiodocker"}, importers
    assert threading.get_ident() not in importers.values(), "imported in the loop"
    print("ok")


asyncio.run(main())
"""


def test_first_use_of_a_backend_imports_it_outside_the_event_loop_thread() -> None:
    # aiohttp alone is ~0.3 s of CPU: in the loop thread it stalls every task
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
