"""Stop a container with the daemon's own grace, without waiting for the grace.

``POST /containers/{id}/stop?t=N`` sends the stop signal, waits up to ``N``
seconds and then kills; the daemon replies only once the container stopped.
The daemon carries the stop through even when the client hangs up, so the
grace belongs to the daemon: :meth:`Stopper.stop` sends the request from a
task of the scheduler's :class:`~asyncsched.schedulers.kit.TaskHost` and
returns as soon as the daemon reports (a ``kill`` event) that it signalled the
container, or the request ended first. Closing the scheduler cancels the
request, not the stop.

Example:
    >>> async def cancel_one(stopper: Stopper, record: ContainerRecord) -> None:
    ...     await stopper.stop(record)  # the signal is sent; the grace runs on
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

from asyncsched.errors import SchedulerError
from asyncsched.schedulers.kit import TaskHost
from asyncsched.schedulers.shared.docker_errors import docker_errors, is_not_found

from ._client import client_timeout
from ._connection import DockerConnection
from ._state import ContainerIndex, ContainerRecord

__all__ = ["Stopper"]


class Stopper:
    """Start daemon-side stops (signal, grace, kill) in the background.

    Args:
        conn: The daemon; its client's timeouts bound each request, the
            grace added to the read timeout.
        index: Where the events watcher reports ``kill`` events.
        tasks: Owns the requests in flight (``aclose`` cancels them; the
            daemon finishes the stops).
        stop_timeout: The grace in seconds, SIGTERM to SIGKILL.

    Attributes:
        conn, index, tasks: As given (a :class:`~._control.Control` built on
            this stopper uses them too).
    """

    def __init__(
        self,
        conn: DockerConnection,
        index: ContainerIndex,
        tasks: TaskHost,
        *,
        stop_timeout: int,
    ) -> None:
        self.conn, self.index, self.tasks = conn, index, tasks
        self._stop_timeout = stop_timeout
        self._timeout = client_timeout(
            conn.connect_timeout, conn.read_timeout + stop_timeout
        )

    async def stop(self, record: ContainerRecord) -> None:
        """Ask the daemon to stop ``record``'s container; return once it began.

        "Began" is the daemon's ``kill`` event for the container (the stop
        signal is delivered), or the end of the request (the container was
        not running, or the events stream is down: then after the grace).

        Raises:
            SchedulerError: the daemon refused the stop (a vanished container
                is no error).
        """
        signalled = self.index.expect_kill(record.id)
        done = anyio.Event()
        errors: list[SchedulerError] = []

        async def request() -> None:
            try:
                await self._request(record)
            except SchedulerError as exc:
                errors.append(exc)
                if signalled.is_set():
                    raise  # nobody waits for it any more: logged by the host
            finally:
                done.set()
                self.index.forget_kill(record.id, signalled)

        await self.tasks.start_soon(request, name=f"stop {record.name}")
        await _first(signalled.wait, done.wait)
        if errors and not signalled.is_set():
            raise errors[0]

    async def _request(self, record: ContainerRecord) -> None:
        try:
            with docker_errors(f"cancel container {record.name!r}", self.conn.host):
                await (
                    self.conn.docker()
                    .containers.container(record.id)
                    .stop(t=self._stop_timeout, timeout=self._timeout)
                )
        except SchedulerError as exc:
            if not is_not_found(exc.__cause__):
                raise


async def _first(*waits: Callable[[], Awaitable[object]]) -> None:
    """Return as soon as one of ``waits`` returns."""
    async with anyio.create_task_group() as tg:

        async def one(wait: Callable[[], Awaitable[object]]) -> None:
            await wait()
            tg.cancel_scope.cancel()

        for wait in waits:
            tg.start_soon(one, wait)
