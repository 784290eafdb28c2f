"""A bounded set of log and index files kept open for appending, shared by a
scheduler's replicas.

Reopening a file for every chunk of output costs a path walk, an ``fstat``
and a close; keeping the most recently written files open saves
that for the replicas writing now, while the number of descriptors stays
bounded by ``limit``, whatever the number of running replicas. The least
recently written file is closed first.

A file is (re)opened only by :func:`reopen`: ``O_APPEND|O_NOFOLLOW|O_NONBLOCK``
and then checked to be the very file the supervisor created (``st_dev``,
``st_ino``), so a name a replica put in its place (a symlink, a hardlink, a
FIFO) is never written through and never blocks the loop.

Example:
    >>> files = OpenFiles(32)
    >>> fd = files.get("/logs/x/0/stdout.log", (2049, 1234))  # -1: gone or replaced
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections import OrderedDict

from asyncsched.errors import InvalidArgumentError

_READ_OWN = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY


def open_regular_file(path: str) -> tuple[int, os.stat_result] | None:
    """``path`` opened for reading with its stat, or None (blocking).

    None when it is missing, a symlink (never followed), not a regular file (a
    FIFO a replica planted would block, a device never end) or unreadable.
    The caller closes the descriptor.
    """
    try:
        fd = os.open(path, _READ_OWN)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        return None
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return None
    return fd, st


__all__ = ["FileId", "OpenFiles", "reopen"]

#: ``(st_dev, st_ino)`` of a file the supervisor created
FileId = tuple[int, int]

#: never through a symlink, never waiting for a FIFO's reader
_REOPEN = (
    os.O_WRONLY
    | os.O_APPEND
    | os.O_NOFOLLOW
    | os.O_NONBLOCK
    | os.O_NOCTTY
    | os.O_CLOEXEC
)


def reopen(path: str, file_id: FileId) -> int:
    """``path`` opened for appending if it is still the file ``file_id``, else -1."""
    try:
        fd = os.open(path, _REOPEN)
    except OSError:
        return -1
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        return -1
    if (st.st_dev, st.st_ino) != file_id:
        os.close(fd)
        return -1
    return fd


class OpenFiles:
    """At most ``limit`` (>= 1) files open for appending, by path, the least
    recently used closed first. Not thread-safe: used from one event loop."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise InvalidArgumentError(f"limit must be at least 1, got {limit}")
        self.limit = limit
        self._fds: OrderedDict[str, int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._fds)

    def get(self, path: str, file_id: FileId) -> int:
        """An fd appending to ``path`` (the file ``file_id``); -1 if it is gone
        or replaced. Valid until the next call on this object."""
        fd = self._fds.get(path)
        if fd is not None:
            self._fds.move_to_end(path)
            return fd
        fd = reopen(path, file_id)
        if fd >= 0:
            self.keep(path, fd)
        return fd

    def keep(self, path: str, fd: int) -> None:
        """Take ``fd`` (just created for ``path``): closed when evicted."""
        self._fds[path] = fd
        self._fds.move_to_end(path)
        while len(self._fds) > self.limit:
            _, old = self._fds.popitem(last=False)
            _close(old)

    def discard(self, path: str) -> None:
        """Close ``path``'s fd if it is open."""
        fd = self._fds.pop(path, None)
        if fd is not None:
            _close(fd)

    def close(self) -> None:
        """Close every fd."""
        while self._fds:
            _close(self._fds.popitem()[1])


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)
