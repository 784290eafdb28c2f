"""The local backend: each replica is a process group on this host.

Registered as ``local_cwd`` (replicas run in the current directory) and
``local_dir`` (in the directory named by the role's image). Behaviour follows
TorchX's ``local_cwd`` -- on-disk layout, environment, state rules -- with its
known defects fixed, plus what it lacks: per-replica statuses, retries,
fail-fast, ``list()``, ``since``/``until``, honest ``should_tail``, cross-process
status/logs/cancel through on-disk records, and no orphans even when the owning
process is SIGKILLed (see ``docs/backends/local.md``).

Runs on asyncio and trio (anyio-only code, tested on both). POSIX only.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import logging
import warnings
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, cast, final

import anyio

from asyncsched.errors import AsyncschedWarning, InvalidArgumentError, SubmitError
from asyncsched.schedulers.kit import (
    DEFAULT_MAX_LINE_BYTES,
    AppEvent,
    AppSnapshot,
    Capabilities,
    DescribeAppResponse,
    LogQuery,
    Scheduler,
    final_if_settled,
    make_unique,
    render_off_loop,
)
from asyncsched.schedulers.local import _records as records, _remote as remote
from asyncsched.schedulers.local._app_start import (
    build_app,
    spawn_replicas,
    supervise,
)
from asyncsched.schedulers.local._app_table import AppTable
from asyncsched.schedulers.local._capacity import (
    ReplicaSlots,
    check_replica_count,
    default_max_running_replicas,
)
from asyncsched.schedulers.local._detach import launch_detached
from asyncsched.schedulers.local._faults import LocalFaults
from asyncsched.schedulers.local._host_probes import HostProbes
from asyncsched.schedulers.local._journal_events import decode_position, follow_journal
from asyncsched.schedulers.local._journal_lost import journal_lost
from asyncsched.schedulers.local._journal_writer import JournalBounds
from asyncsched.schedulers.local._launch import (
    ExecutableCache,
    plan_launches,
)
from asyncsched.schedulers.local._limits import raise_nofile_limit
from asyncsched.schedulers.local._local_app import LocalApp
from asyncsched.schedulers.local._log_lines import log_batches
from asyncsched.schedulers.local._opts import LocalOpts, base_log_dir, local_run_opts
from asyncsched.schedulers.local._process import PdeathsigMode
from asyncsched.schedulers.local._render import (
    CWDImageProvider,
    HostFacts,
    ImageProvider,
    LocalDirectoryImageProvider,
    PopenRequest,
    format_request,
    gpus_requested,
    render_request,
)
from asyncsched.schedulers.local._retention import Retention
from asyncsched.schedulers.local._role_plan import warn_ignored_mounts
from asyncsched.schedulers.local._runtime import LocalRuntime, stop_apps
from asyncsched.schedulers.local._snapshot import snapshot_app
from asyncsched.schedulers.local._spawn import ReplicaLaunch, SpawnConfig
from asyncsched.schedulers.shared.ids import unique_app_id
from asyncsched.specs import (
    AppDef,
    AppDryRunInfo,
    CfgVal,
    runopts,
)

__all__ = ("LocalScheduler",)

logger = logging.getLogger(__name__)

#: submits that may run their synchronous part (checks, spawning) at once
_SUBMIT_CONCURRENCY = 8

DEFAULT_RETENTION = Retention()


# -- the scheduler -------------------------------------------------------------------


@final
class LocalScheduler(Scheduler[LocalOpts]):
    """Run apps as process groups on this host, orphan-proof and event-driven.

    Args:
        session_name: Session; part of the log path and of app handles
            (letters, digits, ``_.-``; see
            :func:`~asyncsched.specs.validate_session_name`).
        image_provider_class: :class:`CWDImageProvider` (``local_cwd``) or
            :class:`LocalDirectoryImageProvider` (``local_dir``).
        cache_size: How many finished apps are kept in memory; beyond it the
            oldest terminal app leaves memory and is read back from its
            record: it still answers describe/wait/log_iter/list. Running
            apps are never evicted and never count against correctness: the
            cache bounds memory only (apps running at once are bounded by
            ``max_running_replicas``).
        max_running_replicas: How many replicas (processes) of this
            scheduler may run at once. A submit whose replicas do not fit
            *waits* (cancellably, first come first served) until enough
            replicas have ended, so ``Runner.run_many`` of 10,000 apps needs
            no semaphore; an app with more replicas than this is refused at
            once with a ``SpecError``. Default: what the open-file limit
            allows, ``(RLIMIT_NOFILE - 256 - 32) // 3`` (each running replica
            holds 3 descriptors here; up to 32 recently written log files stay
            open), at most 2048 -- after ``raise_nofile``.
        raise_nofile: Raise this process's soft ``RLIMIT_NOFILE`` to its hard
            limit (once per process, never lowered; replicas get the original
            soft limit back), as Go programs do: the common soft limit of
            1024 would let only 85 replicas run at once. ``False`` leaves the
            limit alone.
        extra_paths: Directories put in front of each role's PATH.
        cancel_grace: Seconds between SIGTERM and SIGKILL on cancel,
            fail-fast and restarts.
        close_grace: The same, when the scheduler closes.
        state_dir: Where apps are indexed for other processes (default
            ``$ASYNCSCHED_STATE_DIR``, ``$XDG_STATE_HOME/asyncsched`` or
            ``~/.local/state/asyncsched``); apps without a ``log_dir`` keep
            their logs and records in its ``logs`` folder until pruned. It
            must be owned by you and not writable by group or others:
            otherwise submit, describe, list and cancel raise
            :class:`~asyncsched.errors.UnsafeStateDirError`.
        retention: Which finished apps of the state dir are kept (default:
            the newest 100, at most 14 days old); applied once, off the event
            loop, before the scheduler starts its first app. It never removes
            an app that finished less than an hour ago, nor one whose
            supervising process still runs. ``None``: never prune
            automatically (``asyncsched prune`` still can).
        pdeathsig: How replicas get the Linux parent-death signal: ``"off"``
            (default: the guardian process alone protects, see
            ``docs/backends/local.md``), ``"auto"`` (``setpriv`` if present,
            else a ``preexec_fn``), ``"setpriv"`` or ``"preexec"``.
        max_line_bytes: Cap of one ``log_iter`` line in bytes (default 1 MiB);
            a longer line comes in pieces of at most this size.
        before_spawn: A fault seam for tests: called as ``before_spawn(role,
            replica_id)`` just before each replica process (or retry attempt)
            is started, in the thread that starts it (a worker thread at
            submit, the event loop on retries), so it must be quick and must
            not touch the scheduler. What it raises fails that start as a
            failed exec would: at submit, any exception makes ``submit``
            raise ``SubmitError`` naming it, after stopping every replica
            already started; on a retry, an ``OSError`` fails the replica
            (its app reads FAILED, the message naming it). Default: none.
            The same hook as ``faults.before_spawn`` (give one of them).
        faults: The fault seam for tests: :class:`LocalFaults` hooks that make
            the backend's own steps fail (a replica start, a log, a reaper, a
            record write, the spawner's dispatcher, a journal append).
            Default: none.
        journal_bounds: How much event history the session's event journal
            keeps (:class:`JournalBounds`: 4 segments of 4 MiB, and the last
            256 batches in memory for this process's readers, by default);
            see ``docs/events.md``.

    Raises:
        InvalidArgumentError: ``cache_size`` or ``max_running_replicas`` is
            not positive, ``session_name`` cannot name a directory, or both
            ``before_spawn`` and ``faults.before_spawn`` are given.

    Example:
        >>> async def main() -> None:
        ...     async with LocalScheduler("demo") as sched:
        ...         role = Role("hi", image="", entrypoint="echo", args=["hello"])
        ...         app_id = await sched.submit(AppDef("hi", roles=[role]), {})
        ...         await sched.wait(app_id, timeout=30)
        ...         async for line in sched.log_iter(app_id, "hi"):
        ...             print(line, end="")
    """

    capabilities = Capabilities.observed(retries=True)
    submits_at_once = _SUBMIT_CONCURRENCY

    def __init__(
        self,
        session_name: str,
        image_provider_class: type[ImageProvider] = CWDImageProvider,
        cache_size: int = 100,
        extra_paths: list[str] | None = None,
        *,
        cancel_grace: float = 10.0,
        close_grace: float = 1.0,
        state_dir: str | None = None,
        pdeathsig: PdeathsigMode = "off",
        retention: Retention | None = DEFAULT_RETENTION,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_running_replicas: int | None = None,
        raise_nofile: bool = True,
        before_spawn: Callable[[str, int], None] | None = None,
        faults: LocalFaults | None = None,
        journal_bounds: JournalBounds | None = None,
    ) -> None:
        super().__init__("local", session_name, max_line_bytes)
        # the registry name of its image provider: local_cwd or local_dir
        self.handle_name = (
            "local_dir"
            if issubclass(image_provider_class, LocalDirectoryImageProvider)
            else "local_cwd"
        )
        if journal_bounds is not None and not isinstance(journal_bounds, JournalBounds):
            raise InvalidArgumentError(
                f"journal_bounds must be a JournalBounds, got {journal_bounds!r}"
            )
        if cache_size <= 0:
            raise InvalidArgumentError(
                f"cache_size must be greater than zero, got {cache_size}"
            )
        if max_running_replicas is not None and not _is_positive_int(
            max_running_replicas
        ):
            raise InvalidArgumentError(
                "max_running_replicas must be an int greater than zero, got"
                f" {max_running_replicas!r}"
            )
        nofile = raise_nofile_limit() if raise_nofile else None
        if max_running_replicas is None:
            max_running_replicas = default_max_running_replicas(nofile)
        #: replicas that may run at once; submits beyond it wait
        self.max_running_replicas = max_running_replicas
        self._slots = ReplicaSlots(max_running_replicas)
        self._image_provider_class = image_provider_class
        self._extra_paths = list(extra_paths or [])
        self.cancel_grace = cancel_grace
        self.close_grace = close_grace
        self.state_dir = state_dir or records.default_state_dir()
        self._table = AppTable(cache_size, self.state_dir, session_name)
        if before_spawn is not None:
            if faults is not None and faults.before_spawn is not None:
                raise InvalidArgumentError(
                    "give before_spawn or faults.before_spawn, not both"
                )
            faults = dataclasses.replace(
                faults or LocalFaults(), before_spawn=before_spawn
            )
        self._faults = faults or LocalFaults()
        self._runtime = LocalRuntime(
            session_name,
            self.state_dir,
            pdeathsig=pdeathsig,
            retention=retention,
            faults=self._faults,
            journal_bounds=journal_bounds,
        )
        # bounds how many submits run their synchronous part at once, so that
        # one loop pass never runs hundreds of them (event-loop lag)
        self._submit_limiter: anyio.Semaphore | None = None
        # submits past their open check, not yet done: aclose waits for them
        self._submits_active = 0
        self._submits_idle: anyio.Event | None = None
        self._executables = ExecutableCache()
        self._probes = HostProbes()
        #: what a detached app's supervisor builds its scheduler with
        self._detached_args: dict[str, Any] = {
            "session_name": session_name,
            "cache_size": 1,
            "cancel_grace": cancel_grace,
            "close_grace": close_grace,
            "state_dir": self.state_dir,
            "pdeathsig": pdeathsig,
            "retention": None,
            "max_line_bytes": max_line_bytes,
            "journal_bounds": journal_bounds,
        }

    def _run_opts(self) -> runopts:
        return local_run_opts()

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        """Local replicas need no resource (TorchX's rule); mounts are ignored.

        Replicas run on this host's file system, so bind, volume and device
        mounts cannot be honoured: each role with mounts gets an
        :class:`~asyncsched.errors.AsyncschedWarning` naming them.
        """
        check_replica_count(
            [role.num_replicas for role in app.roles],
            self.max_running_replicas,
            "roles",
            self.backend,
        )
        warn_ignored_mounts(app, scheduler)

    # -- lifecycle ---------------------------------------------------------------------

    async def _aenter(self) -> None:
        await self._runtime.host.enter()

    def _close_timeout(self) -> float:
        # both graces, the SIGKILL wait (10 s), then writer and host (<= 30 s each)
        return self.close_grace + self.cancel_grace + 80.0

    async def _ensure_runtime(self) -> SpawnConfig:
        # before anything starts: an unsafe state dir is refused
        return await self._runtime.start(self._table.check_state_dir)

    async def _aclose(self) -> None:
        # ``closed`` is set: no new submit passes its open check; those waiting
        # for replica slots give up. Let those in flight finish (they see
        # ``closed`` and undo what they started), so that every app id
        # returned is in the snapshot below.
        self._slots.close()
        if self._submits_active:
            self._submits_idle = anyio.Event()
            await self._submits_idle.wait()
        apps, owed = self._table.take_for_close()
        await stop_apps(apps, self.close_grace)
        await self._runtime.aclose(apps + owed, self.cancel_grace)

    # -- dry-run ---------------------------------------------------------------------------

    async def _submit_dryrun(
        self, app: AppDef, cfg: LocalOpts
    ) -> AppDryRunInfo[PopenRequest]:
        values = cast(Mapping[str, CfgVal], cfg)  # the TypedDict, as a mapping
        gpus = 0
        if values.get("auto_set_cuda_visible_devices") and gpus_requested(app):
            gpus = await self._probes.gpus()
        host = HostFacts(gpu_count=gpus, extra_paths=tuple(self._extra_paths))
        request = await render_off_loop(
            app,
            render_request,
            app,
            unique_app_id(
                app.name, "asyncsched.schedulers.local_scheduler", make_unique
            ),
            values,
            session_name=self.session_name,
            base_log_dir=base_log_dir(values, self.state_dir),
            provider=self._image_provider_class(values),
            host=host,
        )
        if request.memory_mb and await self._probes.limit_tool() is None:
            warnings.warn(
                "resource.memMB is not enforced: util-linux prlimit, which sets"
                " the replicas' memory limit, is not installed (roles:"
                f" {', '.join(sorted(request.memory_mb))})",
                AsyncschedWarning,
                stacklevel=2,
            )
        return AppDryRunInfo(request, format_request)

    # -- schedule ------------------------------------------------------------------------------

    async def _schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        """Start the replicas of a dry-run request; return the app id.

        Raises:
            InvalidArgumentError: the request's app id (edited after the dry
                run) is not one plain path component.
            SpecError: an entrypoint is missing or not executable, or a
                working directory does not exist (nothing was started).
            SubmitError: the log dir cannot be created or a replica failed to
                start (whatever started was killed and the app dir removed).
            SchedulerClosedError: the scheduler closed while the submit waited
                for its replicas to fit under ``max_running_replicas``.
        """
        request: PopenRequest = dryrun_info.request
        if not records.is_app_id(request.app_id):  # a request edited after dry-run
            raise InvalidArgumentError(
                f"app id {request.app_id!r} is not one plain path component"
                " (letters, digits, '_', '.', '-')"
            )
        if self._table.knows(request.app_id):
            raise SubmitError(f"app {request.app_id} was already scheduled")
        if request.detach:
            # supervised by a process of its own, seen here through its record
            return await launch_detached(
                dryrun_info,
                self._detached_args,
                self._faults.before_detach_ack,
                self._faults.detach_ack_timeout,
            )
        self._submits_active += 1
        try:
            app = await self._schedule_reserved(request, dryrun_info)
        finally:
            self._submits_active -= 1
            if self._submits_active == 0 and self._submits_idle is not None:
                self._submits_idle.set()
        # once submit returns, other processes can find the app (and its pids)
        await app.settled()
        return app.app_id

    async def _schedule_reserved(
        self, request: PopenRequest, dryrun_info: AppDryRunInfo[Any]
    ) -> LocalApp:
        count = sum(len(params) for params in request.role_params.values())
        check_replica_count(  # a request edited after the dry run
            [len(params) for params in request.role_params.values()],
            self.max_running_replicas,
            "roles",
            self.backend,
        )
        # wait (cancellably) until the app's replicas may run; given back when
        # the app has finished, or below when the submit fails
        if not await self._slots.acquire(count):
            self._check_open()
        try:
            app = await self._schedule_admitted(request, dryrun_info)
        except BaseException:
            self._slots.release(count)
            raise
        return app

    async def _schedule_admitted(
        self, request: PopenRequest, dryrun_info: AppDryRunInfo[Any]
    ) -> LocalApp:
        if self._submit_limiter is None:
            self._submit_limiter = anyio.Semaphore(_SUBMIT_CONCURRENCY)
        prlimit = await self._probes.limit_tool()
        async with self._submit_limiter:
            self._check_open()
            if self._table.knows(request.app_id):
                raise SubmitError(f"app {request.app_id} was already scheduled")
            # validate first: a request that cannot launch evicts nothing
            launches = plan_launches(request, prlimit, self._executables)
            self._table.evict_if_needed()
            self._table.reserved += 1
            try:
                return await self._launch(request, dryrun_info, launches)
            finally:
                self._table.reserved -= 1

    async def _launch(
        self,
        request: PopenRequest,
        dryrun_info: AppDryRunInfo[Any],
        launches: builtins.list[ReplicaLaunch],
    ) -> LocalApp:
        spawn_cfg = await self._ensure_runtime()
        self._check_open()
        app = build_app(
            request,
            launches,
            self._runtime,
            session=self.session_name,
            cancel_grace=self.cancel_grace,
            state_dir=self.state_dir,
            changes=self.change_source,
            slots=self._slots,
            table=self._table,
            faults=self._faults,
        )
        started, logs, first = await spawn_replicas(
            app, request, launches, self._runtime, spawn_cfg, self._check_open
        )
        return supervise(
            app, dryrun_info, started, logs, first, self._runtime, self._table
        )

    # -- observation ----------------------------------------------------------------------

    async def _describe(self, app_id: str) -> AppSnapshot | None:
        """Describe ``app_id``: state, restarts, per-replica statuses and roles.

        Apps supervised by another process are read from their records. A
        terminal state is reported only once the record (and, for a finished
        app, TorchX's SUCCESS file) is on disk.
        """
        app = self._table.apps.get(app_id)
        if app is not None:
            await app.exits_handled()  # never older than a delivered event
            if app.done.is_set() and app.record_stale:
                await app.settled()
            snapshot = self._snapshot(app)
            self._table.settle(app)  # finished and on disk: kept compact
            return snapshot
        finished = self._table.snapshot_finished(app_id)
        if finished is not None:
            return finished
        record = await self._table.record_of(app_id)
        return remote.snapshot_record(record) if record is not None else None

    async def _final_now(self, app_id: str) -> tuple[bool, DescribeAppResponse | None]:
        # a read of memory or of one record file: cheap enough for a fan-out
        # to check each of thousands of apps before it waits for any
        self._check_open()
        return final_if_settled(await self._describe(app_id))

    def _snapshot(self, app: LocalApp) -> AppSnapshot:
        return snapshot_app(app, self._table.roles(app.app_id))

    async def _list(self) -> builtins.list[AppSnapshot]:
        """The apps of this session: those supervised here and those on record.

        A record that cannot be read or used (truncated, a newer version's,
        edited) is skipped with a warning on the ``asyncsched`` logger.
        """
        table = self._table
        for app in builtins.list(table.apps.values()):
            await app.exits_handled()  # as in describe
            if app.done.is_set() and app.record_stale:
                await app.settled()
        result = [self._snapshot(a) for a in table.apps.values()]
        result.extend(
            snapshot
            for app_id in builtins.list(table.finished)
            if (snapshot := table.snapshot_finished(app_id)) is not None
        )
        found = await anyio.to_thread.run_sync(table.listed, table.known())
        result.extend(remote.snapshot_record(record) for _, record in found)
        return result

    def _poll_interval(self, snapshot: AppSnapshot) -> float | None:
        # an app supervised by another process changes on disk: poll its record
        return 1.0 if isinstance(snapshot.native, dict) else None

    # -- events ----------------------------------------------------------------------

    def _check_cursor(self, cursor: str) -> None:
        decode_position(cursor)

    def _events(self, since: str | None) -> AsyncIterator[AppEvent]:
        """Follow the session's event journal (see ``docs/events.md``).

        Raises:
            UnsafeStateDirError: (from the stream) the state dir is not private.
        """
        return self._follow(since)

    async def _follow(self, since: str | None) -> AsyncIterator[AppEvent]:
        journal = self._runtime.journal
        host = self._runtime.host
        await host.group()
        # apps whose supervisor died since: their end is journaled first
        found = await anyio.to_thread.run_sync(self._table.listed, self._table.known())
        await anyio.to_thread.run_sync(journal_lost, journal.file, found)
        journal.start_watch(host.spawn)
        try:
            async with contextlib.aclosing(
                follow_journal(
                    journal.file,
                    since,
                    list_apps=self._list,
                    appended=journal.appended.changed,
                    is_open=lambda: not self._closed,
                    check=self._table.check_state_dir,
                    recent=journal.tail.after,
                    segments=lambda: journal.segments,
                )
            ) as events:
                async for event in events:
                    yield event
        finally:
            journal.readers -= 1

    # -- control -----------------------------------------------------------------------------

    async def _cancel(self, app: AppSnapshot) -> None:
        if isinstance(app.native, LocalApp):
            app.native.cancel()
            return
        if self._table.knows(app.app_id):  # finished here (compact): nothing runs
            return
        app_dir = str(app.native["app_dir"])
        updated = await anyio.to_thread.run_sync(remote.cancel_remote, app_dir)
        if updated is not None and await anyio.to_thread.run_sync(
            remote.supervisor_alive, updated
        ):
            await self._ensure_runtime()
            self._runtime.escalate_remote(app_dir, self.cancel_grace)

    # -- logs ----------------------------------------------------------------------------------

    def _log_batches(
        self, app: AppSnapshot, query: LogQuery
    ) -> AsyncIterator[list[str]]:
        return log_batches(app.app_id, app.native, query, self.max_line_bytes)


# -- helpers ------------------------------------------------------------------------------


def _is_positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
