"""A closed output pipe (``asyncsched log H | head -2``) ends a verb quietly.

When the reader of stdout or stderr goes away, a verb stops and the CLI exits
0 without a message, as ``cat`` does in Python's convention (no traceback, no
"internal error"). The error may come bare or inside exception groups from
task groups; :func:`closed_pipe_only` recognises both. :func:`silence` points
the closed descriptors at ``/dev/null`` so that the interpreter's last flush
does not fail again. A verb that follows output also watches its pipe with
:func:`reader_gone`, so it ends as soon as the reader does, even while the app
prints nothing (as ``tail -f`` does).

Example:
    >>> closed_pipe_only(ExceptionGroup("tg", [BrokenPipeError()]))
    True
    >>> closed_pipe_only(ExceptionGroup("tg", [BrokenPipeError(), KeyError()]))
    False
"""

from __future__ import annotations

import fcntl
import os
import select
import stat
from typing import IO

import anyio

__all__ = [
    "ReaderGone",
    "closed_pipe_only",
    "raise_when_reader_gone",
    "reader_gone",
    "silence",
]


class ReaderGone(BrokenPipeError):
    """The reader of an output left while nothing was being written to it.

    Caught by the CLI's ``main`` like any :class:`BrokenPipeError`.
    """


def closed_pipe_only(exc: BaseException) -> bool:
    """Whether ``exc`` is a :class:`BrokenPipeError`, or groups holding only those."""
    if isinstance(exc, BaseExceptionGroup):
        return all(closed_pipe_only(e) for e in exc.exceptions)
    return isinstance(exc, BrokenPipeError)


def _closed(fd: int) -> bool:
    """Whether ``fd`` is a pipe or socket whose reading end is gone."""
    poller = select.poll()
    try:
        poller.register(fd, select.POLLOUT)
        events = poller.poll(0)
    except (OSError, ValueError):
        return False
    return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in events)


def silence() -> None:
    """Point stdout and/or stderr, whichever lost its reader, at ``/dev/null``.

    Both when neither can be told apart: the error said one of them is gone.
    """
    fds = [fd for fd in (1, 2) if _closed(fd)] or [1, 2]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in fds:
            os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def _write_only_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    except OSError:
        return False
    return stat.S_ISFIFO(mode) and flags & os.O_ACCMODE == os.O_WRONLY


async def reader_gone(stream: IO[str]) -> None:
    """Return once the reader of ``stream``'s pipe has gone; never for a
    terminal, a file or anything that is not a write-only pipe.

    The loop is told when the pipe's write end reports an error, which the
    kernel does as soon as no reader is left; nothing is written or polled.
    """
    try:
        fd = stream.fileno()
    except (OSError, ValueError):  # replaced by an object without a descriptor
        fd = -1
    if fd < 0 or not _write_only_pipe(fd):
        await anyio.sleep_forever()
    while not _closed(fd):
        await anyio.wait_readable(fd)


async def raise_when_reader_gone(stream: IO[str]) -> None:
    """:func:`reader_gone`, then :class:`ReaderGone` (to end a task group)."""
    await reader_gone(stream)
    raise ReaderGone(f"the reader of {getattr(stream, 'name', 'output')} left")
