"""Did a replica run out of memory? Read from the last words of its stderr.

Without a memory cgroup, a replica's memory limit is ``RLIMIT_DATA``: an
allocation past it fails (it is not killed), and the program reports it as its
runtime does -- Python's ``MemoryError``, Go's ``runtime: out of memory``, C++'s
``std::bad_alloc``, Rust's ``memory allocation of N bytes failed``, Java's
``OutOfMemoryError``, C's ``Cannot allocate memory`` (``ENOMEM``). A failed
exit whose last :data:`TAIL_BYTES` of stderr name one of these counts as out
of memory. An approximation: a program that swallows the error and exits
otherwise is reported by its exit code.

Example:
    >>> has_oom_marker(b"Traceback ...\\nMemoryError\\n")
    True
"""

from __future__ import annotations

import os

from asyncsched.schedulers.local._open_files import open_regular_file

__all__ = ["OOM_MARKERS", "TAIL_BYTES", "has_oom_marker", "out_of_memory"]

#: how much of the end of stderr is searched
TAIL_BYTES = 8192
#: what runtimes print when an allocation fails (compared in lower case)
OOM_MARKERS = (
    b"memoryerror",
    b"out of memory",
    b"cannot allocate memory",
    b"std::bad_alloc",
    b"outofmemoryerror",
    b"memory allocation of",
)


def has_oom_marker(text: bytes) -> bool:
    """True when ``text`` names a failed allocation (see :data:`OOM_MARKERS`)."""
    lowered = text.lower()
    return any(marker in lowered for marker in OOM_MARKERS)


def out_of_memory(stderr_path: str, start: int) -> bool:
    """True when the stderr written since offset ``start`` ends naming a failed
    allocation (blocking: reads at most :data:`TAIL_BYTES`; never follows a
    symlink, only reads a regular file)."""
    opened = open_regular_file(stderr_path)
    if opened is None:
        return False
    fd, st = opened
    try:
        offset = max(start, st.st_size - TAIL_BYTES)
        return has_oom_marker(os.pread(fd, TAIL_BYTES, offset))
    except OSError:
        return False
    finally:
        os.close(fd)
