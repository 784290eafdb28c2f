"""Read (and follow) a replica's output file, as whole lines, off the event loop.

``srun`` writes each replica's stdout and stderr, as the replica wrote them,
to ``slurm-{job id}-{role}-{replica}.out`` in the job's working directory.
Lines go through the shared :class:`LineAssembler` (linear, capped at
``max_line_bytes``, UTF-8 safe across chunk boundaries).

Example:
    >>> async def main(path: str) -> None:
    ...     async for line in iter_file(path, follow=None):
    ...         print(line, end="")
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncGenerator, Awaitable, Callable

import anyio

from asyncsched.schedulers.kit import (
    DEFAULT_MAX_LINE_BYTES,
    assemble_lines,
    follow_file,
)

__all__ = ["CHUNK", "iter_file", "log_path"]

CHUNK = 256 * 1024
_POLL = 0.1


def log_path(work_dir: str, app_id: str, role: str, k: int, suffix: str) -> str:
    """Where srun writes replica ``k`` of ``role`` (suffix ``out`` or ``err``)."""
    return os.path.join(work_dir, f"slurm-{app_id}-{role}-{k}.{suffix}")


async def iter_file(
    path: str,
    follow: Callable[[], Awaitable[bool]] | None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> AsyncGenerator[str, None]:
    """Yield the lines of ``path``; with ``follow``, keep reading while
    ``follow()`` says the job may still write (it is asked when no data is
    left), then drain what is left. A missing file is empty."""

    async def more(offset: int) -> bool:
        del offset
        assert follow is not None
        if not await follow():
            return False
        await anyio.sleep(_POLL)
        return True

    chunks = follow_file(
        path, follow=None if follow is None else more, chunk=CHUNK, missing_ok=True
    )
    async with (
        contextlib.aclosing(chunks),
        contextlib.aclosing(assemble_lines(chunks, max_line_bytes)) as lines,
    ):
        async for line in lines:
            yield line
