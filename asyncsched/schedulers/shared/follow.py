"""Follow a file that someone else is still writing, off the event loop.

:func:`follow_file` yields the bytes of a file in reads of at most ``chunk``
bytes. When a read comes back short (the reader caught up) it asks
``follow(offset)``: True means more may come (it returns when it is worth
reading again, e.g. after a change signal or a short pause), False that the
file is final: what is left is read, then the iterator ends. Without
``follow`` it reads what exists now and stops.

The open, every read and the optional ``seek`` run in a worker thread; the
file stays open while the iterator lives (a file its owner deletes is still
drained) and is closed when it ends or is closed. A missing file is empty
with ``missing_ok`` (the open is retried at each round while following),
else ``FileNotFoundError``.

Example:
    >>> async def tail(path: str, job_running) -> None:
    ...     async def more(offset: int) -> bool:
    ...         if not await job_running():
    ...             return False
    ...         await anyio.sleep(0.1)
    ...         return True
    ...     lines = LineAssembler()
    ...     async with contextlib.aclosing(follow_file(path, follow=more)) as chunks:
    ...         async for data in chunks:
    ...             for line in lines.feed(data):
    ...                 print(line, end="")
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Awaitable, Callable

import anyio
import anyio.to_thread

from asyncsched.errors import SchedulerError

__all__ = ["FOLLOW_CHUNK", "Follow", "follow_file"]

#: bytes of one read (one worker-thread hop each)
FOLLOW_CHUNK = 1 << 20
#: seconds an open may take before the follower gives up
_OPEN_TIMEOUT = 60.0

#: ``await follow(offset)`` -> True: more may come (read again), False: final
Follow = Callable[[int], Awaitable[bool]]


def _open(path: str, missing_ok: bool) -> int:
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        if missing_ok:
            return -1
        raise


async def _open_shielded(path: str, missing_ok: bool) -> int:
    # shielded: a cancelled open must not leak its fd (a thread cannot be
    # abandoned, so the bound only matters for a pathological file system)
    fd: int | None = None
    with anyio.CancelScope(shield=True), anyio.move_on_after(_OPEN_TIMEOUT):
        fd = await anyio.to_thread.run_sync(_open, path, missing_ok)
    if fd is None:
        raise SchedulerError(f"opening {path!r} took more than {_OPEN_TIMEOUT}s")
    return fd


async def follow_file(
    path: str,
    *,
    follow: Follow | None = None,
    seek: Callable[[int], int] | None = None,
    chunk: int = FOLLOW_CHUNK,
    missing_ok: bool = False,
) -> AsyncGenerator[bytes, None]:
    """Yield the bytes of ``path`` as they come (see the module).

    ``seek(fd)`` (blocking, run in a worker thread) gives the offset to
    start at; 0 by default.
    """
    fd = await _open_shielded(path, missing_ok)
    pos = 0
    final = follow is None
    try:
        if fd >= 0 and seek is not None:
            pos = await anyio.to_thread.run_sync(seek, fd)
        while True:
            if fd < 0:
                fd = await _open_shielded(path, missing_ok)
            data = b""
            if fd >= 0:
                data = await anyio.to_thread.run_sync(os.pread, fd, chunk, pos)
            if data:
                pos += len(data)
                yield data
            if len(data) == chunk:
                continue  # more is there already
            if final:
                break
            assert follow is not None
            final = not await follow(pos)
    finally:
        if fd >= 0:
            os.close(fd)  # closing a regular file does not wait for the disk
