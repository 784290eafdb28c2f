"""How many replicas may run at once: a first-come, first-served slot pool.

Every running replica holds file descriptors in the scheduler process (its two
pipe read ends and its pidfd; log and index files are shared, see
:data:`LOG_FILES_KEPT_OPEN`), so the number of replicas running at once
is what bounds the open descriptors. A submit takes as many slots as its app
has replicas and waits (cancellably) while they are not free; an app gives
them back once every replica of it has exited and its log files are closed.

Example:
    >>> async def demo() -> None:
    ...     slots = ReplicaSlots(4)
    ...     await slots.acquire(3)  # a 3-replica app starts
    ...     slots.release(3)  # ... and ends
"""

from __future__ import annotations

import resource
from collections import deque

import anyio

from asyncsched.errors import SpecError

__all__ = [
    "FDS_PER_REPLICA",
    "LOG_FILES_KEPT_OPEN",
    "MAX_DEFAULT_RUNNING_REPLICAS",
    "RESERVED_FDS",
    "ReplicaSlots",
    "check_replica_count",
    "default_max_running_replicas",
]

#: descriptors a running replica holds in the scheduler process: two pipe read
#: ends and a pidfd (its log and index files are open only during a write)
FDS_PER_REPLICA = 3
#: descriptors left to the rest of the program (sockets, files, the loop...)
RESERVED_FDS = 256
#: log and index files a scheduler keeps open for appending, shared by its
#: replicas (the most recently written ones; the others are reopened per write)
LOG_FILES_KEPT_OPEN = 32
#: the default never exceeds this many running replicas (processes), whatever
#: the descriptor limit allows
MAX_DEFAULT_RUNNING_REPLICAS = 2048


def default_max_running_replicas(nofile: int | None = None) -> int:
    """The default bound on running replicas for a descriptor limit.

    ``(nofile - RESERVED_FDS - LOG_FILES_KEPT_OPEN) // FDS_PER_REPLICA``, at
    least 1 and at most
    :data:`MAX_DEFAULT_RUNNING_REPLICAS`; ``nofile`` defaults to this
    process's soft ``RLIMIT_NOFILE``.

    Example:
        >>> default_max_running_replicas(1024)
        245
    """
    if nofile is None:
        nofile, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if nofile < 0:  # RLIM_INFINITY
        return MAX_DEFAULT_RUNNING_REPLICAS
    fit = (nofile - RESERVED_FDS - LOG_FILES_KEPT_OPEN) // FDS_PER_REPLICA
    return max(1, min(MAX_DEFAULT_RUNNING_REPLICAS, fit))


class _Waiter:
    __slots__ = ("count", "event")

    def __init__(self, count: int) -> None:
        self.count = count
        self.event = anyio.Event()


class ReplicaSlots:
    """``limit`` slots handed out first come, first served.

    A request never overtakes an earlier one (a big app is not starved by a
    stream of small ones). :meth:`close` wakes every waiter; waiters then see
    :attr:`closed` and give up.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_use = 0
        self.closed = False
        self._waiters: deque[_Waiter] = deque()

    @property
    def waiting(self) -> int:
        """Requests waiting for slots."""
        return len(self._waiters)

    async def acquire(self, count: int) -> bool:
        """Take ``count`` (<= ``limit``) slots, waiting for them; False once closed.

        Cancellable: a cancelled request takes nothing and lets the next one
        through.
        """
        if self.closed:
            return False
        if not self._waiters and self.in_use + count <= self.limit:
            self.in_use += count
            return True
        waiter = _Waiter(count)
        self._waiters.append(waiter)
        try:
            await waiter.event.wait()
        except BaseException:
            if waiter.event.is_set() and not self.closed:
                self.in_use -= count  # granted as we were cancelled: give back
            else:
                self._waiters.remove(waiter)
            self._grant()
            raise
        return not self.closed

    def release(self, count: int) -> None:
        """Give back ``count`` slots and wake the requests that now fit."""
        self.in_use -= count
        self._grant()

    def close(self) -> None:
        """Wake every waiter; later requests fail at once."""
        self.closed = True
        while self._waiters:
            self._waiters.popleft().event.set()

    def _grant(self) -> None:
        while self._waiters and not self.closed:
            head = self._waiters[0]
            if self.in_use + head.count > self.limit:
                return
            self._waiters.popleft()
            self.in_use += head.count
            head.event.set()


def check_replica_count(
    counts: list[int], max_running: int, field_prefix: str, backend: str
) -> None:
    """Refuse an app that could never run: more replicas (``counts``, per
    role) than ``max_running`` may run at once.

    Raises:
        SpecError: naming the role with too many replicas, else the roles.
    """
    total = sum(counts)
    if total <= max_running:
        return
    biggest = max(range(len(counts)), key=counts.__getitem__)
    field = (
        f"{field_prefix}[{biggest}].num_replicas"
        if counts[biggest] > max_running
        else field_prefix
    )
    raise SpecError(
        field,
        f"the app has {total} replicas, more than the {max_running}"
        f" this {backend} scheduler may run at once (max_running_replicas;"
        f" each running replica holds {FDS_PER_REPLICA} file descriptors, the"
        " default follows the hard RLIMIT_NOFILE): ask for fewer replicas, or"
        " raise the hard open-file limit (`ulimit -Hn`) or max_running_replicas",
    )
