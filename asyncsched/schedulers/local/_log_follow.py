"""A replica log followed in the process that supervises it: from memory, else the file.

:func:`follow_replica_log` yields the bytes of one stream of a
:class:`~asyncsched.schedulers.local._logs.ReplicaLog` from a file offset on,
until the log is final and drained. What the follower finds in the stream's
:class:`~asyncsched.schedulers.local._log_window.LogWindow` (the chunks the
supervisor appended since the follower joined, while it keeps up) it takes
from memory, each chunk with its end offset and arrival time; everything
else -- what was written before it joined, what it fell too far behind for
-- it reads from the file, 1 MiB at a time in a worker thread. Both hold the
same bytes at the same offsets, so the two mix without a gap or a repeat.

It waits for the log's change signal between rounds (a cancellation lands
there at once), and takes from memory only on the loop, where the
supervisor appends. A file that holds bytes the supervisor did not write (the
replica appended to its own log) is read on from the file only.

Example:
    >>> async def show(log: ReplicaLog) -> None:
    ...     async with contextlib.aclosing(
    ...         follow_replica_log(log.paths["stdout"], log, "stdout")
    ...     ) as blocks:
    ...         async for block in blocks:  # bytes (the file) or chunks (memory)
    ...             print(block)
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncGenerator, Callable
from typing import Protocol

import anyio
import anyio.to_thread

from asyncsched.errors import SchedulerError
from asyncsched.schedulers.local._log_window import Chunk, LogWindow

__all__ = ("Block", "FollowedLog", "follow_replica_log")

#: bytes read from the file at a time (a worker-thread hop each), and about
#: the most taken from memory at a time
READ_SIZE = 1 << 20
#: seconds an open may take before the follower gives up
_OPEN_TIMEOUT = 60.0

#: what a follower yields: bytes read from the file (arrival times in the
#: index), or chunks taken from memory (each with its end offset and time)
Block = bytes | list[Chunk]


class FollowedLog(Protocol):
    """What a follower needs of a
    :class:`~asyncsched.schedulers.local._logs.ReplicaLog`."""

    @property
    def sizes(self) -> dict[str, int]:
        """Bytes appended to each stream's file so far."""
        ...

    @property
    def final(self) -> anyio.Event:
        """Set once nothing more will be appended."""
        ...

    def changed(self) -> anyio.Event:
        """An event set at the next append (or when the log becomes final)."""
        ...

    def join_window(self, stream: str) -> tuple[LogWindow, int] | None:
        """The stream's window and a follower token (None: read the file)."""
        ...

    def leave_window(self, stream: str, window: LogWindow, reader: int) -> None:
        """The follower is done with the window."""
        ...


async def _open(path: str) -> int:
    # shielded: a cancelled open must not leak its fd
    fd: int | None = None
    with anyio.CancelScope(shield=True), anyio.move_on_after(_OPEN_TIMEOUT):
        fd = await anyio.to_thread.run_sync(os.open, path, os.O_RDONLY | os.O_CLOEXEC)
    if fd is None:
        raise SchedulerError(f"opening {path!r} took more than {_OPEN_TIMEOUT}s")
    return fd


async def follow_replica_log(
    path: str,
    log: FollowedLog,
    stream: str,
    *,
    seek: Callable[[int], int] | None = None,
    chunk: int = READ_SIZE,
) -> AsyncGenerator[Block, None]:
    """Yield ``stream``'s bytes (its file is ``path``) until ``log`` is final
    and everything is read (see the module).

    ``seek(fd)`` (blocking, run in a worker thread) gives the offset to start
    at; 0 by default. The file stays open while the generator lives and is
    closed, and the window left, when it ends or is closed.

    Raises:
        FileNotFoundError: the log file is gone.
    """
    # joined before the file is opened: whatever is appended from now on is
    # either in memory or, for a follower that falls behind, in the file
    joined = log.join_window(stream)
    window, reader = joined if joined is not None else (None, 0)
    fd = -1
    try:
        fd = await _open(path)
        pos = 0 if seek is None else await anyio.to_thread.run_sync(seek, fd)
        final = False
        while True:
            if window is not None:
                taken = window.take(reader, pos, chunk)
                if taken:
                    pos = taken[-1][1]
                    yield taken
                    continue
            changed = log.changed()  # taken before the state is read
            if final or pos < log.sizes[stream]:
                data = await anyio.to_thread.run_sync(os.pread, fd, chunk, pos)
                if data:
                    pos += len(data)
                    if window is not None and pos > log.sizes[stream]:
                        # bytes the supervisor did not write: offsets differ
                        log.leave_window(stream, window, reader)
                        window = None
                    yield data
                    continue
                if final:
                    return
            if log.final.is_set():
                final = True  # one more round: what is left, to the file's end
                continue
            await changed.wait()
    finally:
        if window is not None:
            log.leave_window(stream, window, reader)
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
