"""Detached apps: a supervisor process of their own that outlives the submitter.

With the ``detach`` run option, ``schedule`` does not start the replicas in
the submitting process. It starts ``python -c <the supervisor's main>`` in a new
session, hands it the dry-run request (pickled, through its stdin), and
returns once that process says the app runs and the submit has acknowledged
the app id (without the ack, within :data:`ACK_TIMEOUT` by default, the supervisor
cancels the app: a cancelled submit leaves nothing running). The process forks once more (so
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
import json
import os
import pickle
import struct
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import Process

from asyncsched.errors import SubmitError
from asyncsched.schedulers.kit import describe_error

__all__ = ("ACK", "ACK_TIMEOUT", "detached_command", "launch_detached")

#: how long the supervisor may take to start the app and say so
HANDSHAKE_TIMEOUT = 120.0
#: how long the supervisor waits for the submitter to acknowledge the app id
ACK_TIMEOUT = 30.0
#: the submitter's acknowledgement, on the supervisor's stdin
ACK = b"ack\n"
#: seconds the submitter may spend sending the ack, or closing the pipe
ACK_SEND_TIMEOUT = 5.0
#: bytes of the supervisor's stderr kept for an error message
_STDERR_KEPT = 4000


def detached_command() -> list[str]:
    """The command that runs the supervisor's ``main`` (see
    :mod:`._detached_supervisor`; this package, whatever the cwd)."""
    root = os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    )
    code = (
        f"import sys; sys.path.insert(0, {root!r}); "
        "from asyncsched.schedulers.local._detached_supervisor import main; main()"
    )
    return [sys.executable, "-I", "-c", code]


async def launch_detached(
    dryrun_info: Any,
    scheduler_args: dict[str, Any],
    before_ack: Callable[[str], None] | None = None,
    ack_timeout: float = ACK_TIMEOUT,
) -> str:
    """Start a detached supervisor for ``dryrun_info``; the app id once it runs.

    The supervisor keeps the app only once this submit acknowledges its id,
    which it does last, when nothing can fail any more: a submit cancelled
    (or failed, or killed) before that leaves nothing running. Without the
    ack within ``ack_timeout`` seconds (a submitter hung), the supervisor
    cancels the app.

    Raises:
        SubmitError: the supervisor could not start the app (its error), or
            did not answer within :data:`HANDSHAKE_TIMEOUT`, or ``before_ack``
            (the test seam) raised; the app is then cancelled.
    """
    payload = pickle.dumps((scheduler_args, dryrun_info, ack_timeout))
    proc = await anyio.open_process(
        detached_command(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        answer = await _handshake(proc, struct.pack(">Q", len(payload)) + payload)
        app_id = answer.get("app_id")
        if isinstance(app_id, str):
            if before_ack is not None:
                try:
                    before_ack(app_id)
                except Exception as exc:
                    raise SubmitError(
                        f"the detached app {app_id} was not acknowledged:"
                        f" {describe_error(exc)}"
                    ) from exc
            await anyio.lowlevel.checkpoint_if_cancelled()
            assert proc.stdin is not None
            # acknowledged: the id is returned (a pipe write of 4 bytes)
            with anyio.move_on_after(ACK_SEND_TIMEOUT, shield=True):
                await proc.stdin.send(ACK)
            return app_id
        with contextlib.suppress(ProcessLookupError):
            proc.kill()  # the first process, should it hang
        why = answer.get("error") or await _stderr_tail(proc)
        raise SubmitError(
            f"the detached supervisor could not start the app: {why or 'no answer'}"
        )
    finally:
        # no ack sent: closing its stdin makes the supervisor undo the app
        # (the process waited for is the first of a double fork: it exits)
        with anyio.move_on_after(ACK_SEND_TIMEOUT, shield=True):
            await proc.aclose()


async def _handshake(proc: Process, request: bytes) -> dict[str, Any]:
    """Send ``request``; the supervisor's answer (empty if it gave none)."""
    assert proc.stdin is not None
    assert proc.stdout is not None
    line = b""
    with anyio.move_on_after(HANDSHAKE_TIMEOUT):
        await proc.stdin.send(request)
        with contextlib.suppress(anyio.EndOfStream):
            while not line.endswith(b"\n"):
                line += await proc.stdout.receive()
    answer: dict[str, Any] = {}
    with contextlib.suppress(ValueError):
        answer = json.loads(line or b"{}")
    return answer


async def _stderr_tail(proc: Process) -> str:
    assert proc.stderr is not None
    err = b""
    with anyio.move_on_after(1), contextlib.suppress(anyio.EndOfStream):
        while len(err) < _STDERR_KEPT:
            err += await proc.stderr.receive()
    return err.decode(errors="replace")[-_STDERR_KEPT:]
