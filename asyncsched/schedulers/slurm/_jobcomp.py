"""The job completion log (``jobcomp/filetxt``) as a journal read from an offset.

Without accounting storage, slurmctld appends one line per finished job (per
heterogeneous component) to this file. A position in it is a byte offset
plus the file's identity (inode and a hash of its first line): a rotated,
replaced or truncated file cannot honour an old position, and
:meth:`JobCompLog.ended_after` then says so (None) rather than skip what
the old file held. Every read runs in a worker thread.

Example:
    >>> async def ended(log: JobCompLog) -> None:
    ...     where = await log.position()
    ...     ...  # later, maybe in another process
    ...     jobs = await log.ended_after(where)  # None: cannot honour it
"""

from __future__ import annotations

import hashlib
import os
import re

import anyio

__all__ = ["JobCompLog", "LogPosition"]

#: (byte offset, file identity)
LogPosition = tuple[int, str]

_JOB_ID = re.compile(r"(?:^|\s)(JobId|HetJobId)=(\d+)")
#: bytes hashed from the start of the file to tell a replaced file apart
_HEAD = 4096


class JobCompLog:
    """The completion log at ``path`` (on this host or a shared filesystem)."""

    def __init__(self, path: str) -> None:
        self.path = path

    async def position(self) -> LogPosition | None:
        """The end of the file now (None: unreadable here)."""
        return await anyio.to_thread.run_sync(self._position)

    async def ended_after(self, where: LogPosition) -> set[str] | None:
        """Job ids (each component's and its leader's) of the lines written
        after ``where``; None when the file is not the one ``where`` was
        taken in (rotated, replaced, truncated) or cannot be read."""
        return await anyio.to_thread.run_sync(self._ended_after, where)

    def _identity(self, fd: int) -> str:
        head = os.pread(fd, _HEAD, 0)
        inode = os.fstat(fd).st_ino
        if b"\n" not in head:  # no complete first line yet: the inode only
            return f"{inode}:"
        first = head.split(b"\n", 1)[0]
        return f"{inode}:{hashlib.sha256(first).hexdigest()[:12]}"

    def _same_file(self, fd: int, identity: str) -> bool:
        now = self._identity(fd)
        inode, _, digest = identity.partition(":")
        return now == identity or (not digest and now.partition(":")[0] == inode)

    def _open(self) -> int | None:
        try:
            return os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return None

    def _position(self) -> LogPosition | None:
        fd = self._open()
        if fd is None:
            return None
        try:
            size = os.fstat(fd).st_size
            # a torn last line is read again from its start next time
            tail = os.pread(fd, min(size, _HEAD), max(0, size - _HEAD))
            cut = tail.rfind(b"\n") + 1
            offset = size - len(tail) + cut if tail else 0
            return offset, self._identity(fd)
        finally:
            os.close(fd)

    def _ended_after(self, where: LogPosition) -> set[str] | None:
        offset, identity = where
        fd = self._open()
        if fd is None:
            return None
        try:
            if not self._same_file(fd, identity) or os.fstat(fd).st_size < offset:
                return None
            ids: set[str] = set()
            with os.fdopen(os.dup(fd), "rb") as fh:
                fh.seek(offset)
                for line in fh:
                    for _, job_id in _JOB_ID.findall(line.decode(errors="replace")):
                        if job_id != "0":
                            ids.add(job_id)
            return ids
        finally:
            os.close(fd)
