"""One reaper per scheduler: a single task watches every replica's exit and output.

Each replica attempt used to cost a watcher task, a task group and two pump
tasks, each waiting on a descriptor of its own. The :class:`Reaper` instead
registers the replica's pidfd and the read ends of its stdout/stderr pipes in
one private selector (epoll on Linux) and waits on that selector's descriptor
alone: one task and one loop registration serve every replica. When a pipe is
readable its bytes go to the replica's log; when a pidfd is readable the
leader has exited (it stays a zombie: :meth:`Child.reap` collects it) and the
watch's ``on_leader_exit`` runs; once both pipes reached EOF the watch is
*drained*. Where pidfds are missing (not Linux, kernels before 5.3) a poll
task per replica stands in for the pidfd.

Level-triggered: a pipe with more than :data:`READS_PER_TURN` chunks waiting
is read on, after a loop pass, so one chatty replica never holds the loop.

Example:
    >>> reaper = Reaper()
    >>> reaper.watching
    0
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import signal
from collections.abc import Callable

import anyio
import anyio.lowlevel

from asyncsched.schedulers.local._logs import ReplicaLog
from asyncsched.schedulers.local._process import Child

__all__ = ("READS_PER_TURN", "Reaper", "Watch")

logger = logging.getLogger(__name__)

#: bytes read from a pipe at a time (as the former per-replica pumps did)
_PIPE_READ_SIZE = 1 << 16
#: reads of one pipe per wake-up before the loop gets a turn
READS_PER_TURN = 4
#: ready descriptors handled per wake-up before the loop gets a turn
_EVENTS_PER_TURN = 256


class Watch:
    """What the reaper knows of one replica attempt (its leader and pipes)."""

    __slots__ = (
        "_drained",
        "child",
        "exited",
        "log",
        "on_error",
        "on_leader_exit",
        "streams",
    )

    def __init__(
        self,
        child: Child,
        log: ReplicaLog,
        on_leader_exit: Callable[[Watch], None],
        on_error: Callable[[Watch, Exception], None],
    ) -> None:
        self.child = child
        self.log = log
        self.on_leader_exit = on_leader_exit
        self.on_error = on_error
        #: the pipes still open: read end -> stream name
        self.streams: dict[int, str] = {}
        #: True once the leader has exited (before it is reaped)
        self.exited = False
        self._drained: anyio.Event | None = None

    @property
    def drained(self) -> bool:
        """True once every pipe of the attempt reached EOF (or was closed)."""
        return not self.streams

    async def wait_drained(self) -> None:
        """Return once :attr:`drained` is True."""
        if self.streams:
            if self._drained is None:
                self._drained = anyio.Event()
            await self._drained.wait()

    def _stream_closed(self) -> None:
        if not self.streams and self._drained is not None:
            self._drained.set()


class Reaper:
    """Watch the exits and the output of every replica with one task.

    Everything runs in the event-loop thread: :meth:`watch` registers a
    replica attempt, :meth:`run` (a host service of the scheduler) serves
    them all until cancelled, :meth:`close_streams` ends an attempt's output
    early (what is already in its pipes is still saved).
    """

    def __init__(self, before_turn: Callable[[], None] | None = None) -> None:
        #: the fault seam's hook, called at each wake-up before serving
        self._before_turn = before_turn
        #: made at first use: a scheduler never started holds no descriptor
        self._selector_made: selectors.DefaultSelector | None = None
        #: registered descriptor -> (its watch, stream name or None for a pidfd)
        self._fds: dict[int, tuple[Watch, str | None]] = {}
        #: the watches whose leader has not exited yet
        self._pending: set[Watch] = set()
        #: spawns the pidfd stand-in task where pidfds are missing
        self._spawn: Callable[..., None] | None = None
        #: wake-ups of :meth:`run` so far (one serves every ready descriptor)
        self.wakeups = 0

    @property
    def _selector(self) -> selectors.DefaultSelector:
        if self._selector_made is None:
            self._selector_made = selectors.DefaultSelector()
        return self._selector_made

    @property
    def watching(self) -> int:
        """Replica attempts whose leader has not exited yet."""
        return len(self._pending)

    def set_spawner(self, spawn: Callable[..., None]) -> None:
        """How to start the poll task of a child without a pidfd (a host's spawn)."""
        self._spawn = spawn

    def watch(
        self,
        child: Child,
        log: ReplicaLog,
        pipes: dict[str, int],
        on_leader_exit: Callable[[Watch], None],
        on_error: Callable[[Watch, Exception], None],
    ) -> Watch:
        """Serve ``child``'s exit and its ``pipes`` (stream name -> read end).

        The reaper owns the pipes from now on (it closes them). Callbacks run
        in the loop: ``on_leader_exit(watch)`` once the leader has exited,
        ``on_error(watch, exc)`` when saving its output failed (that pipe is
        closed).
        """
        w = Watch(child, log, on_leader_exit, on_error)
        for stream, fd in pipes.items():
            os.set_blocking(fd, False)
            w.streams[fd] = stream
            self._register(fd, w, stream)
        self._pending.add(w)
        pidfd = child.pidfd
        if pidfd is not None:
            self._register(pidfd, w, None)
        elif self._spawn is not None:
            self._spawn(self._poll_exit, w, name=f"reap:{child.pid}")
        else:  # pragma: no cover - the runtime always sets a spawner
            logger.error("no way to watch pid %d without a pidfd", child.pid)
        return w

    def _register(self, fd: int, w: Watch, stream: str | None) -> None:
        self._selector.register(fd, selectors.EVENT_READ)
        self._fds[fd] = (w, stream)

    def _unregister(self, fd: int) -> None:
        if self._fds.pop(fd, None) is not None:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.unregister(fd)

    async def _poll_exit(self, w: Watch) -> None:
        await w.child.wait_exit()
        self._leader_exited(w)

    def _leader_exited(self, w: Watch) -> None:
        if w.exited:
            return
        w.exited = True
        self._pending.discard(w)
        pidfd = w.child.pidfd
        if pidfd is not None:
            self._unregister(pidfd)
        w.on_leader_exit(w)

    # -- output ------------------------------------------------------------------

    def _read(self, fd: int, w: Watch, stream: str, limit: int | None) -> None:
        """Copy what ``fd`` holds into the log (``limit`` reads at most)."""
        n = 0
        while limit is None or n < limit:
            n += 1
            try:
                data = os.read(fd, _PIPE_READ_SIZE)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._end(fd, w, stream)
                return
            try:
                w.log.write(stream, data)
            except Exception as exc:  # noqa: BLE001 - fails its app (on_error)
                self._end(fd, w, stream)
                w.on_error(w, exc)
                return

    def _end(self, fd: int, w: Watch, stream: str) -> None:
        self._unregister(fd)
        if w.streams.pop(fd, None) is None:
            return
        try:
            w.log.end_stream(stream)
        finally:
            os.close(fd)
            w._stream_closed()

    def close_streams(self, w: Watch) -> None:
        """Save what the pipes of ``w`` hold now, then close them (no more waiting
        for EOF: e.g. a grandchild outside the group keeps a pipe open)."""
        for fd, stream in list(w.streams.items()):
            try:
                self._read(fd, w, stream, None)  # to EOF or to an empty pipe
            finally:
                self._end(fd, w, stream)

    def forget(self, w: Watch) -> None:
        """Stop serving ``w`` (its output so far is saved, its pipes closed):
        its child is reaped elsewhere."""
        self._pending.discard(w)
        pidfd = w.child.pidfd
        if pidfd is not None:
            self._unregister(pidfd)
        with contextlib.suppress(Exception):
            self.close_streams(w)

    # -- serving -----------------------------------------------------------------

    def _handle(self, fd: int) -> None:
        entry = self._fds.get(fd)
        if entry is None:
            return
        w, stream = entry
        try:
            if stream is None:
                self._leader_exited(w)
            else:
                self._read(fd, w, stream, READS_PER_TURN)
        except Exception as exc:  # one replica's failure is its own
            logger.exception("the reaper failed on pid %d", w.child.pid)
            w.on_error(w, exc)

    async def _serve_once(self) -> None:
        await anyio.wait_readable(self._selector.fileno())
        self.wakeups += 1
        if self._before_turn is not None:
            self._before_turn()
        ready = self._selector.select(0)
        for i, (key, _) in enumerate(ready):
            if i and i % _EVENTS_PER_TURN == 0:
                await anyio.lowlevel.checkpoint()
            self._handle(key.fd)

    async def run(self) -> None:
        """Serve every watch until cancelled.

        When cancelled (the scheduler is closing and replicas are left), each
        leader still running is SIGKILLed and served (bounded, shielded) until
        it has exited, so that no exit goes unhandled.
        """
        try:
            while True:
                await self._serve_once()
                await anyio.lowlevel.checkpoint()
        except anyio.get_cancelled_exc_class():
            if self._pending:
                with anyio.CancelScope(shield=True), anyio.move_on_after(5.0):
                    for w in list(self._pending):
                        w.child.signal(signal.SIGKILL)
                    while self._pending:
                        await self._serve_once()
            raise

    def close(self) -> None:
        """Close the selector (after :meth:`run` has stopped)."""
        if self._selector_made is not None:
            self._selector_made.close()
            self._selector_made = None
