"""One Docker events stream per scheduler keeps the :class:`ContainerIndex` current.

Protocol, per (re)connection:

1. open ``GET /events`` filtered to containers carrying the app-id label;
2. list those containers (the snapshot) and swap it into the index;
3. apply the events read from the stream; they were buffered since step 1,
   so replaying them over the snapshot leaves the index exactly current.

When the stream drops, the index is marked unsynced (callers fall back to
direct API calls) and the watcher reconnects with backoff and resyncs.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import aiodocker
import aiohttp
import anyio
from anyio.abc import TaskStatus

from asyncsched.errors import AsyncschedError
from asyncsched.schedulers.shared.docker_errors import docker_errors, is_not_found
from asyncsched.schedulers.shared.labels import LABEL_APP_ID

from ._client import open_events
from ._connection import DockerConnection
from ._state import ContainerIndex, ContainerRecord

__all__ = ["EventWatcher", "list_records", "settle"]

logger = logging.getLogger(__name__)

_ACTIONS = (
    "create",
    "start",
    "restart",
    "die",
    "update",
    "pause",
    "unpause",
    "destroy",
    "kill",
    "oom",
    "stop",
)


async def list_records(
    docker: aiodocker.Docker, host: str, app_id: str | None = None
) -> list[ContainerRecord]:
    """List asyncsched containers (of one app, or all) as index records."""
    label = LABEL_APP_ID if app_id is None else f"{LABEL_APP_ID}={app_id}"
    with docker_errors("list containers", host):
        items = await docker.containers.list(
            all=True, filters=json.dumps({"label": [label]})
        )
    records = (ContainerRecord.from_list_item(c._container) for c in items)
    return [r for r in records if r is not None]


async def settle(docker: aiodocker.Docker, host: str, record: ContainerRecord) -> bool:
    """Inspect ``record``'s container to learn exit code, cancel mark and restarts.

    Returns False when the container no longer exists.
    """
    try:
        with docker_errors("inspect a container", host):
            info = await docker.containers.container(record.id).show()
    except AsyncschedError as exc:
        if is_not_found(exc.__cause__):
            return False
        raise
    record.apply_inspect(info)
    return True


class EventWatcher:
    """Follow the daemon's events into ``index``; resync on every reconnect.

    ``on_exit(app_id)`` runs (on the events task; it must not block) after a
    container of the app exited.
    """

    def __init__(
        self,
        conn: DockerConnection,
        index: ContainerIndex,
        *,
        on_exit: Callable[[str], None] | None = None,
        max_backoff: float = 5.0,
    ) -> None:
        self._docker, self._host = conn.docker(), conn.host
        self._index, self._on_exit = index, on_exit
        self._max_backoff = max_backoff
        self.synced = False
        self.resyncs = 0
        self._synced_event = anyio.Event()

    async def wait_synced(self) -> None:
        """Return once the index reflects the daemon (after a resync)."""
        while not self.synced:
            await self._synced_event.wait()

    async def run(
        self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Watch forever; the first connection's failure is raised to the starter.

        Once started, any failure (stream lost, a bad event) is logged and the
        index is resynced on a new connection. Should this task die anyway, its
        owner calls :meth:`mark_unsynced` and starts another watcher.
        """
        backoff = 0.05
        while True:
            try:
                await self._session(None if self.resyncs else task_status)
                backoff = 0.05
            except Exception as exc:
                if not self.resyncs:
                    raise  # never connected: the starter reports it
                logger.warning("Docker events stream lost (%s); resyncing", exc)
            self._mark_unsynced()
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, self._max_backoff)

    def mark_unsynced(self) -> None:
        """The index may be stale: wake every waiter (they fall back to queries)."""
        self.synced = False
        self._synced_event.set()  # wake wait_synced() callers: they re-check
        self._synced_event = anyio.Event()
        self._index.changes.notify_all()

    def _mark_unsynced(self) -> None:
        self.synced = False
        self._synced_event = anyio.Event()
        self._index.changes.notify_all()

    async def _session(self, task_status: TaskStatus[None] | None) -> None:
        filters = {
            "type": ["container"],
            "label": [LABEL_APP_ID],
            "event": list(_ACTIONS),
        }
        with docker_errors("follow Docker events", self._host):
            async with open_events(self._docker, filters) as response:
                try:
                    await self._follow(response, task_status)
                finally:
                    response.close()  # aiodocker leaves streaming responses open

    async def _follow(
        self, response: aiohttp.ClientResponse, task_status: TaskStatus[None] | None
    ) -> None:
        self._index.replace_all(await list_records(self._docker, self._host))
        self.synced = True
        self.resyncs += 1
        self._synced_event.set()
        self._index.changes.notify_all()
        if task_status is not None:
            task_status.started()
        while True:
            line = await response.content.readline()
            if not line:
                return  # the daemon closed the stream
            try:
                event = json.loads(line)
            except ValueError:
                continue
            await self._apply(event)

    async def _apply(self, event: dict[str, Any]) -> None:
        action = str(event.get("Action") or event.get("status") or "")
        actor = event.get("Actor") or {}
        cid = str(actor.get("ID") or event.get("id") or "")
        attrs: dict[str, str] = actor.get("Attributes") or {}
        index = self._index
        if action == "destroy":
            index.remove(cid)
            return
        if action == "kill":  # a signal sent (by a stop): no state change
            index.note_kill(cid)
            return
        record = index.records.get(cid)
        if action == "oom":  # no state change; its exit is inspected
            if record is not None:
                record.oom_killed = True
            return
        if record is None:
            record = ContainerRecord.from_labels(
                cid, attrs.get("name", ""), attrs.get("image", ""), attrs, "created"
            )
            if record is None:
                return
            if action != "create":  # a cancel mark may predate what we saw
                record.restart_policy = None
        if action == "start":  # restarts are counted by the daemon (see _settle)
            record.status, record.exit_code = "running", None
            record.oom_killed, record.error = False, ""
        elif action in ("restart", "unpause"):
            record.status = "running"
        elif action == "pause":
            record.status = "paused"
        elif action == "die":
            # a copy until the daemon says whether it restarts the container:
            # meanwhile readers keep the last known state (an exit that its
            # on-failure policy undoes must never read FAILED)
            record = replace(record)
            code = _int(attrs.get("exitCode"))
            known = code == 0 or (
                record.status == "running" and record.exit_is_final(code)
            )
            record.status, record.exit_code = "exited", code
            # a restart policy may bring it back: only the daemon knows
            if not known and not record.cancelled and not await self._settle(record):
                return
        elif (
            action == "update"
            and not record.cancelled
            and not await self._settle(record)
        ):
            return
        elif action == "stop" and not await self._settle(record):
            # a stop between restarts ends a restarting container without
            # a ``die``: only the daemon knows its status and exit code now
            return
        index.upsert(record)
        if action == "die" and self._on_exit is not None:
            self._on_exit(record.app_id)

    async def _settle(self, record: ContainerRecord) -> bool:
        """Inspect ``record``; False (and forgotten) when the container is gone."""
        try:
            if await settle(self._docker, self._host, record):
                return True
        except AsyncschedError as exc:  # keep following; the next resync corrects it
            logger.warning("could not inspect container %s: %s", record.name, exc)
            record.settled = False
            return True
        self._index.remove(record.id)
        return False


def _int(value: str | None) -> int | None:
    try:
        return None if value is None else int(value)
    except ValueError:
        return None
