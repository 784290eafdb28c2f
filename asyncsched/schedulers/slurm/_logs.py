"""Read (and follow) a replica's output file, as whole lines, off the event loop.

``srun`` writes each replica's stdout and stderr to
``slurm-{job id}-{role}-{replica}.out|.err`` in the job's working directory.

Example:
    >>> async def main(path: str) -> None:
    ...     async for line in iter_file(path, follow=None):
    ...         print(line, end="")
"""

from __future__ import annotations

import codecs
import os
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio

from asyncsched.schedulers.shared.lines import LineSplitter

__all__ = ["CHUNK", "iter_file", "log_path"]

CHUNK = 64 * 1024
_POLL = 0.1


def log_path(work_dir: str, app_id: str, role: str, k: int, suffix: str) -> str:
    """Where srun writes replica ``k`` of ``role`` (suffix ``out`` or ``err``)."""
    return os.path.join(work_dir, f"slurm-{app_id}-{role}-{k}.{suffix}")


def _read(path: str, offset: int) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read(CHUNK)
    except FileNotFoundError:
        return None


async def iter_file(
    path: str, follow: Callable[[], Awaitable[bool]] | None
) -> AsyncIterator[str]:
    """Yield the lines of ``path``; with ``follow``, keep reading while
    ``follow()`` says the job may still write (it is called when no data is
    left), then drain what is left. A missing file is empty."""
    splitter = LineSplitter()
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    offset = 0
    while True:
        data = await anyio.to_thread.run_sync(_read, path, offset)
        if data:
            offset += len(data)
            for line in splitter.feed(decoder.decode(data)):
                yield line
            continue
        if follow is None or not await follow():
            # one last read: the job may have written between the two checks
            data = await anyio.to_thread.run_sync(_read, path, offset)
            if data:
                offset += len(data)
                for line in splitter.feed(decoder.decode(data)):
                    yield line
                continue
            break
        await anyio.sleep(_POLL)
    for line in splitter.feed(decoder.decode(b"", final=True)):
        yield line
    tail = splitter.flush()
    if tail:
        yield tail
