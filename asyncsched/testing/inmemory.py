"""An in-memory scheduler for tests: no processes, real async semantics.

``InMemoryScheduler`` "runs" each replica as a task that interprets a tiny
subset of ``sh -c`` scripts, so the same AppDef can drive it and a real backend:
commands separated by ``;`` or newlines, each one of ``echo WORDS`` (append
``>&2`` for stderr), ``sleep SECONDS``, ``exit CODE``, ``true`` and ``false``.
A role's entrypoint is either ``sh`` (with ``args == ["-c", script]``) or one of
those commands directly.

Example:
    >>> async def main() -> None:
    ...     async with InMemoryScheduler("test") as sched:
    ...         role = Role("r", image="-", entrypoint="sh", args=["-c", "echo hi; exit 3"])
    ...         app_id = await sched.submit(AppDef("app", roles=[role]))
    ...         assert (await sched.wait(app_id)).state == AppState.FAILED
"""

from __future__ import annotations

import builtins
import shlex
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pprint import pformat
from typing import Any, final

import anyio

from asyncsched.errors import SpecError
from asyncsched.schedulers.api import (
    AppSnapshot,
    Capabilities,
    LogQuery,
    ReplicaSnapshot,
    Scheduler,
    Stream,
)
from asyncsched.schedulers.shared.changes import ChangeNotifier
from asyncsched.schedulers.shared.ids import make_unique
from asyncsched.schedulers.shared.taskhost import TaskHost, describe_error
from asyncsched.specs import (
    NONE,
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    Role,
    StatusReason,
    exit_code_of_signal,
    is_terminal,
    macros,
    reason_of_exit_code,
    runopts,
)

__all__ = ["InMemoryRequest", "InMemoryScheduler", "create_scheduler", "parse_script"]

_COMMANDS = {"echo", "sleep", "exit", "true", "false"}


def parse_script(
    entrypoint: str, args: list[str], field: str = "entrypoint"
) -> list[list[str]]:
    """Split a role's command into the commands the in-memory runner understands.

    Raises:
        SpecError: (on ``field``) a command outside the supported subset,
            which this runner cannot find, as a shell would say.
    """
    if entrypoint == "sh":
        if len(args) != 2 or args[0] != "-c":
            raise SpecError(field, "sh needs exactly ['-c', SCRIPT] as args")
        script = args[1].replace("\n", ";")
        commands = [shlex.split(part) for part in script.split(";") if part.strip()]
    else:
        commands = [[entrypoint, *args]]
    for cmd in commands:
        if cmd[0] not in _COMMANDS:
            raise SpecError(
                field,
                f"{cmd[0]!r} was not found: the in-memory scheduler runs only"
                f" {sorted(_COMMANDS)}",
            )
    return commands


@dataclass
class InMemoryRequest:
    """What the in-memory scheduler launches: per role, per replica, commands."""

    app_id: str
    app: AppDef
    commands: dict[str, list[list[list[str]]]]
    fail_fast: bool = True


@dataclass
class _Line:
    when: datetime
    stream: Stream
    text: str


@dataclass
class _Replica:
    role: str
    replica_id: int
    state: AppState = AppState.PENDING
    exit_code: int | None = None
    lines: builtins.list[_Line] = field(default_factory=builtins.list)


@dataclass
class _App:
    app_id: str
    app: AppDef
    replicas: builtins.list[_Replica]
    changes: ChangeNotifier
    decided: AppState | None = None
    cancel_scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)
    submitted_at: float = field(default_factory=time.time)
    fail_fast: bool = True
    replicas_scope: anyio.CancelScope | None = None
    msg: str = NONE

    def notify(self) -> None:
        self.changes.notify(self.app_id)


