"""Process limits of the local backend: its own open-file limit, its replicas' limits.

Every running replica holds descriptors in the scheduler process (see
:mod:`._capacity`), and the common soft ``RLIMIT_NOFILE`` of 1024 lets only
85 replicas run at once. So, as Go's runtime does since 1.19, the first
local scheduler of a process raises the soft limit to the hard limit (never
lowers it, never touches the hard limit), once. Replicas get the original soft
limit back (some programs break with a huge one: ``select`` users, programs
closing every possible descriptor at start), through util-linux ``prlimit``
run in front of the replica's command, which also applies the replica's
memory limit (``RLIMIT_DATA``).

Example:
    >>> argv = child_limit_argv("/usr/bin/prlimit", nofile=1024, data_bytes=64 << 20)
    >>> argv
    ['/usr/bin/prlimit', '--nofile=1024:', '--data=67108864', '--']
"""

from __future__ import annotations

import logging
import resource
import shutil
import threading

__all__ = [
    "MEBIBYTE",
    "child_limit_argv",
    "find_prlimit",
    "original_nofile",
    "raise_nofile_limit",
]

logger = logging.getLogger(__name__)

#: bytes in the unit of ``Resource.memMB`` (Kubernetes and Docker read it as MiB)
MEBIBYTE = 1 << 20
#: the soft limit asked for when the hard limit is unlimited (Linux's default
#: ``fs.nr_open``; a bigger value may be refused)
_UNLIMITED_TARGET = 1 << 20

_lock = threading.Lock()
#: the soft limit before the first raise (None: never raised in this process)
_original_soft: int | None = None


def raise_nofile_limit() -> int:
    """Raise this process's soft ``RLIMIT_NOFILE`` to its hard limit; return it.

    Done once per process (later calls only read the limit); never lowers the
    soft limit nor changes the hard one. When the system refuses, the limit
    stays as it was (logged at debug level).
    """
    global _original_soft
    with _lock:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if _original_soft is not None or soft == resource.RLIM_INFINITY:
            return soft
        target = _UNLIMITED_TARGET if hard == resource.RLIM_INFINITY else hard
        if target <= soft:
            return soft
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError) as exc:
            logger.debug("cannot raise RLIMIT_NOFILE to %d: %s", target, exc)
            return soft
        _original_soft = soft
        logger.debug("raised the soft RLIMIT_NOFILE from %d to %d", soft, target)
        return target


def original_nofile() -> int | None:
    """The soft ``RLIMIT_NOFILE`` before :func:`raise_nofile_limit` raised it.

    None when it was never raised (replicas inherit the limit as it is).
    """
    return _original_soft


def find_prlimit() -> str | None:
    """The util-linux ``prlimit`` executable, or None (blocking: a PATH walk)."""
    return shutil.which("prlimit")


def child_limit_argv(
    prlimit: str | None, *, nofile: int | None, data_bytes: int | None
) -> list[str]:
    """The command prefix that starts a replica with its limits (``[]``: none).

    ``nofile`` becomes the replica's soft ``RLIMIT_NOFILE`` (its hard limit is
    inherited); ``data_bytes`` its soft and hard ``RLIMIT_DATA``. Without
    ``prlimit`` nothing can be set: ``[]``.
    """
    if prlimit is None or (nofile is None and data_bytes is None):
        return []
    argv = [prlimit]
    if nofile is not None:
        argv.append(f"--nofile={nofile}:")
    if data_bytes is not None:
        argv.append(f"--data={data_bytes}")
    argv.append("--")
    return argv
