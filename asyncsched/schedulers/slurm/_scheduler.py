"""Run apps as heterogeneous Slurm batch jobs (``slurm``).

Shells out to Slurm's client commands (``sbatch``, ``squeue``, ``sacct``,
``sinfo``, ``scancel``) as async subprocesses, each with a timeout; nothing
blocks the event loop. The app id is the Slurm job id (TorchX's). Status is
batched: concurrent ``describe`` calls share one ``squeue``, and every
``wait`` in flight shares one polling loop (one ``squeue``, plus one ``sacct``
for jobs that left the controller, per tick).
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import logging
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, cast, final

import anyio

from asyncsched._version import __version__
from asyncsched.errors import (
    InvalidRunConfigException,
    SchedulerUnavailableError,
    SpecError,
    SubmitError,
)
from asyncsched.schedulers.kit import (
    DAYS_IN_2_WEEKS,
    DEFAULT_MAX_LINE_BYTES,
    AppEvent,
    AppSnapshot,
    Capabilities,
    LogQuery,
    ReplicaLimits,
    Scheduler,
    Stream,
    TaskHost,
    all_or_nothing,
    keyword_params,
)
from asyncsched.schedulers.shared.ratewindow import RateWindow
from asyncsched.schedulers.shared.state_dir import default_state_dir
from asyncsched.schedulers.slurm._checks import check_roles, check_run_options
from asyncsched.schedulers.slurm._commands import BACKEND, CommandFailed, SlurmCli
from asyncsched.schedulers.slurm._envdir import (
    create_env_dir,
    mark_cancelled,
    remove_env_dir,
)
from asyncsched.schedulers.slurm._events import (
    MIN_EVENT_INTERVAL,
    SlurmEvents,
    check_cursor,
)
from asyncsched.schedulers.slurm._logs import iter_file, log_path
from asyncsched.schedulers.slurm._opts import SlurmOpts, slurm_run_opts
from asyncsched.schedulers.slurm._partitions import (
    SINFO_FORMAT,
    Partition,
    check_fits,
    default_partition,
    parse_sinfo,
)
from asyncsched.schedulers.slurm._registry import JobRecord, Registry
from asyncsched.schedulers.slurm._render import (
    MIN_PARTITION_MEM_MB,
    SCRIPT_NAME,
    SlurmBatchRequest,
    render_request,
)
from asyncsched.schedulers.slurm._state import (
    SACCT_FIELDS,
    SQUEUE_FORMAT,
    AppView,
    group_components,
    parse_sacct,
    parse_squeue,
)
from asyncsched.schedulers.slurm._status import StatusBatcher, StatusTracker
from asyncsched.specs import (
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    is_terminal,
    runopts,
)

logger = logging.getLogger(__name__)

#: a job's recorded submit time may precede Slurm's by this much (clock skew)
#: seconds the undo of a failed sbatch (its script and env files) may take
_UNDO_TIMEOUT = 10.0
_SUBMIT_SLACK = 120.0
_PROBE_TTL = 10.0
#: seconds the cancel signal to a running job's script may take
_SIGNAL_TIMEOUT = 5.0


@final
class SlurmScheduler(Scheduler[SlurmOpts]):
    """Run each app as one heterogeneous Slurm job, one component per replica.

    Args:
        session_name: Recorded with each job in the registry.
        slurm_conf: ``SLURM_CONF`` for every command (default: inherited).
        state_dir: Where the registry of submitted jobs lives (default
            ``$ASYNCSCHED_STATE_DIR``, ``$XDG_STATE_HOME/asyncsched`` or
            ``~/.local/state/asyncsched``).
        command_timeout: Seconds any Slurm command may take.
        max_line_bytes: Cap of one ``log_iter`` line in bytes (default 1 MiB);
            longer lines come in pieces.
        min_interval: Shortest pause between two status ticks of ``wait``
            (right after a submit or a change).
        max_interval: Longest pause (backoff while nothing changes).
        max_status_commands_per_minute: Ceiling on ``squeue``/``sacct``
            commands for status, over every describe, wait and list of this
            scheduler together, in any 60 s window (default 60).
        cancel_grace: Seconds a cancelled job's replicas get between SIGTERM
            and the job's end when they do not stop by themselves (rounded up
            to whole seconds). It goes into the batch script of each job this
            scheduler submits: any process that cancels the job (``asyncsched
            cancel`` too) gives its replicas that grace.
        min_event_interval: Shortest pause (seconds) between two polls of an
            ``events()`` reader, whatever ``min_interval`` (default 2: each
            poll is an ``squeue``, and a ``sacct`` for the jobs that left the
            controller); a test cluster may take a shorter one.

    Attributes:
        cli: Runs the commands; ``cli.counts`` counts them by program.

    Example:
        >>> async def main() -> None:
        ...     # image: the directory the replicas start in
        ...     role = Role("hi", image="/tmp", entrypoint="echo", args=["hello"])
        ...     cfg: SlurmOpts = {"partition": "debug", "time": "5"}
        ...     async with SlurmScheduler("demo", cancel_grace=10) as sched:
        ...         app_id = await sched.submit(AppDef("hi", roles=[role]), cfg)
        ...         desc = await sched.wait(app_id, timeout=600)
        ...         print(desc.state if desc else "forgotten")  # SUCCEEDED
    """

    capabilities = Capabilities.observed(
        # one file per replica, stdout and stderr in the order written
        log_streams=frozenset({Stream.COMBINED}),
        log_since_until=False,  # srun writes no time on a line
        retries=True,
    )
    replica_limits = ReplicaLimits(128, 128, "one heterogeneous-job component per replica; Slurm allows 128")  # fmt: skip

    def __init__(
        self,
        session_name: str,
        *,
        slurm_conf: str | None = None,
        state_dir: str | None = None,
        command_timeout: float = 30.0,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        min_interval: float = 0.25,
        max_interval: float = 10.0,
        max_status_commands_per_minute: int = 60,
        cancel_grace: float = 30.0,
        min_event_interval: float = MIN_EVENT_INTERVAL,
    ) -> None:
        super().__init__(BACKEND, session_name, max_line_bytes)
        env = {"SLURM_CONF": slurm_conf} if slurm_conf else {}
        self.cli = SlurmCli(env, timeout=command_timeout)
        self.registry = Registry(state_dir or default_state_dir())
        self._tasks = TaskHost("SlurmScheduler")
        self.cancel_grace = cancel_grace
        self.status_window = RateWindow(max_status_commands_per_minute, 60.0)
        self._batcher = StatusBatcher(self._fetch)
        self._tracker = StatusTracker(
            self._batcher,
            self._tasks,
            self.change_source,
            min_interval=min_interval,
            max_interval=max_interval,
        )
        self._partitions: dict[str, Partition] | None = None
        self._probed_at = -_PROBE_TTL
        self._accounting: bool | None = None
        self._terminal: dict[str, AppView] = {}
        # the last settled view of each app not yet terminal: what describe
        # keeps answering while accounting shows its placeholder
        self._settled: dict[str, AppView] = {}
        self._native_events = SlurmEvents(
            self.event_source,
            cli=self.cli,
            window=self.status_window,
            registry=self.registry,
            list_apps=self._list,
            changes=self.change_source,
            min_interval=min_interval,
            max_interval=max_interval,
            min_event_interval=min_event_interval,
        )

    async def _aenter(self) -> None:
        await self._tasks.enter()

    async def _aclose(self) -> None:
        await self._tasks.aclose()

    # -- run options -----------------------------------------------------------

    def _run_opts(self) -> runopts:
        return slurm_run_opts()

    # -- submission ------------------------------------------------------------

    def _validate(self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]) -> None:
        """NULL_RESOURCE is accepted (as TorchX); mounts are not, nor run options
        or role fields the batch script cannot carry safely (see ``_checks``)."""
        for index, role in enumerate(app.roles):
            if role.mounts:
                raise SpecError(
                    f"roles[{index}].mounts",
                    "Slurm jobs run on the hosts' filesystems; mounts are not"
                    " supported (remove them)",
                )
        check_run_options(cfg)
        check_roles(app)

    async def _submit_dryrun(
        self, app: AppDef, cfg: SlurmOpts
    ) -> AppDryRunInfo[SlurmBatchRequest]:
        plain = cast(Mapping[str, CfgVal], cfg)
        job_dir = plain.get("job_dir")
        if job_dir is not None:
            # sbatch runs in job_dir: a relative --chdir would point below it
            absolute = await anyio.Path(str(job_dir)).absolute()
            plain = {**plain, "job_dir": str(absolute)}
        nomem = False
        partition = plain.get("partition")
        try:
            parts = await self._partition_table()
        except SchedulerUnavailableError:
            if partition is not None:
                raise  # a named partition is checked before anything else
            parts = {}  # a dry run needs no cluster: submit checks the fit
        if partition is not None and str(partition) not in parts:
            raise InvalidRunConfigException(
                f"partition={partition!r} does not exist; known partitions:"
                f" {sorted(parts)}",
                "partition",
                partition,
            )
        if partition is not None:
            nomem = parts[str(partition)].mem_mb <= MIN_PARTITION_MEM_MB
        target = str(partition) if partition is not None else default_partition(parts)
        if target is not None:
            check_fits(app, target, parts[target])
        gpus_per_node = False
        if any(r.resource.gpu > 0 for r in app.roles):
            gpus_per_node = await self._gpus_per_node()
        request = render_request(
            app,
            plain,
            version=__version__,
            nomem=nomem,
            gpus_per_node=gpus_per_node,
            cancel_grace=self.cancel_grace,
        )
        return AppDryRunInfo(request, str)

    async def _partition_table(self) -> dict[str, Partition]:
        """Partition -> its nodes, CPUs and memory; cached for a few seconds.

        Also the probe that Slurm is installed and its controller answers.
        """
        now = time.monotonic()
        if self._partitions is None or now - self._probed_at > _PROBE_TTL:
            out = await self.cli.run(["sinfo", "-h", "--noconvert", "-o", SINFO_FORMAT])
            self._partitions = parse_sinfo(out)
            self._probed_at = now
        return self._partitions

    async def _gpus_per_node(self) -> bool:
        try:
            out = await self.cli.run(["sinfo", "--version"])
            major, minor = (int(x) for x in out.split()[-1].split(".")[:2])
        except (CommandFailed, ValueError):
            return False
        return (major, minor) >= (24, 11)

    async def _schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        """Write the script and ``sbatch`` it; return the job id (the app id).

        Raises:
            SchedulerUnavailableError: Slurm is not installed or its controller
                does not answer (checked before submitting).
            InvalidRunConfigException: ``job_dir`` exists (nothing submitted).
            SubmitError: ``sbatch`` refused the job.
        """
        req: SlurmBatchRequest = dryrun_info.request
        parts = await self._partition_table()  # Slurm present, controller up
        app, cfg = dryrun_info.app, dryrun_info.cfg or {}
        named = cfg.get("partition")
        target = str(named) if named is not None else default_partition(parts)
        if app is not None and target is not None and target in parts:
            check_fits(app, target, parts[target])  # e.g. a dry run made offline
        if req.job_dir is not None:
            job_dir = str(await anyio.Path(req.job_dir).absolute())
            try:
                await anyio.Path(job_dir).mkdir(parents=True)
            except FileExistsError:
                raise InvalidRunConfigException(
                    f"job_dir {job_dir!r} already exists; use a new directory",
                    "job_dir",
                    job_dir,
                ) from None
            return await self._sbatch(req, job_dir, job_dir, created=True)
        with tempfile.TemporaryDirectory(prefix="asyncsched-slurm-") as tmp:
            return await self._sbatch(req, tmp, os.getcwd())

    async def _sbatch(
        self, req: SlurmBatchRequest, script_dir: str, cwd: str, created: bool = False
    ) -> str:
        """Submit; a ``job_dir`` we ``created`` is removed when nothing was
        submitted, and so is the environment directory."""
        script = os.path.join(script_dir, SCRIPT_NAME)
        submitted = time.time()
        try:
            async with all_or_nothing(script, undo_within=_UNDO_TIMEOUT) as steps:
                if created:
                    steps.add(
                        functools.partial(
                            anyio.to_thread.run_sync,
                            functools.partial(
                                shutil.rmtree, script_dir, ignore_errors=True
                            ),
                        ),
                        name=script_dir,
                    )
                await anyio.to_thread.run_sync(_write_script, script, req.materialize())
                # the values go into owner-only files in the job's working
                # directory, never on a command line nor into the script
                # (echoed by set -x)
                try:
                    env_dir = await anyio.to_thread.run_sync(
                        create_env_dir, cwd, req.env_files()
                    )
                except OSError as exc:
                    raise SubmitError(
                        f"cannot write the job's environment files in {cwd!r}: {exc}"
                    ) from exc
                if not created:
                    steps.add(
                        functools.partial(
                            anyio.to_thread.run_sync, remove_env_dir, env_dir
                        ),
                        name=env_dir,
                    )
                # the job's output files are created with the job's umask:
                # owner-only
                out = await self.cli.run(
                    [*req.cmd, script, env_dir],
                    cwd=cwd,
                    extra_env={"SLURM_UMASK": "0077"},
                )
        except CommandFailed as exc:
            raise SubmitError(f"sbatch refused the job: {exc.stderr.strip()}") from exc
        app_id = out.strip().split(";")[0]
        if not app_id.isdigit():
            raise SubmitError(f"sbatch printed no job id: {out!r}")
        await self.registry.add(
            JobRecord(
                app_id=app_id,
                submit=submitted,
                name=req.app_name,
                work_dir=cwd,
                roles=dict(req.roles),
                session=self.session_name,
                env_dir=env_dir,
            )
        )
        return app_id

    # -- status ----------------------------------------------------------------

    async def _fetch(self, ids: frozenset[str]) -> dict[str, AppView]:
        """One batched status query for ``ids`` (+ one sacct for the missing)."""
        # final, unless a replica's code may still reach the controller
        known = {
            i: v
            for i in ids
            if (v := self._terminal.get(i)) is not None
            and not (v.source == "squeue" and v.lost)
        }
        query = sorted((i for i in ids if i not in known and i.isdigit()), key=int)
        if not query:
            return known
        records = await self.registry.all()
        floors = {i: records[i].submit - _SUBMIT_SLACK for i in query if i in records}
        try:
            await self.status_window.acquire()
            out = await self.cli.run(
                [
                    "squeue",
                    "-h",
                    "-t",
                    "all",
                    "-j",
                    ",".join(query),
                    "-O",
                    SQUEUE_FORMAT,
                ]
            )
        except CommandFailed as exc:
            if "invalid job id" not in exc.stderr.lower():
                raise
            out = ""  # the only id asked for has left the controller
        views = group_components(parse_squeue(out), source="squeue", not_before=floors)
        missing = [i for i in query if i not in views]
        if missing:
            views.update(await self._sacct(missing, records, floors))
        ended: builtins.list[str] = []
        for app_id, view in list(views.items()):
            if not view.settled:
                views[app_id] = self._settled.get(app_id, view)
            elif is_terminal(view.state):
                record = records.get(app_id)
                if (
                    view.state == AppState.CANCELLED
                    and app_id not in self._terminal
                    and record
                    and record.env_dir
                ):
                    ended.append(record.env_dir)
                self._terminal[app_id] = view
                self._settled.pop(app_id, None)
            else:
                self._settled[app_id] = view
        if ended:
            # a cancelled job never runs again: nothing will read its environment
            # files (cancelled from outside asyncsched; a successful job removes
            # them itself; a failed one keeps them, as Slurm may run it again)
            await anyio.to_thread.run_sync(_remove_env_dirs, ended)
        return {**known, **{i: v for i, v in views.items() if i in ids}}

    async def _sacct(
        self,
        ids: builtins.list[str],
        records: dict[str, JobRecord],
        floors: dict[str, float],
    ) -> dict[str, AppView]:
        """Finished jobs: accounting if enabled, else the job completion log."""
        fields = ["-n", "-P", "-o", SACCT_FIELDS]
        if self._accounting is not False:
            try:
                await self.status_window.acquire()
                out = await self.cli.run(["sacct", *fields, "-j", ",".join(ids)])
            except CommandFailed as exc:
                if "accounting storage is disabled" not in exc.stderr.lower():
                    raise
                self._accounting = False
            else:
                self._accounting = True
                views = group_components(
                    parse_sacct(out), source="sacct", not_before=floors
                )
                for app_id, view in views.items():
                    if app_id in records:
                        view.expected = records[app_id].num_components
                return views
        # the completion log lists each heterogeneous component by its own id,
        # allocated consecutively from the leader's
        leaders: dict[str, str] = {}
        for app_id in ids:
            count = records[app_id].num_components if app_id in records else 1
            for k in range(count):
                leaders[str(int(app_id) + k)] = app_id
        await self.status_window.acquire()
        out = await self.cli.run(
            ["sacct", "-c", *fields, "-j", ",".join(sorted(leaders, key=int))]
        )
        views = group_components(
            parse_sacct(out, leaders), source="sacct -c", not_before=floors
        )
        return {i: v for i, v in views.items() if i in ids}

    async def _view(self, app_id: str) -> AppView | None:
        if not app_id.isdigit():
            return None
        if self._tracker.watches(app_id):  # a wait polls it: its latest view
            return await self._tracker.view(app_id)
        return (await self._batcher.get([app_id]))[app_id]

    async def _describe(self, app_id: str) -> AppSnapshot | None:
        """The app's state, per replica (one component per replica)."""
        view = await self._view(app_id)
        return None if view is None else view.snapshot()

    def _watching(self, app_id: str) -> AbstractAsyncContextManager[object]:
        return self._tracker.watching(app_id)

    @property
    def status_queries(self) -> int:
        """Batched status queries run so far (each one squeue, maybe one sacct)."""
        return self._batcher.queries

    async def _list(self) -> builtins.list[AppSnapshot]:
        """The jobs this session submitted (from the registry) in the last two
        weeks, with their states from one batched query."""
        horizon = time.time() - DAYS_IN_2_WEEKS * 86400
        records = {
            i: r
            for i, r in (await self.registry.all()).items()
            if r.submit >= horizon and r.session == self.session_name
        }
        if not records:
            return []
        views = await self._batcher.get(records)
        snapshots = []
        for app_id, view in sorted(views.items(), key=lambda kv: int(kv[0])):
            if view is not None:
                snapshot = view.snapshot()
                snapshot.name = records[app_id].name
                snapshots.append(snapshot)
        return snapshots

    # -- events ----------------------------------------------------------------

    def _check_cursor(self, cursor: str) -> None:
        check_cursor(cursor, self.event_source)

    def _events(self, since: str | None) -> AsyncIterator[AppEvent]:
        """Polls shared with the status poller's query, diffed; cursors
        resume in any process (see ``_events``)."""
        return self._native_events.follow(since, lambda: not self._closed)

    # -- control ---------------------------------------------------------------

    async def _cancel(self, app: AppSnapshot) -> None:
        """Ask a running job's script to stop its replicas with their grace.

        The script carries the whole cancel (see ``_render``), so the
        cancelling process may exit at once: ``cancel`` creates the mark file
        in the job's environment directory (a script not past its trap yet
        reads it when it gets there), then sends SIGURG to the batch script,
        whose trap pauses ``srun``, sends SIGTERM to the replicas' steps, and
        cancels the job once they ended or the submitting scheduler's
        ``cancel_grace`` is over. A job not running yet, or one without its
        environment directory (not submitted from this state dir), is
        cancelled at once (``scancel``).
        """
        if app.app_id in self._terminal:
            return  # finished: nothing to cancel
        record = await self.registry.get(app.app_id)
        env_dir = record.env_dir if record is not None else ""
        if app.state == AppState.RUNNING and env_dir:
            try:
                await anyio.to_thread.run_sync(mark_cancelled, env_dir)
                # scancel keeps retrying a job in transition (being requeued):
                # such a job is cancelled outright
                await self.cli.run(
                    ["scancel", "--batch", "--signal=URG", app.app_id],
                    timeout=min(self.cli.timeout, _SIGNAL_TIMEOUT),
                )
            except (OSError, CommandFailed, SchedulerUnavailableError):
                pass
            else:
                return  # the script removes the environment directory
        await self.cli.run(["scancel", app.app_id])
        # a cancelled job never runs again: its environment files can go now,
        # before its end is seen
        if env_dir:
            await anyio.to_thread.run_sync(remove_env_dir, env_dir)

    # -- logs ------------------------------------------------------------------

    async def _log_iter(self, app: AppSnapshot, query: LogQuery) -> AsyncIterator[str]:
        role_name, k = query.role_name, query.k
        app_id = app.app_id
        view: AppView = app.native
        record = await self.registry.get(app_id)
        work_dir = (record.work_dir if record else "") or view.work_dir or os.getcwd()
        path = log_path(work_dir, app_id, role_name, k, "out")

        checked = [0.0, True]  # last status check, and its answer

        async def running() -> bool:
            # called every 0.1 s while the file is idle; ask Slurm at most every 0.5 s
            if time.monotonic() - checked[0] >= 0.5:
                current = await self._view(app_id)
                checked[:] = [
                    time.monotonic(),
                    current is not None and not is_terminal(current.state),
                ]
            return bool(checked[1])

        follow = running if query.should_tail else None
        # closed with this generator (a tail left early), never left to the GC
        async with contextlib.aclosing(
            iter_file(path, follow, self.max_line_bytes)
        ) as lines:
            async for line in lines:
                yield line


def _remove_env_dirs(paths: builtins.list[str]) -> None:
    for path in paths:
        remove_env_dir(path)


def _write_script(path: str, text: str) -> None:
    """Write the batch script readable by its owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(text.encode("utf-8", "surrogateescape"))


def create_scheduler(session_name: str, **kwargs: Any) -> SlurmScheduler:
    """Registry factory; unknown keyword arguments are ignored.

    Known ones: ``slurm_conf``, ``state_dir``, ``command_timeout``,
    ``max_line_bytes``, ``min_interval``, ``max_interval``,
    ``max_status_commands_per_minute``, ``cancel_grace``,
    ``min_event_interval``.
    """
    return SlurmScheduler(session_name, **keyword_params(SlurmScheduler, kwargs))