@final
class InMemoryScheduler(Scheduler[dict[str, CfgVal]]):
    """A scheduler whose replicas are tasks interpreting tiny shell scripts."""

    capabilities = Capabilities.observed()

    def __init__(self, session_name: str, **_: Any) -> None:
        super().__init__("inmemory", session_name)
        self._apps: dict[str, _App] = {}
        self._host = TaskHost("InMemoryScheduler")

    def _run_opts(self) -> runopts:
        opts = runopts()
        opts.add(
            "fail_fast", type_=bool, default=True, help="stop the app on first failure"
        )
        return opts

    async def _aenter(self) -> None:
        await self._host.enter()

    async def _aclose(self) -> None:
        for app in self._apps.values():
            app.cancel_scope.cancel()
        await self._host.aclose()

    async def _submit_dryrun(
        self, app: AppDef, cfg: dict[str, CfgVal]
    ) -> AppDryRunInfo[InMemoryRequest]:
        app_id = make_unique(app.name)
        commands: dict[str, list[list[list[str]]]] = {}
        for index, role in enumerate(app.roles):
            field = f"roles[{index}].entrypoint"
            commands[role.name] = [
                parse_script(role.entrypoint, _substituted(role, app_id, i).args, field)
                for i in range(role.num_replicas)
            ]
        request = InMemoryRequest(
            app_id, app, commands, bool(cfg.get("fail_fast", True))
        )
        return AppDryRunInfo(request, pformat)

    async def _schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        request: InMemoryRequest = dryrun_info.request
        replicas = [
            _Replica(role, i)
            for role, per_replica in request.commands.items()
            for i in range(len(per_replica))
        ]
        app = _App(
            request.app_id,
            request.app,
            replicas,
            self.change_source,
            fail_fast=request.fail_fast,
        )
        self._apps[app.app_id] = app
        app.notify()
        await self._host.start_soon(
            self._run_app,
            app,
            request.commands,
            name=f"app:{app.app_id}",
            on_error=lambda exc: self._app_failed(app, exc),
        )
        return app.app_id

    @staticmethod
    def _app_failed(app: _App, exc: Exception) -> None:
        """The task running ``app`` raised: that app alone is FAILED."""
        app.decided = AppState.FAILED
        app.msg = f"running the app failed: {describe_error(exc)}"
        for replica in app.replicas:
            if not is_terminal(replica.state):
                replica.state = AppState.FAILED
        app.done.set()
        app.notify()

    async def _run_app(
        self, app: _App, commands: dict[str, list[list[list[str]]]]
    ) -> None:
        with app.cancel_scope:
            async with anyio.create_task_group() as tg:
                app.replicas_scope = tg.cancel_scope
                for replica in app.replicas:
                    tg.start_soon(
                        self._run_replica,
                        app,
                        replica,
                        commands[replica.role][replica.replica_id],
                    )
        if app.cancel_scope.cancel_called:
            app.decided = AppState.CANCELLED
        for replica in app.replicas:
            if not is_terminal(replica.state):  # stopped by a cancel or fail-fast
                replica.state = AppState.CANCELLED
                if replica.exit_code is None:  # as a shell killed by SIGTERM
                    replica.exit_code = exit_code_of_signal(signal.SIGTERM)
        app.done.set()
        app.notify()

    async def _run_replica(
        self, app: _App, replica: _Replica, commands: list[list[str]]
    ) -> None:
        replica.state = AppState.RUNNING
        app.notify()
        code = 0
        for cmd in commands:
            name, rest = cmd[0], cmd[1:]
            if name == "echo":
                stream = Stream.STDOUT
                if rest and rest[-1] == ">&2":
                    stream, rest = Stream.STDERR, rest[:-1]
                replica.lines.append(
                    _Line(datetime.now(UTC), stream, " ".join(rest) + "\n")
                )
                app.notify()
            elif name == "sleep":
                await anyio.sleep(float(rest[0]))
            elif name in ("exit", "false"):
                code = int(rest[0]) if rest else 1
                break
        replica.exit_code = code
        replica.state = AppState.SUCCEEDED if code == 0 else AppState.FAILED
        app.notify()
        if code != 0 and app.fail_fast and app.replicas_scope is not None:
            app.replicas_scope.cancel()

    async def _describe(self, app_id: str) -> AppSnapshot | None:
        app = self._apps.get(app_id)
        if app is None:
            return None
        return _snapshot(app)

    async def _list(self) -> builtins.list[AppSnapshot]:
        return [_snapshot(a) for a in self._apps.values()]

    async def _cancel(self, app: AppSnapshot) -> None:
        app.native.cancel_scope.cancel()

    async def _log_iter(self, app: AppSnapshot, query: LogQuery) -> AsyncIterator[str]:
        run: _App = app.native
        [replica] = [
            r
            for r in run.replicas
            if r.role == query.role_name and r.replica_id == query.k
        ]
        wanted = (
            {Stream.STDOUT, Stream.STDERR}
            if query.streams in (None, Stream.COMBINED)
            else {query.streams}
        )
        pos = 0
        while True:
            changed = self.changed(run.app_id)
            while pos < len(replica.lines):
                line = replica.lines[pos]
                pos += 1
                if line.stream not in wanted:
                    continue
                if query.since is not None and line.when < query.since:
                    continue
                if query.until is not None and line.when > query.until:
                    continue
                yield line.text
            if not query.should_tail or run.done.is_set():
                return
            await changed.wait()


def _snapshot(app: _App) -> AppSnapshot:
    replicas = [
        ReplicaSnapshot(
            r.role,
            r.replica_id,
            r.state,
            exit_code=r.exit_code,
            hostname="localhost",
            reason=_reason(r),
        )
        for r in app.replicas
    ]
    return AppSnapshot(
        app.app_id,
        replicas,
        name=app.app.name,
        decided=app.decided,
        msg=app.msg,
        roles=builtins.list(app.app.roles),
        native=app,
    )


def _reason(replica: _Replica) -> StatusReason | None:
    if replica.state == AppState.CANCELLED:
        return StatusReason.CANCELLED
    if replica.state == AppState.FAILED and replica.exit_code is not None:
        return reason_of_exit_code(replica.exit_code)
    return None


def _substituted(role: Role, app_id: str, replica_id: int) -> Role:
    values = macros.Values(
        img_root="",
        app_id=app_id,
        replica_id=str(replica_id),
        rank0_env="TORCHX_RANK0_HOST",
    )
    return values.apply(role)


def create_scheduler(session_name: str, **kwargs: Any) -> InMemoryScheduler:
    """Factory with the registry's signature."""
    return InMemoryScheduler(session_name, **kwargs)
