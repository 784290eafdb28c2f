"""Check, in a fresh interpreter, which thread imports a heavy module.

An audit hook notes the thread of each first import of the watched modules
while ``body`` (the inside of an ``async def``) runs in an event loop; the
check fails unless every watched module was imported, none of them by the
loop's thread.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

__all__ = ["assert_imported_outside_the_loop_thread"]

_SCRIPT = """
import asyncio, sys, threading

WATCHED = {watched!r}
importers = {{}}


def note_import(event, args):
    if event == "import" and args[0] in WATCHED:
        importers[args[0]] = threading.get_ident()


sys.addaudithook(note_import)


async def main():
{body}
    assert set(importers) == WATCHED, importers
    assert threading.get_ident() not in importers.values(), "imported in the loop"
    print("ok")


asyncio.run(main())
"""


def assert_imported_outside_the_loop_thread(watched: set[str], body: str) -> None:
    """Run ``body`` in a new process; every module of ``watched`` must be
    imported by it, and by a thread other than the event loop's."""
    script = _SCRIPT.format(watched=watched, body=textwrap.indent(body, "    "))
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
