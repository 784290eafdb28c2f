"""``memo``: a scheduler plugin built only from :mod:`asyncsched.schedulers.kit`.

Each replica is a task that plays a tiny shell script (``echo``, ``sleep``,
``exit``, ``true``, ``false``; see :func:`asyncsched.testing.parse_script`);
its output is kept in memory. ``docs/scheduler-contract.md`` walks through
this file; ``tests/plugin_example/test_memo.py`` runs the whole contract on
it, found through its entry point.
"""

from __future__ import annotations

import builtins
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio

from asyncsched.schedulers.kit import (
    AppSnapshot,
    Capabilities,
    LogQuery,
    ReplicaSnapshot,
    Scheduler,
    Stream,
    TaskHost,
    make_unique,
)
from asyncsched.specs import (
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    StatusReason,
    exit_code_of_signal,
    is_terminal,
    macros,
    reason_of_exit_code,
)
from asyncsched.testing import parse_script

Script = list[list[str]]


@dataclass
class Replica:
    """One replica's script, state and output lines ``(time, stream, text)``."""

    role: str
    k: int
    script: Script
    state: AppState = AppState.PENDING
    exit_code: int | None = None
    output: builtins.list[tuple[datetime, Stream, str]] = field(
        default_factory=builtins.list
    )


@dataclass
class MemoApp:
    """An app: its replicas, and the scope that stops them."""

    app_id: str
    app: AppDef
    replicas: builtins.list[Replica]
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    decided: AppState | None = None
    over: bool = False


class MemoScheduler(Scheduler[dict[str, CfgVal]]):
    """Replicas are tasks in this process; nothing outlives the scheduler."""

    capabilities = Capabilities.observed()

    def __init__(self, session_name: str) -> None:
        super().__init__("memo", session_name)
        self._apps: dict[str, MemoApp] = {}
        # background tasks: opened in _aenter, closed in _aclose
        self._tasks = TaskHost("memo")

    async def _aenter(self) -> None:
        await self._tasks.enter()

    async def _aclose(self) -> None:
        for app in self._apps.values():
            app.scope.cancel()
        await self._tasks.aclose()

    # -- submit: dry run renders, schedule starts ------------------------------

    async def _submit_dryrun(
        self, app: AppDef, cfg: dict[str, CfgVal]
    ) -> AppDryRunInfo[MemoApp]:
        app_id = make_unique(app.name)
        replicas = []
        for index, role in enumerate(app.roles):
            field = f"roles[{index}].entrypoint"
            for k in range(role.num_replicas):
                values = macros.Values(
                    img_root="", app_id=app_id, replica_id=str(k), rank0_env="RANK0"
                )
                args = values.apply(role).args
                replicas.append(
                    Replica(role.name, k, parse_script(role.entrypoint, args, field))
                )
        return AppDryRunInfo(MemoApp(app_id, app, replicas), repr)

    async def _schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        app: MemoApp = dryrun_info.request
        self._apps[app.app_id] = app
        await self._tasks.start_soon(self._run, app, name=app.app_id)
        return app.app_id

    async def _run(self, app: MemoApp) -> None:
        with app.scope:
            async with anyio.create_task_group() as replicas:
                for replica in app.replicas:
                    replicas.start_soon(self._play, app, replica, replicas.cancel_scope)
        if app.scope.cancel_called:
            app.decided = AppState.CANCELLED
        for replica in app.replicas:
            if not is_terminal(replica.state):  # stopped: reads as SIGTERM
                replica.state = AppState.CANCELLED
                replica.exit_code = exit_code_of_signal(signal.SIGTERM)
        app.over = True
        self.notify_changed(app.app_id)

    async def _play(
        self, app: MemoApp, replica: Replica, fail_fast: anyio.CancelScope
    ) -> None:
        replica.state = AppState.RUNNING
        self.notify_changed(app.app_id)
        code = 0
        for word, *rest in replica.script:
            if word == "echo":
                to = Stream.STDOUT
                if rest[-1:] == [">&2"]:
                    to, rest = Stream.STDERR, rest[:-1]
                replica.output.append((datetime.now(UTC), to, " ".join(rest) + "\n"))
                self.notify_changed(app.app_id)
            elif word == "sleep":
                await anyio.sleep(float(rest[0]))
            elif word in ("exit", "false"):
                code = int(rest[0]) if rest else 1
                break
        replica.exit_code = code
        replica.state = AppState.FAILED if code else AppState.SUCCEEDED
        self.notify_changed(app.app_id)
        if code:
            fail_fast.cancel()  # one failed replica stops the app

    # -- observe and control ---------------------------------------------------

    async def _describe(self, app_id: str) -> AppSnapshot | None:
        app = self._apps.get(app_id)
        return None if app is None else _snapshot(app)

    async def _list(self) -> builtins.list[AppSnapshot]:
        return [_snapshot(app) for app in self._apps.values()]

    def _poll_interval(self, snapshot: AppSnapshot) -> float | None:
        return None  # every change is signalled: wait never polls

    async def _cancel(self, app: AppSnapshot) -> None:
        app.native.scope.cancel()

    async def _log_iter(self, app: AppSnapshot, query: LogQuery) -> AsyncIterator[str]:
        memo: MemoApp = app.native
        [replica] = [
            r for r in memo.replicas if (r.role, r.k) == (query.role_name, query.k)
        ]
        streams = {Stream.STDOUT, Stream.STDERR, Stream.COMBINED}
        if query.streams not in (None, Stream.COMBINED):
            streams = {query.streams}
        read = 0
        while True:
            changed = self.changed(memo.app_id)  # taken before reading
            for when, stream, text in replica.output[read:]:
                read += 1
                early = query.since is not None and when < query.since
                late = query.until is not None and when > query.until
                if stream in streams and not early and not late:
                    yield text
            if memo.over or not query.should_tail:
                return
            await changed.wait()


def _snapshot(app: MemoApp) -> AppSnapshot:
    replicas = []
    for r in app.replicas:
        reason = None
        if r.state == AppState.CANCELLED:
            reason = StatusReason.CANCELLED
        elif r.state == AppState.FAILED and r.exit_code is not None:
            reason = reason_of_exit_code(r.exit_code)
        replicas.append(
            ReplicaSnapshot(
                r.role,
                r.k,
                r.state,
                exit_code=r.exit_code,
                hostname="memo",
                reason=reason,
            )
        )
    return AppSnapshot(
        app.app_id,
        replicas,
        name=app.app.name,
        decided=app.decided,
        roles=builtins.list(app.app.roles),
        native=app,
    )


def create_scheduler(session_name: str, **kwargs: Any) -> MemoScheduler:
    """The entry point: the registry calls it with every scheduler parameter."""
    del kwargs  # memo takes none
    return MemoScheduler(session_name)
