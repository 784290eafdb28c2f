"""The spawner: long-lived threads that run the blocking part of starting apps.

``fork``/``exec`` and creating log dirs block; the scheduler's runtime starts
one :class:`Spawner` and runs those jobs there, off the event loop.

Example:
    >>> SPAWN_TIMEOUT  # seconds a submit waits for its spawner job
    60.0
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any

import anyio

from asyncsched.errors import SchedulerClosedError

__all__ = ("SPAWN_TIMEOUT", "SpawnTimeoutError", "Spawner")

logger = logging.getLogger(__name__)


#: how long :meth:`Spawner.run` waits (shielded) for a job before giving up
SPAWN_TIMEOUT = 60.0


class SpawnTimeoutError(TimeoutError):
    """A spawner job did not finish within its deadline (it is undone later)."""


class _Job:
    __slots__ = (
        "abandoned",
        "args",
        "done",
        "error",
        "finished",
        "func",
        "lock",
        "result",
        "undo",
    )

    def __init__(
        self,
        func: Callable[..., Any],
        args: tuple[Any, ...],
        undo: Callable[[Any], object] | None,
    ) -> None:
        self.func = func
        self.args = args
        self.undo = undo
        self.done = anyio.Event()
        self.result: Any = None
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        self.finished = False
        self.abandoned = False


class Spawner:
    """Long-lived threads (two by default) that run the blocking part of starting apps.

    ``fork``/``exec`` (and creating log dirs) can take milliseconds under load;
    this keeps them off the event loop. These are threads of their own, never
    pooled workers: a parent-death signal fires when the *thread* that forked
    the replica exits, and pooled workers exit when idle. The threads live
    until :meth:`aclose` (after every replica they started is gone).

    Completions come back through a pipe that :meth:`dispatch` (a task in the
    scheduler's group) waits on; a burst of jobs costs one wake-up.
    """

    def __init__(
        self,
        name: str = "asyncsched-spawner",
        threads: int = 2,
        before_dispatch: Callable[[], None] | None = None,
    ) -> None:
        self._name = name
        #: the fault seam's hook, called each time :meth:`dispatch` starts over
        self._before_dispatch = before_dispatch
        self._nthreads = max(1, threads)
        self._jobs: SimpleQueue[_Job | None] = SimpleQueue()
        self._done: deque[_Job] = deque()
        self._threads: list[threading.Thread] = []
        self._rfd = -1
        self._wfd = -1
        self._closed = False
        #: jobs queued so far (each one hop to a spawner thread)
        self.jobs = 0
        #: jobs queued or running now (kept in the loop)
        self._in_flight = 0

    def start(self) -> None:
        """Start the thread (idempotent)."""
        if self._threads or self._closed:
            return
        self._rfd, self._wfd = os.pipe()
        os.set_blocking(self._rfd, False)
        os.set_blocking(self._wfd, False)
        for i in range(self._nthreads):
            thread = threading.Thread(
                target=self._main, name=f"{self._name}-{i}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def _main(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                job.result = job.func(*job.args)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the awaiting task
                job.error = exc
            with job.lock:
                job.finished = True
                abandoned = job.abandoned
            if abandoned:  # its caller gave up waiting: undo what it started
                if job.error is None and job.undo is not None:
                    try:
                        job.undo(job.result)
                    except Exception:
                        logger.exception("undoing an abandoned spawner job failed")
                continue
            self._done.append(job)
            if self._jobs.empty():
                with contextlib.suppress(BlockingIOError):
                    os.write(self._wfd, b"\0")

    def _complete(self) -> None:
        while self._done:
            self._done.popleft().done.set()

    async def dispatch(self) -> None:
        """Wake the tasks whose jobs finished; runs until cancelled.

        Restartable: jobs finished while it was not running are completed first.
        """
        while True:
            if self._before_dispatch is not None:
                self._before_dispatch()
            self._complete()
            await anyio.wait_readable(self._rfd)
            with contextlib.suppress(BlockingIOError):
                while os.read(self._rfd, 4096):
                    pass

    async def run(
        self,
        func: Callable[..., Any],
        *args: Any,
        undo: Callable[[Any], object] | None = None,
        timeout: float = SPAWN_TIMEOUT,  # noqa: ASYNC109 - a bound, not a wrapper
    ) -> Any:
        """Run ``func(*args)`` in the thread and return its result (or raise).

        Not cancellable once queued: what the job starts must not be lost. The
        wait is bounded by ``timeout``: past it, :class:`SpawnTimeoutError` is
        raised and, when the job finishes later, ``undo(result)`` runs in the
        thread (so nothing it started is left behind).
        """
        if not self._threads or self._closed:
            raise SchedulerClosedError("the spawner is not running")
        job = _Job(func, args, undo)
        self.jobs += 1
        self._in_flight += 1
        self._jobs.put(job)
        try:
            with anyio.CancelScope(shield=True):
                with anyio.move_on_after(timeout):
                    await job.done.wait()
        finally:
            self._in_flight -= 1
        if not job.done.is_set():
            with job.lock:
                job.abandoned = not job.finished
            if job.abandoned:
                raise SpawnTimeoutError(f"the spawner job did not finish in {timeout}s")
            # finished a moment ago (result and error are set): no need to wait
        if job.error is not None:
            raise job.error
        return job.result

    def busy(self) -> bool:
        """True while other jobs are queued or running (any thread may ask)."""
        return self._in_flight > 1

    async def aclose(self) -> None:
        """Finish the queued jobs, stop the thread and wake their tasks."""
        if self._closed:
            return
        self._closed = True
        threads, self._threads = self._threads, []
        if not threads:
            return
        for _ in threads:
            self._jobs.put(None)
        for thread in threads:
            await anyio.to_thread.run_sync(thread.join)
        self._complete()
        os.close(self._rfd)
        os.close(self._wfd)
