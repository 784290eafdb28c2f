"""``log_iter`` of the local backend: the replica's log file, read and followed.

A replica supervised here is followed through its log: what the supervisor
appends is handed over from memory, and the file is read where the reader
is behind (see :mod:`~asyncsched.schedulers.local._log_follow`); one
supervised by another process (or evicted from memory) through its file size
and its record, polled in a worker thread.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

import anyio

from asyncsched.errors import SchedulerError
from asyncsched.schedulers.kit import LogQuery, Stream
from asyncsched.schedulers.local import _remote as remote
from asyncsched.schedulers.local._local_app import LocalApp
from asyncsched.schedulers.local._logs import (
    Follow,
    ReplicaLog,
    index_path,
    read_line_batches,
)
from asyncsched.schedulers.local._replica import Replica

__all__ = ("log_batches",)


async def log_batches(
    app_id: str,
    native: LocalApp | dict[str, Any],
    query: LogQuery,
    max_line_bytes: int,
) -> AsyncIterator[list[str]]:
    """The lines of the replica log ``query`` asks for, of the app ``native``
    (a :class:`LocalApp`, or the record of an app supervised elsewhere), in
    batches (one per read of the file): ``log_iter`` yields them one by one.

    Raises:
        SchedulerError: the log file was deleted.
    """
    role_name, k = query.role_name, query.k
    stream = (query.streams or Stream.COMBINED).value
    follow: Follow | None = None
    live: tuple[ReplicaLog, str] | None = None
    if isinstance(native, LocalApp):
        replica = _find_replica(native, role_name, k)
        replica_dir = replica.launch.log_dir
        if query.should_tail:
            live = (replica.log, stream)  # from memory while it keeps up
    else:
        record: dict[str, Any] = native
        replica_dir = _record_replica_dir(record, role_name, k)
        if query.should_tail:
            follow = _remote_follow(
                str(record["app_dir"]), os.path.join(replica_dir, f"{stream}.log")
            )
    path = os.path.join(replica_dir, f"{stream}.log")
    batches = read_line_batches(
        path,
        index=index_path(replica_dir, stream),
        since=query.since,
        until=query.until,
        follow=follow,
        max_line_bytes=max_line_bytes,
        live=live,
    )
    # closing this one closes the reader
    async with contextlib.aclosing(batches):
        try:
            async for batch in batches:
                yield batch
        except FileNotFoundError:
            raise SchedulerError(
                f"log file {path!r} of {app_id} does not exist (was it deleted?)"
            ) from None


def _find_replica(app: LocalApp, role_name: str, k: int) -> Replica:
    """The replica ``log_iter`` checked exists."""
    [replica] = [
        r
        for r in app.replicas
        if r.launch.role == role_name and r.launch.replica_id == k
    ]
    return replica


def _record_replica_dir(record: dict[str, Any], role_name: str, k: int) -> str:
    """The log dir of a replica ``log_iter`` checked exists."""
    [log_dir] = [
        str(r["log_dir"])
        for r in (record.get("roles") or {}).get(role_name, [])
        if int(r.get("replica_id", -1)) == k
    ]
    return log_dir


def _remote_follow(app_dir: str, path: str) -> Follow:
    def grown_or_done(pos: int) -> bool | None:
        # blocking: a stat and a record read, in a worker thread
        with contextlib.suppress(OSError):
            if os.stat(path).st_size > pos:
                return True
        return False if remote.record_done(remote.load_record(app_dir)) else None

    async def follow(pos: int) -> bool:
        while True:
            more = await anyio.to_thread.run_sync(grown_or_done, pos)
            if more is not None:
                return more
            await anyio.sleep(0.05)

    return follow
