"""Wake a process's journal readers when the journal is written.

One watch per process serves all its readers. On Linux the kernel tells it of
each write to the journal directory (inotify, through ``asyncinotify``; its
file descriptor is waited on in the event loop, no worker thread): readers
wake as soon as another process's append has landed, and a quiet journal
costs nothing. Where inotify cannot be had (another OS, the package missing,
the user's inotify limits reached, the directory not there yet), the watch
looks at the newest segment's size instead: 2 ms after it grew, the pause
doubling up to 20 ms while nothing changes, and tries the kernel again now
and then.

Example:
    >>> import tempfile
    >>> from asyncsched.schedulers.local._journal import JournalFile
    >>> async def demo() -> bool:
    ...     d = tempfile.mkdtemp()
    ...     woken = anyio.Event()
    ...     async with anyio.create_task_group() as tg:
    ...         woke = lambda new_segment: woken.set()
    ...         watching = await tg.start(watch_journal, d, woke, lambda: True)
    ...         JournalFile(d).append([{"k": "app"}])  # another process, say
    ...         await woken.wait()
    ...         tg.cancel_scope.cancel()
    ...     return watching in ("kernel", "poll")
    >>> anyio.run(demo)
    True
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

import anyio
from anyio.abc import TaskStatus

from asyncsched.schedulers.local._journal import newest_size

if TYPE_CHECKING:
    from asyncinotify import Inotify

__all__ = ("POLL_BUSY_INTERVAL", "POLL_INTERVAL", "WatchMode", "watch_journal")

#: without kernel notifications: how often the watch looks at the journal's
#: size while it is quiet (seconds)...
POLL_INTERVAL = 0.02
#: ... and right after it grew (the pause doubles at each look that finds
#: nothing new, up to POLL_INTERVAL)
POLL_BUSY_INTERVAL = 0.002
#: how often a kernel watch checks whether it is still wanted, and a polling
#: one tries the kernel again (seconds)
RECHECK_INTERVAL = 1.0

#: how the watch learns of writes: "kernel" (inotify) or "poll"
WatchMode = Literal["kernel", "poll"]


class _KernelWatch:
    """An inotify watch of one directory: writes, new files, its removal."""

    def __init__(self, directory: str) -> None:
        from asyncinotify import Inotify, Mask

        self._gone_mask = Mask.IGNORED | Mask.DELETE_SELF | Mask.MOVE_SELF
        self._modify = Mask.MODIFY
        self._inotify: Inotify = Inotify()
        try:
            # read without blocking: an empty queue raises instead of waiting
            os.set_blocking(self._inotify.fd, False)
            self._inotify.add_watch(
                directory,
                self._modify | Mask.CREATE | Mask.MOVED_TO | self._gone_mask,
            )
        except BaseException:
            self._inotify.close()
            raise

    @property
    def fd(self) -> int:
        return self._inotify.fd

    def drain(self) -> tuple[bool, bool, bool]:
        """Take every queued notification: (any?, any but a write to a file
        (a segment may have been added)?, is the directory still there?)."""
        written = added = False
        alive = True
        while True:
            try:
                event = self._inotify.sync_get()
            except BlockingIOError:
                return written, added, alive
            written = True
            if event is None or event.mask != self._modify:
                added = True
            if event is not None and event.mask & self._gone_mask:
                alive = False

    def close(self) -> None:
        self._inotify.close()


def _open_kernel_watch(directory: str) -> _KernelWatch | None:
    """An inotify watch of ``directory`` (blocking), or None where there is none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return _KernelWatch(directory)
    except (ImportError, OSError, RuntimeError):
        # not installed; no inotify in this libc; limits reached; no directory
        return None


async def watch_journal(
    directory: str,
    notify: Callable[[bool], None],
    wanted: Callable[[], bool],
    *,
    kernel: bool = True,
    task_status: TaskStatus[WatchMode] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Call ``notify(new_segment)`` (in the loop) whenever the journal in
    ``directory`` may have grown, until ``wanted()`` is false; ``new_segment``
    is true whenever a segment may have been added since the last call.
    ``kernel=False`` only polls.

    Started with ``TaskGroup.start``, it reports its first mode once it
    watches: a write after that wakes it.
    """
    poll = _Poll(directory)
    started = False
    while wanted():
        watch = None
        if kernel and sys.platform.startswith("linux"):
            watch = await anyio.to_thread.run_sync(_open_kernel_watch, directory)
        if not started:
            started = True
            task_status.started("kernel" if watch is not None else "poll")
        if watch is None:
            await poll.run(notify, wanted, RECHECK_INTERVAL if kernel else math.inf)
            continue
        try:
            notify(True)  # a write may have come before the watch was set
            await _follow_kernel(watch, notify, wanted)
        finally:
            watch.close()


async def _follow_kernel(
    watch: _KernelWatch, notify: Callable[[bool], None], wanted: Callable[[], bool]
) -> None:
    """Notify at each batch of notifications, until the directory is gone or
    nobody wants the watch any more."""
    while wanted():
        with anyio.move_on_after(RECHECK_INTERVAL):
            await anyio.wait_readable(watch.fd)
        written, added, alive = watch.drain()
        if written:
            notify(added)
        if not alive:
            return


class _Poll:
    """Looks at the newest segment's size (the fallback)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._last: tuple[str, int] | None = None
        self._pause = POLL_INTERVAL

    async def run(
        self, notify: Callable[[bool], None], wanted: Callable[[], bool], most: float
    ) -> None:
        """Look until ``most`` seconds have passed, or the first segment
        appeared (the kernel may watch the directory now)."""
        with anyio.move_on_after(most):
            while wanted():
                await anyio.sleep(self._pause)
                now = await anyio.to_thread.run_sync(newest_size, self.directory)
                if now == self._last:
                    self._pause = min(self._pause * 2, POLL_INTERVAL)
                    continue
                appeared = self._last is None
                added = now is None or self._last is None or now[0] != self._last[0]
                self._last = now
                self._pause = POLL_BUSY_INTERVAL
                notify(added)
                if appeared:
                    return
