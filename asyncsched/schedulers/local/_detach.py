"""Detached apps: a supervisor process of their own that outlives the submitter.

With the ``detach`` run option, ``schedule`` does not start the replicas in
the submitting process. It starts ``python -c <this module's main>`` in a new
session, hands it the dry-run request (pickled, through its stdin), and
returns once that process says the app runs. The process forks once more (so
it is nobody's child: the submitter's death reaches it in no way) and
supervises the app with a :class:`LocalScheduler` of the same session and
state dir: the replicas are its children (its guardian kills them should it
die), the app record and the event journal are written as for any app.
Every other process (the submitter too) sees the app through its record, as
it sees apps of another process: describe, wait, log_iter, events, cancel.
The supervisor exits once the app has ended.

Example:
    >>> detached_command()[1:3]
    ['-I', '-c']
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pickle
import subprocess
import sys
from typing import Any

import anyio

from asyncsched.errors import SubmitError
from asyncsched.schedulers.kit import describe_error

__all__ = ("detached_command", "launch_detached", "main")

#: how long the supervisor may take to start the app and say so
HANDSHAKE_TIMEOUT = 120.0
#: bytes of the supervisor's stderr kept for an error message
_STDERR_KEPT = 4000


def detached_command() -> list[str]:
    """The command that runs :func:`main` (this package, whatever the cwd)."""
    root = os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    )
    code = (
        f"import sys; sys.path.insert(0, {root!r}); "
        "from asyncsched.schedulers.local._detach import main; main()"
    )
    return [sys.executable, "-I", "-c", code]


async def launch_detached(dryrun_info: Any, scheduler_args: dict[str, Any]) -> str:
    """Start a detached supervisor for ``dryrun_info``; the app id once it runs.

    Raises:
        SubmitError: the supervisor could not start the app (its error), or
            did not answer within :data:`HANDSHAKE_TIMEOUT`.
    """
    payload = pickle.dumps((scheduler_args, dryrun_info))
    async with await anyio.open_process(
        detached_command(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    ) as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        assert proc.stderr is not None
        line = b""
        with anyio.move_on_after(HANDSHAKE_TIMEOUT):
            await proc.stdin.send(payload)
            await proc.stdin.aclose()
            with contextlib.suppress(anyio.EndOfStream):
                while not line.endswith(b"\n"):
                    line += await proc.stdout.receive()
        answer: dict[str, Any] = {}
        with contextlib.suppress(ValueError):
            answer = json.loads(line or b"{}")
        if isinstance(answer.get("app_id"), str):
            return str(answer["app_id"])
        with contextlib.suppress(ProcessLookupError):
            proc.kill()  # the first process, should it hang
        err = b""
        with anyio.move_on_after(1), contextlib.suppress(anyio.EndOfStream):
            while len(err) < _STDERR_KEPT:
                err += await proc.stderr.receive()
        why = answer.get("error") or err.decode(errors="replace")[-_STDERR_KEPT:]
        raise SubmitError(
            f"the detached supervisor could not start the app: {why or 'no answer'}"
        )


def main() -> None:
    """The supervisor process (see the module): read the request, fork, run."""
    scheduler_args, dryrun_info = pickle.loads(sys.stdin.buffer.read())
    if os.fork():
        os._exit(0)  # the submitter reaps this one; the supervisor is orphaned
    os.setsid()
    anyio.run(_supervise, scheduler_args, dryrun_info)


async def _supervise(scheduler_args: dict[str, Any], dryrun_info: Any) -> None:
    from asyncsched.schedulers.local._scheduler import LocalScheduler

    dryrun_info.request = dataclasses.replace(dryrun_info.request, detach=False)
    async with LocalScheduler(**scheduler_args) as sched:
        try:
            app_id = await sched.schedule(dryrun_info)
        except Exception as exc:  # noqa: BLE001 - reported to the submitter
            _answer({"error": describe_error(exc)})
            return
        _answer({"app_id": app_id})
        _quiet()
        await sched.wait(app_id, timeout=None)


def _answer(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data) + "\n")
    sys.stdout.flush()


def _quiet() -> None:
    """Nobody reads our output any more: point it at /dev/null."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
