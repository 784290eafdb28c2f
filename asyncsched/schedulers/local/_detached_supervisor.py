"""The detached supervisor process: the other side of :mod:`._detach`.

It reads the pickled dry-run request from its stdin, forks once more (so it
is nobody's child), starts the app with a :class:`LocalScheduler` of the
same session, answers the app id on its stdout, waits for the submitter's
acknowledgement (cancelling the app without it) and supervises the app to
its end.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import struct
import sys
from typing import Any

import anyio

from asyncsched.schedulers.kit import describe_error
from asyncsched.schedulers.local._detach import ACK
from asyncsched.schedulers.local._scheduler import LocalScheduler

__all__ = ("main",)


def main() -> None:
    """The supervisor process (see the module): read the request, fork, run."""
    (size,) = struct.unpack(">Q", _read_exactly(8))
    scheduler_args, dryrun_info, ack_timeout = pickle.loads(_read_exactly(size))
    if os.fork():
        os._exit(0)  # the submitter reaps this one; the supervisor is orphaned
    os.setsid()
    anyio.run(_supervise, scheduler_args, dryrun_info, ack_timeout)


async def _supervise(
    scheduler_args: dict[str, Any], dryrun_info: Any, ack_timeout: float
) -> None:
    dryrun_info.request = dataclasses.replace(dryrun_info.request, detach=False)
    async with LocalScheduler(**scheduler_args) as sched:
        try:
            app_id = await sched.schedule(dryrun_info)
        except Exception as exc:  # noqa: BLE001 - reported to the submitter
            _answer({"error": describe_error(exc)})
            return
        acked = False
        if _answer({"app_id": app_id}):
            with anyio.move_on_after(ack_timeout):
                acked = await _acknowledged()
        if not acked:
            # the submit was cancelled, hung or its process died: no id for it
            await sched.cancel(app_id)
        _quiet()
        await sched.wait(app_id, timeout=None)


def _read_exactly(size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = os.read(0, size - len(data))
        if not chunk:
            raise SystemExit("the submitter closed the request early")
        data += chunk
    return data


async def _acknowledged() -> bool:
    """Whether the submitter acks the app id (the caller bounds the wait)."""
    got = b""
    while not got.endswith(b"\n"):
        await anyio.wait_readable(0)
        try:
            chunk = os.read(0, len(ACK))
        except OSError:
            return False
        if not chunk:
            return False  # EOF: the submitter closed stdin (or died) first
        got += chunk
    return got == ACK


def _answer(data: dict[str, Any]) -> bool:
    """Tell the submitter ``data``; False if it is gone."""
    try:
        sys.stdout.write(json.dumps(data) + "\n")
        sys.stdout.flush()
    except OSError:
        return False
    return True


def _quiet() -> None:
    """Nobody reads our output any more: point it at /dev/null."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
