"""``Runner.watch``: a view over ``Runner.events`` as ``(handle, status)`` pairs.

Each watched app is reported first with its current state, then whenever
its state, its restart count or one of its replicas (state, exit code,
reason, restarts) changes, the last time in a terminal state; an app its
scheduler does not know is reported once as ``None``. Every change comes
from the schedulers' event streams: nothing is polled. The apps are looked
up once at the start (at most ``max_concurrent_queries`` at a time), only to
report the unknown ones.

Example:
    >>> e = AppEvent("c", EventKind.APP, "a", AppState.RUNNING, 1.0)
    >>> status_of(e, {}).state
    RUNNING (3)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import anyio

from asyncsched.errors import SchedulerClosedError
from asyncsched.runner._fanout import StatusEvent
from asyncsched.runner._stream import RunnerEventStream
from asyncsched.schedulers.kit import (
    AppEvent,
    EventKind,
    ReplicaSnapshot,
    replica_key,
)
from asyncsched.specs import (
    AppHandle,
    AppState,
    AppStatus,
    ReplicaStatus,
    RoleStatus,
    deciding_reason,
    make_app_handle,
    parse_app_handle,
)

__all__ = ("status_of", "watch")

#: the status of an app now (None: unknown to its scheduler)
Probe = Callable[[AppHandle], Awaitable[AppStatus | None]]
_Replicas = dict[tuple[str, int], ReplicaSnapshot]


def status_of(event: AppEvent, replicas: _Replicas) -> AppStatus:
    """The app's status after ``event``; ``replicas`` (the app's replicas
    known so far, by role and index) is brought up to date first."""
    if event.replicas:
        replicas.clear()
        replicas.update(((r.role, r.id), r) for r in event.replicas)
    elif event.replica is not None:
        replicas[(event.replica.role, event.replica.id)] = event.replica
    roles: dict[str, list[ReplicaStatus]] = {}
    for r in replicas.values():
        roles.setdefault(r.role, []).append(r.status())
    role_statuses = [RoleStatus(role, reps) for role, reps in roles.items()]
    reason, _ = deciding_reason(event.state, role_statuses)
    return AppStatus(
        state=event.state,
        num_restarts=event.num_restarts,
        msg=event.msg,
        roles=role_statuses,
        reason=reason,
    )


def _key(state: AppState, restarts: int, replicas: _Replicas) -> tuple[object, ...]:
    return (state, restarts, *(replica_key(r) for r in replicas.values()))


async def watch(
    handles: Sequence[AppHandle],
    session: str,
    stream: RunnerEventStream,
    probe: Probe,
    limiter: anyio.CapacityLimiter,
    saw: Callable[[AppHandle, AppStatus | None], None],
) -> AsyncIterator[StatusEvent]:
    """The changes of ``handles`` read from ``stream`` (see the module)."""
    async with stream:
        if not handles:
            return
        unknown: list[AppHandle] = []

        async def check(handle: AppHandle) -> None:
            async with limiter:
                if await probe(handle) is None:
                    unknown.append(handle)

        # before any yield: no task group stays open across one
        async with anyio.create_task_group() as tg:
            for handle in handles:
                tg.start_soon(check, handle)
        # the runner names apps with its own session: map back to the caller's
        alias: dict[str, AppHandle] = {}
        for handle in handles:
            parsed = parse_app_handle(handle)
            alias[make_app_handle(parsed.scheduler_backend, session, parsed.app_id)] = (
                handle
            )
        pending = set(handles)
        for handle in unknown:
            pending.discard(handle)
            saw(handle, None)
            yield handle, None
        last: dict[AppHandle, tuple[object, ...]] = {}
        replicas: dict[AppHandle, _Replicas] = {}
        while pending:
            try:
                event = await stream.__anext__()
            except StopAsyncIteration:
                raise SchedulerClosedError(
                    f"the runner closed while {len(pending)} apps were being watched"
                ) from None
            handle = alias.get(event.handle, "")
            if handle not in pending:
                continue  # RESYNC, an app already final, or an unwatched one
            if event.kind is EventKind.FORGOTTEN:
                pending.discard(handle)
                saw(handle, None)
                yield handle, None
                continue
            known = replicas.setdefault(handle, {})
            status = status_of(event, known)
            key = _key(event.state, event.num_restarts, known)
            if last.get(handle) == key:
                continue
            last[handle] = key
            if status.is_terminal():
                pending.discard(handle)
                last.pop(handle, None)
                replicas.pop(handle, None)
            saw(handle, status)
            yield handle, status
