"""Starting one local app: its supervisor, its replicas, then their watch.

What ``LocalScheduler`` does once a submit is admitted (validated, replica
slots taken, runtime started): :func:`build_app` makes the app's
:class:`~asyncsched.schedulers.local._local_app.LocalApp`,
:func:`spawn_replicas` has one spawner job start the replicas and write the
first record -- undoing all of it if the submit fails meanwhile -- and
:func:`supervise` hands the started replicas to the app and the app to the
table.

Example:
    >>> from asyncsched.schedulers.local._app_start import build_app
    >>> callable(build_app)
    True
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import anyio

from asyncsched.errors import SubmitError
from asyncsched.schedulers.kit import ChangeNotifier, all_or_nothing
from asyncsched.schedulers.local._app_table import AppTable
from asyncsched.schedulers.local._app_writes import FirstRecord
from asyncsched.schedulers.local._capacity import ReplicaSlots
from asyncsched.schedulers.local._faults import LocalFaults
from asyncsched.schedulers.local._launch import spawn_app, undo_spawn
from asyncsched.schedulers.local._local_app import LocalApp
from asyncsched.schedulers.local._logs import ReplicaLog
from asyncsched.schedulers.local._record_writer import supervisor_info
from asyncsched.schedulers.local._render import PopenRequest
from asyncsched.schedulers.local._replica import Replica
from asyncsched.schedulers.local._role_plan import role_infos
from asyncsched.schedulers.local._runtime import LocalRuntime
from asyncsched.schedulers.local._spawn import ReplicaLaunch, SpawnConfig, Started
from asyncsched.specs import AppDryRunInfo

__all__ = ("build_app", "spawn_replicas", "supervise")


def build_app(
    request: PopenRequest,
    launches: list[ReplicaLaunch],
    runtime: LocalRuntime,
    *,
    session: str,
    cancel_grace: float,
    state_dir: str,
    changes: ChangeNotifier,
    slots: ReplicaSlots,
    table: AppTable,
    faults: LocalFaults,
) -> LocalApp:
    """The supervisor of an app about to be spawned (no side effect).

    Its replicas' logs are stand-ins until the spawn job has created the
    files (:func:`supervise` puts the real ones in).

    Raises:
        SubmitError: the supervisor cannot be made.
    """
    try:
        assert runtime.spawn_cfg is not None
        replicas = [
            Replica(launch, ReplicaLog(launch.log_dir, {}, runtime.log_files))
            for launch in launches
        ]
        roles = role_infos(request)
        app = LocalApp(
            app_id=request.app_id,
            name=request.app_name or request.app_id,
            session=session,
            app_dir=request.log_dir,
            roles=roles,
            replicas=replicas,
            fail_fast=request.fail_fast,
            cancel_grace=cancel_grace,
            spawn=runtime.spawn_cfg,
            host=runtime.host,
            writer=runtime.writer,
            exits=runtime.exits,
            state_dir=state_dir,
            supervisor=supervisor_info(),
            changes=changes,
            on_finished=functools.partial(slots.release, len(replicas)),
            on_done=functools.partial(table.app_done, request.app_id),
            time_limit=request.time_limit,
            faults=faults,
            final=runtime.final,
        )
    except Exception as exc:
        raise SubmitError(
            f"failed to supervise the replicas of {request.app_id}: {exc}"
        ) from exc
    return app


async def spawn_replicas(
    app: LocalApp,
    request: PopenRequest,
    launches: list[ReplicaLaunch],
    runtime: LocalRuntime,
    spawn_cfg: SpawnConfig,
    check_open: Callable[[], None],
) -> tuple[list[Started], list[ReplicaLog], FirstRecord]:
    """Start the replicas of ``app`` and write its first record, in one
    spawner job; if anything fails before they are watched (or the
    scheduler closes, as ``check_open`` raises), stop them all and remove
    what was created.

    Raises:
        SubmitError: a replica failed to start or its log cannot be opened.
        SchedulerClosedError: (from ``check_open``) the scheduler closed.
    """
    # one spawner job starts the replicas and writes the first record
    files, started, first = await spawn_app(
        runtime.spawner,
        request,
        launches,
        spawn_cfg,
        FirstRecord(app, runtime.writer, runtime.spawner.busy),
    )
    async with all_or_nothing(request.app_id) as steps:
        # never leave started replicas unsupervised
        steps.add(
            functools.partial(
                anyio.to_thread.run_sync,
                undo_spawn,
                request.log_dir,
                started,
                spawn_cfg,
                first,
            ),
            name="replicas",
        )
        check_open()  # closed while spawning: the app never existed
        try:
            logs = [
                ReplicaLog(launch.log_dir, f, runtime.log_files)
                for launch, f in zip(launches, files, strict=True)
            ]
        except Exception as exc:
            raise SubmitError(
                f"failed to supervise the replicas of {request.app_id}: {exc}"
            ) from exc
    return started, logs, first


def supervise(
    app: LocalApp,
    dryrun_info: AppDryRunInfo[Any],
    started: list[Started],
    logs: list[ReplicaLog],
    first: FirstRecord,
    runtime: LocalRuntime,
    table: AppTable,
) -> LocalApp:
    """Watch the spawned replicas of ``app`` (no await: never interrupted)."""
    assert runtime.spawn_cfg is not None
    app.start(started, logs)
    first.adopt()
    table.add(app, dryrun_info.app)
    guardian = runtime.spawn_cfg.guardian
    if guardian.has_pending:
        runtime.host.spawn(guardian.flush, name="local:guardian")
    return app
