"""Cancel and fail-fast: mark a container as cancelled, then stop it.

The mark is the restart policy :data:`~._state.CANCEL_MARK_POLICY`, set
before the stop signal: a restart policy must not revive the container, and
every process must be able to tell "cancelled" from "failed". Fail-fast
cancels the live siblings of a replica that failed for good; whichever
scheduler sees the failure first does it.

Example:
    >>> async def cancel_app(control: Control, view: AppView) -> None:
    ...     await control.cancel(view)  # each live container got its stop signal
"""

from __future__ import annotations

import anyio

from asyncsched.errors import SchedulerError
from asyncsched.schedulers.shared.docker_errors import docker_errors, is_not_found

from ._client import update_restart_policy
from ._connection import bind
from ._events import settle
from ._state import CANCEL_MARK_POLICY, AppView, ContainerRecord
from ._stop import Stopper
from ._submit import UNDO_TIMEOUT

__all__ = ("Control",)


class Control:
    """Cancels apps and applies fail-fast.

    Args:
        stopper: Stops the containers; its connection, index (where changes
            are signalled) and task host (which runs the fail-fast tasks)
            serve this too.
    """

    def __init__(self, stopper: Stopper) -> None:
        self._stopper = stopper
        self._conn, self._index, self._tasks = (
            stopper.conn,
            stopper.index,
            stopper.tasks,
        )
        #: ids of the containers a fail-fast stop is under way for
        self._failing_fast: set[str] = set()

    async def cancel(self, view: AppView) -> None:
        """Mark and signal every live container; the grace runs in the daemon."""
        live = [
            r
            for r in view.records
            if r.live and not r.cancelled and r.id not in self._failing_fast
        ]
        await self._conn.run_all([bind(self._cancel_one, r) for r in live])

    async def _cancel_one(self, record: ContainerRecord) -> None:
        # once marked, the container must get its stop: a cancel cut in
        # between would leave it marked (skipped by later cancels) and running
        # (each step is bounded by the client's timeouts; the whole by this)
        with anyio.move_on_after(UNDO_TIMEOUT, shield=True):
            await self._mark_and_stop(record)

    async def _mark_and_stop(self, record: ContainerRecord) -> None:
        try:
            with docker_errors(f"cancel container {record.name!r}", self._conn.host):
                await update_restart_policy(
                    self._conn.docker(),
                    record.id,
                    {"Name": CANCEL_MARK_POLICY, "MaximumRetryCount": 0},
                )
        except SchedulerError as exc:
            if is_not_found(exc.__cause__):
                return
            raise
        record.cancelled = True
        self._index.changes.notify(record.app_id)
        await self._stopper.stop(record)

    def fail_fast(self, view: AppView) -> None:
        """Stop the live replicas of an app whose replica failed for good.

        Done by whichever scheduler sees the failure (its events stream, or a
        ``describe``/``list``/``wait``): each stop is a cancel of that
        container, so every process reads it as stopped after the failure.
        """
        if self._tasks.closed:
            return
        for record in view.to_stop():
            if record.id not in self._failing_fast:
                self._failing_fast.add(record.id)
                self._tasks.spawn(
                    self._stop_sibling, record, name=f"fail-fast {record.name}"
                )

    def on_exit(self, app_id: str) -> None:
        """The events watcher saw a container of ``app_id`` exit."""
        view = self._index.app(app_id)
        if view is not None:
            self.fail_fast(view)

    async def _stop_sibling(self, record: ContainerRecord) -> None:
        try:
            async with self._conn.slot():
                # another process may be stopping it already: one stop signal
                if not await settle(self._conn.docker(), self._conn.host, record):
                    return
                if record.live and not record.cancelled:
                    await self._cancel_one(record)
        finally:
            self._failing_fast.discard(record.id)
