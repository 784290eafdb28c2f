"""Run apps as Docker containers on one Docker Engine (``local_docker``).

Talks to the Docker Engine API through one long-lived aiodocker client per
scheduler (``pip install 'asyncsched[docker]'``); asyncio only. The daemon is
``docker_host=`` if given, else ``$DOCKER_HOST``, else
``unix:///var/run/docker.sock``.

Nothing is stored locally: every container carries ``asyncsched.io/*``
labels, so any process can describe, list, read the logs of, cancel and
delete any app. Status comes from one Docker events stream per scheduler
(resynced by a listing whenever it reconnects), so ``wait`` does not poll and
``describe`` costs no API call once the stream runs.
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import functools
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypedDict, TypeVar, cast, final

import aiodocker
import anyio
import sniffio
from aiodocker.exceptions import DockerError

from asyncsched._version import __version__
from asyncsched.errors import (
    AsyncschedError,
    InvalidArgumentError,
    InvalidRunConfigException,
    SchedulerError,
    SchedulerUnavailableError,
    SpecError,
    SubmitError,
)
from asyncsched.schedulers.docker._client import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_READ_TIMEOUT,
    client_timeout,
    ensure_image,
    ensure_network,
    update_restart_policy,
)
from asyncsched.schedulers.docker._event_source import DockerEventSource
from asyncsched.schedulers.docker._events import EventWatcher, list_records, settle
from asyncsched.schedulers.docker._logs import iter_container_log
from asyncsched.schedulers.docker._render import (
    DEFAULT_NETWORK,
    PULL_POLICIES,
    DockerContainer,
    DockerJob,
    format_job,
    render_job,
)
from asyncsched.schedulers.docker._state import (
    CANCEL_MARK_POLICY,
    AppView,
    ContainerIndex,
    ContainerRecord,
)
from asyncsched.schedulers.docker._stop import Stopper
from asyncsched.schedulers.kit import (
    DEFAULT_MAX_LINE_BYTES,
    AppEvent,
    AppSnapshot,
    Capabilities,
    LogQuery,
    ReplicaLimits,
    Scheduler,
    TaskHost,
    all_or_nothing,
    keyword_params,
    make_unique,
    render_off_loop,
)
from asyncsched.schedulers.shared.docker_daemon import (
    image_workspace_opts,
    registry_auth,
    resolve_host,
)
from asyncsched.schedulers.shared.docker_errors import (
    BACKEND,
    docker_errors,
    is_conflict,
    is_not_found,
)
from asyncsched.schedulers.shared.ids import unique_app_id
from asyncsched.schedulers.shared.images import (
    build_image,
    open_context,
    push_image,
)
from asyncsched.schedulers.shared.labels import LABEL_SESSION, LABEL_VERSION
from asyncsched.specs import (
    AppDef,
    AppDryRunInfo,
    CfgVal,
    Role,
    Workspace,
    runopts,
)
from asyncsched.workspace.api import WorkspaceMixin

T = TypeVar("T")

logger = logging.getLogger(__name__)

#: TorchX's path of this backend: its ``make_unique``, when patched, makes the ids
_TORCHX_MODULE = "asyncsched.schedulers.docker_scheduler"

#: seconds a failed submit may spend removing what it created (shielded)
UNDO_TIMEOUT = 60.0


class DockerOpts(TypedDict, total=False):
    """Run options of :class:`DockerScheduler` (after resolution)."""

    copy_env: list[str] | None
    env: dict[str, str] | None
    privileged: bool
    fail_fast: bool
    image_pull_policy: str
    image_repo: str | None
    quiet: bool


@final
class DockerScheduler(
    WorkspaceMixin[dict[str, tuple[str, str]]], Scheduler[DockerOpts]
):
    """Run each replica of an app as a Docker container.

    Containers are named ``{app_id[-30:]}-{role[:30]}-{replica}`` (also their
    hostname), join one bridge network per installation so that replicas
    reach each other by name (``TORCHX_RANK0_HOST``), and are labelled with
    ``asyncsched.io/{app-id,app-name,role-name,role-index,replica-id,session,
    version}``.

    Args:
        session_name: Recorded in the ``asyncsched.io/session`` label.
        docker_host: Daemon URL; defaults to ``$DOCKER_HOST``, then the
            standard socket.
        client: An aiodocker client to use instead of creating one (it is
            then not closed by :meth:`aclose`).
        network: Name of the bridge network containers join.
        max_concurrency: Engine API calls this scheduler has in flight at once
            (image checks and pulls, creates, starts, inspects, listings,
            stops, removals), shared by every concurrent submit, status query,
            cancel and delete, so 10,000 apps submitted together queue here
            instead of opening 10,000 connections (the daemon serialises most
            of them anyway). Streams are not counted: the one events stream
            and each ``log_iter``.
        stop_timeout: Seconds the daemon lets a container handle SIGTERM
            (after a ``cancel`` or a fail-fast stop) before it kills it;
            ``cancel`` does not wait for them, ``wait`` does.
        max_line_bytes: Cap of one ``log_iter`` line in bytes (default 1 MiB);
            a longer line comes in pieces of at most this size.
        connect_timeout: Seconds to connect to the daemon.
        read_timeout: Seconds the daemon may stay silent in a reply (and
            before the headers of a stream). Past either bound a call raises
            :class:`~asyncsched.errors.SchedulerUnavailableError`, so a hung
            daemon never hangs the caller. Not applied to a ``client`` passed
            in.

    Example:
        >>> async def main() -> None:
        ...     role = Role("hi", image="busybox", entrypoint="echo", args=["hello"])
        ...     async with DockerScheduler("demo") as sched:
        ...         app_id = await sched.submit(AppDef("hi", roles=[role]))
        ...         status = await sched.wait(app_id, timeout=60)
        ...         async for line in sched.log_iter(app_id, "hi"):
        ...             print(line, end="")
        ...         await sched.delete(app_id)
    """

    capabilities = Capabilities.observed(
        workspaces=True, mounts=True, retries=True, event_loops=("asyncio",)
    )
    #: one container per replica, all on one bridge network (``network``)
    replica_limits = ReplicaLimits(
        per_role=1023,
        per_app=1023,
        why="a Linux bridge network, which every container of the app joins,"
        " holds at most 1023 containers",
    )

    def __init__(
        self,
        session_name: str,
        *,
        docker_host: str | None = None,
        client: aiodocker.Docker | None = None,
        network: str = DEFAULT_NETWORK,
        max_concurrency: int = 8,
        stop_timeout: int = 10,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
    ) -> None:
        super().__init__("docker", session_name, max_line_bytes)
        self.handle_name = BACKEND  # local_docker, its registry name
        if max_concurrency < 1:
            raise InvalidArgumentError(
                f"max_concurrency must be >= 1, got {max_concurrency}"
            )
        if not connect_timeout > 0 or not read_timeout > 0:
            raise InvalidArgumentError(
                "connect_timeout and read_timeout must be > 0, got"
                f" {connect_timeout} and {read_timeout}"
            )
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._host = resolve_host(docker_host)
        self._client = client
        self._owns_client = client is None
        self._network = network
        self._network_id: str | None = None
        self._max_concurrency = max_concurrency
        self._stop_timeout = stop_timeout
        self._tasks = TaskHost("DockerScheduler")
        self._index = ContainerIndex(changes=self.change_source)
        self._watcher: EventWatcher | None = None
        self._locks: dict[str, anyio.Lock] = {}
        self._limiter: anyio.CapacityLimiter | None = None
        self._event_source: DockerEventSource | None = None
        self._stopper = Stopper(
            self._docker,
            self._host,
            self._index,
            self._tasks,
            stop_timeout=stop_timeout,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
        )
        #: ids of the containers a fail-fast stop is under way for
        self._failing_fast: set[str] = set()

    # -- lifecycle -------------------------------------------------------------

    async def _aenter(self) -> None:
        self._check_loop()
        await self._tasks.enter()

    async def _aclose(self) -> None:
        if self._event_source is not None:
            self._event_source.close()  # readers end
        await self._tasks.aclose()
        if self._client is not None and self._owns_client:
            await self._client.close()
        self._client = None

    def _check_loop(self) -> None:
        library = sniffio.current_async_library()
        if library != "asyncio":
            raise SchedulerUnavailableError(
                BACKEND,
                f"aiodocker runs on asyncio only, not {library}",
                "use asyncio, or the local scheduler",
            )

    def _docker(self) -> aiodocker.Docker:
        self._check_open()
        if self._client is None:
            self._check_loop()
            self._client = aiodocker.Docker(
                url=self._host,
                timeout=client_timeout(self._connect_timeout, self._read_timeout),
            )
        return self._client

    def _lock(self, name: str) -> anyio.Lock:
        lock = self._locks.get(name)
        if lock is None:
            lock = self._locks[name] = anyio.Lock()
        return lock

    @property
    def docker_host(self) -> str:
        """The daemon URL this scheduler talks to."""
        return self._host

    # -- run options -----------------------------------------------------------

    def _run_opts(self) -> runopts:
        opts = runopts()
        opts.add(
            "copy_env",
            type_=list[str],
            help="glob patterns of host environment variables to copy into every"
            " container, e.g. FOO_*",
        )
        opts.add(
            "env",
            type_=dict[str, str],
            help="environment variables for every container (K1:v1,K2:v2);"
            " applied over copy_env",
        )
        opts.add(
            "privileged",
            type_=bool,
            default=False,
            help="run the containers privileged (docker run --privileged)",
        )
        opts.add(
            "fail_fast",
            type_=bool,
            default=True,
            help="stop the other replicas when one fails for good",
        )
        opts.add(
            "image_pull_policy",
            type_=str,
            default="if_not_present",
            help="when to pull images: if_not_present (no registry round-trip for a"
            " local image), always, never",
        )
        return opts

    def workspace_opts(self) -> runopts:
        """``image_repo`` (push built images there) and ``quiet`` (no build output)."""
        return image_workspace_opts(
            "repository to push workspace images to, e.g."
            " registry.example.com/team/app (push access required)"
        )

    # -- submission ------------------------------------------------------------

    async def _submit_dryrun(
        self, app: AppDef, cfg: DockerOpts
    ) -> AppDryRunInfo[DockerJob]:
        app_id = unique_app_id(app.name, _TORCHX_MODULE, make_unique)
        job = await render_off_loop(
            app,
            render_job,
            app,
            app_id,
            cast(Mapping[str, CfgVal], cfg),
            session=self.session_name,
            version=__version__,
            network=self._network,
        )
        return AppDryRunInfo(job, format_job)

    async def _schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        """Create then start every container of the job; all or nothing.

        Images are checked (and pulled, per ``image_pull_policy``) and the
        network ensured first. Containers are created, then started, with at
        most ``max_concurrency`` calls in flight (shared by concurrent
        submissions, so they queue). If anything fails, every container of the
        app is removed before the error is raised.

        Raises:
            SubmitError: an image, mount, name or daemon problem (named).
            SchedulerUnavailableError: the daemon cannot be reached.
        """
        job: DockerJob = dryrun_info.request
        if job.image_pull_policy not in PULL_POLICIES:
            raise SubmitError(f"unknown image_pull_policy {job.image_pull_policy!r}")
        docker = self._docker()
        await self._ensure_watching()
        await self._run_all(
            [
                _bind(ensure_image, docker, image, job.image_pull_policy, self._host)
                for image in job.images
            ]
        )
        existing = self._index.app(job.app_id)
        if existing is not None:
            raise SubmitError(
                f"app id {job.app_id!r} is already scheduled (containers "
                f"{[r.name for r in existing.records]} already in use); dry-run again "
                "for a new app id"
            )
        network_id = await self._ensure_network(job.network)
        created: list[str] = []
        # by label too: a create cancelled in flight may still have happened
        # (an app id is fresh, so the label is ours alone); if the undo takes
        # too long, delete(app_id) removes what is left
        async with all_or_nothing(job.app_id, undo_within=UNDO_TIMEOUT) as steps:
            steps.add(
                functools.partial(self._remove, job.app_id, created),
                name=f"the containers (delete({job.app_id!r}) removes them)",
            )
            await self._run_all(
                [
                    _bind(self._create, docker, job, c, network_id, created)
                    for c in job.containers
                ]
            )
            app = dryrun_info.app
            roles = [role.name for role in app.roles] if app is not None else []
            await self._run_all(
                [_bind(self._start, docker, cid, roles) for cid in created]
            )
        return job.app_id

    async def _ensure_network(self, name: str) -> str:
        async with self._lock(f"network:{name}"):
            if self._network_id is None or name != self._network:
                async with self._api_slot():
                    network_id = await ensure_network(self._docker(), name, self._host)
                if name != self._network:
                    return network_id
                self._network_id = network_id
            return self._network_id

    async def _create(
        self,
        docker: aiodocker.Docker,
        job: DockerJob,
        container: DockerContainer,
        network_id: str,
        created: list[str],
    ) -> None:
        body = copy.deepcopy(container.body)
        host_config = body.setdefault("HostConfig", {})
        if host_config.get("NetworkMode") == job.network:
            host_config["NetworkMode"] = network_id
        try:
            with docker_errors(
                f"create container {container.name!r}", self._host, submit=True
            ):
                result = await docker.containers.create(body, name=container.name)
        except SubmitError as exc:
            cause = exc.__cause__
            if is_not_found(cause) and "network" in str(cause).lower():
                self._network_id = None  # removed behind our back: recreate next time
            raise _explain_create_error(exc, container, job) from cause
        created.append(result.id)
        record = ContainerRecord.from_labels(
            result.id,
            container.name,
            container.image,
            body.get("Labels") or {},
            "created",
        )
        if record is not None and result.id not in self._index.records:
            self._index.upsert(record)

    async def _start(
        self, docker: aiodocker.Docker, container_id: str, roles: builtins.list[str]
    ) -> None:
        """Start one container; an entrypoint the engine cannot find in the
        image is a SpecError on the role's entrypoint (as on local)."""
        try:
            with docker_errors("start a container", self._host, submit=True):
                await docker.containers.container(container_id).start()
        except SubmitError as exc:
            record = self._index.records.get(container_id)
            cause = exc.__cause__
            if (
                record is None
                or record.role not in roles
                or not isinstance(cause, DockerError)
                or not _MISSING_EXECUTABLE.search(cause.message)
            ):
                raise
            raise SpecError(
                f"roles[{roles.index(record.role)}].entrypoint",
                f"the command was not found in image {record.image!r}: {cause.message}",
            ) from cause

    async def _remove(self, app_id: str, known: builtins.list[str]) -> None:
        """Force-remove the app's containers: the known ids plus any found by label."""
        docker = self._docker()
        ids = dict.fromkeys(known)
        try:
            async with self._api_slot():
                found = await list_records(docker, self._host, app_id)
        except AsyncschedError as exc:  # the daemon is gone: nothing more to find
            logger.warning("cannot list the containers of %s: %s", app_id, exc)
        else:
            ids.update(dict.fromkeys(r.id for r in found))
        await self._run_all(
            [_bind(self._remove_one, docker, cid) for cid in ids], fail_fast=False
        )

    async def _remove_one(self, docker: aiodocker.Docker, container_id: str) -> None:
        try:
            with docker_errors("remove a container", self._host):
                await docker.containers.container(container_id).delete(
                    force=True, v=True
                )
        except SchedulerError as exc:
            if not is_not_found(exc.__cause__) and not is_conflict(exc.__cause__):
                raise
        self._index.remove(container_id)

    def _api_slot(self) -> anyio.CapacityLimiter:
        """The limiter of this scheduler's Engine API calls (``max_concurrency``)."""
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self._max_concurrency)
        return self._limiter

    async def _run_all(
        self,
        funcs: builtins.list[Callable[[], Awaitable[object]]],
        *,
        fail_fast: bool = True,
    ) -> None:
        """Run ``funcs`` concurrently (bounded); raise the first error, plainly.

        After a failure no new call starts (in-flight ones finish) when
        ``fail_fast``; the error is raised once all have settled.
        """
        limiter = self._api_slot()
        errors: builtins.list[Exception] = []

        async def one(func: Callable[[], Awaitable[object]]) -> None:
            async with limiter:
                if errors and fail_fast:
                    return
                await guarded(func)

        async def guarded(func: Callable[[], Awaitable[object]]) -> None:
            try:
                await func()
            except Exception as exc:  # noqa: BLE001 - collected, re-raised below
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            for func in funcs:
                tg.start_soon(one, func)
        if errors:
            raise errors[0]

    # -- workspaces ------------------------------------------------------------

    async def build_workspace_and_update_role(
        self, role: Role, workspace: str | Workspace, cfg: DockerOpts
    ) -> None:
        """Build ``workspace`` over ``role.image`` and point the role at the result.

        The build context (honouring ``.dockerignore``, and the workspace's own
        ``Dockerfile.asyncsched`` when present) is tarred in a worker thread
        into a temporary file, which is streamed to the daemon.
        With ``image_repo`` the image is pushed as ``<image_repo>:<hash>``.

        Raises:
            SpecError: a project target is absolute or contains ``..``.
            SchedulerError: the workspace is missing or unreadable, or the
                build/push failed.
        """
        docker = self._docker()
        label = (
            workspace if isinstance(workspace, str) else ",".join(workspace.projects)
        )
        async with open_context(workspace) as context:
            image_id = await build_image(
                docker,
                self._host,
                context,
                base_image=role.image,
                workspace=label,
                labels={LABEL_VERSION: __version__, LABEL_SESSION: self.session_name},
                quiet=bool(cfg.get("quiet")),
            )
        repo = cfg.get("image_repo")
        if repo:
            auth = await registry_auth(repo)
            role.image = await push_image(docker, self._host, image_id, repo, auth)
        else:
            role.image = image_id

    def dryrun_push_images(
        self, app: AppDef, cfg: Mapping[str, CfgVal]
    ) -> dict[str, tuple[str, str]]:
        """Point roles that run a local image id at ``<image_repo>:<hash>``.

        TorchX's separate push step. Every role whose image is ``sha256:<hash>``
        is rewritten in place; the returned ``{image id: (image_repo, hash)}`` is
        what :meth:`push_images` pushes. (Workspace builds here push by
        themselves when ``image_repo`` is set, leaving nothing to push.)

        Raises:
            InvalidRunConfigException: a role runs a local image id and
                ``image_repo`` is not set.
        """
        repo = cfg.get("image_repo")
        to_push: dict[str, tuple[str, str]] = {}
        for i, role in enumerate(app.roles):
            if not role.image.startswith("sha256:"):
                continue
            if not repo:
                raise InvalidRunConfigException(
                    f"roles[{i}] runs the local image {role.image}; set image_repo"
                    " to push it somewhere other hosts can pull from",
                    "image_repo",
                    cfg,
                )
            tag = role.image.removeprefix("sha256:")
            to_push[role.image] = (str(repo), tag)
            role.image = f"{repo}:{tag}"
        return to_push

    async def push_images(self, images_to_push: dict[str, tuple[str, str]]) -> None:
        """Tag and push what :meth:`dryrun_push_images` returned (nothing: no I/O).

        Raises:
            SchedulerError: tagging or pushing failed.
        """
        if not images_to_push:
            return
        docker = self._docker()
        for image_id, (repo, _tag) in images_to_push.items():
            auth = await registry_auth(repo)
            await push_image(docker, self._host, image_id, repo, auth)

    def _validate(self, app: AppDef, scheduler: str, cfg: Any) -> None:
        """Docker accepts roles without resources (no limits), as TorchX does."""

    def _pre_build_validate(
        self, app: AppDef, scheduler: str, cfg: Mapping[str, CfgVal]
    ) -> None:
        """Render once before a workspace build: a bad name or mount fails first."""
        render_job(
            app,
            unique_app_id(app.name, _TORCHX_MODULE, make_unique),
            cfg,
            session=self.session_name,
            version=__version__,
            network=self._network,
            environ={},
        )

    # -- observation -----------------------------------------------------------

    async def _ensure_watching(self) -> EventWatcher:
        watcher = self._watcher
        if watcher is not None:
            return watcher
        async with self._lock("watcher"):
            if self._watcher is None:
                candidate = EventWatcher(
                    self._docker(), self._host, self._index, on_exit=self._on_exit
                )
                await self._tasks.start(
                    candidate.run,
                    name="docker-events",
                    on_error=lambda exc: self._watcher_died(candidate),
                )
                self._watcher = candidate
            return self._watcher

    def _watcher_died(self, watcher: EventWatcher) -> None:
        """The events task crashed: the next call starts (and resyncs) a new one."""
        if self._watcher is watcher:
            self._watcher = None
        watcher.mark_unsynced()  # waiters wake and fall back to queries

    async def _view(self, app_id: str) -> AppView | None:
        docker = self._docker()
        watcher = await self._ensure_watching()
        view = self._index.app(app_id) if watcher.synced else None
        if view is None:
            # not seen (yet): another process may have just created it, or the
            # stream is reconnecting -- ask the daemon directly
            async with self._api_slot():
                records = await list_records(docker, self._host, app_id)
            if not records:
                return None
            if watcher.synced:
                for record in records:
                    if record.id not in self._index.records:
                        self._index.upsert(record)
                view = self._index.app(app_id)
            else:
                view = AppView(app_id, records)
                view.records.sort(key=lambda r: (r.role_index, r.role, r.replica_id))
        if view is not None:
            await self._settle(view.records)
            self._fail_fast(view)
        return view

    async def _settle(self, records: builtins.list[ContainerRecord]) -> None:
        docker = self._docker()
        pending = [r for r in records if not r.settled]
        if pending:
            await self._run_all([_bind(settle, docker, self._host, r) for r in pending])

    async def _describe(self, app_id: str) -> AppSnapshot | None:
        """Per-role/replica states with exit codes; None for an unknown app.

        A cancelled app is CANCELLED (TorchX says FAILED).
        """
        view = await self._view(app_id)
        return None if view is None else view.snapshot()

    async def _list(self) -> builtins.list[AppSnapshot]:
        """The apps of this scheduler's session on this daemon (session label)."""
        docker = self._docker()
        watcher = await self._ensure_watching()
        if watcher.synced:
            views = self._index.apps()
        else:
            grouped: dict[str, builtins.list[ContainerRecord]] = {}
            async with self._api_slot():
                records = await list_records(docker, self._host)
            for r in records:
                grouped.setdefault(r.app_id, []).append(r)
            views = [AppView(a, rs) for a, rs in grouped.items()]
        views = [v for v in views if v.session == self.session_name]
        await self._settle([r for v in views for r in v.records])
        for view in views:
            self._fail_fast(view)
        return [v.snapshot() for v in views]

    def _poll_interval(self, snapshot: AppSnapshot) -> float | None:
        # while the events stream reconnects, nothing signals: poll
        watcher = self._watcher
        return None if watcher is not None and watcher.synced else 2.0

    # -- events (the daemon's own stream, see _event_source) --------------------

    def _events(self, since: str | None) -> AsyncIterator[AppEvent]:
        if self._event_source is None:
            self._event_source = DockerEventSource(
                self._docker,
                self._host,
                self.session_name,
                self._api_slot,
                lambda: not self._closed,
            )
        return self._event_source.follow(since)

    def _check_cursor(self, cursor: str) -> None:
        DockerEventSource.check_cursor(cursor)

    # -- control ---------------------------------------------------------------

    async def _cancel(self, app: AppSnapshot) -> None:
        """Mark and signal every live container; the grace runs in the daemon.

        Returns once each container got its stop signal (``wait`` waits for
        the containers to stop: SIGKILL comes ``stop_timeout`` s later).
        """
        view: AppView = app.native
        live = [
            r
            for r in view.records
            if r.live and not r.cancelled and r.id not in self._failing_fast
        ]
        await self._run_all([_bind(self._cancel_one, r) for r in live])

    async def _cancel_one(self, record: ContainerRecord) -> None:
        # once marked, the container must get its stop: a cancel cut in
        # between would leave it marked (skipped by later cancels) and running
        # (each step is bounded by the client's timeouts; the whole by this)
        with anyio.move_on_after(UNDO_TIMEOUT, shield=True):
            await self._mark_and_stop(record)

    async def _mark_and_stop(self, record: ContainerRecord) -> None:
        docker = self._docker()
        try:
            with docker_errors(f"cancel container {record.name!r}", self._host):
                # mark first: a restart policy must not revive it, and every
                # process must be able to tell "cancelled" from "failed"
                await update_restart_policy(
                    docker,
                    record.id,
                    {"Name": CANCEL_MARK_POLICY, "MaximumRetryCount": 0},
                )
        except SchedulerError as exc:
            if is_not_found(exc.__cause__):
                return
            raise
        record.cancelled = True
        self.notify_changed(record.app_id)
        await self._stopper.stop(record)

    def _fail_fast(self, view: AppView) -> None:
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

    def _on_exit(self, app_id: str) -> None:
        """The events watcher saw a container of ``app_id`` exit."""
        view = self._index.app(app_id)
        if view is not None:
            self._fail_fast(view)

    async def _stop_sibling(self, record: ContainerRecord) -> None:
        try:
            async with self._api_slot():
                # another process may be stopping it already: one stop signal
                if not await settle(self._docker(), self._host, record):
                    return
                if record.live and not record.cancelled:
                    await self._cancel_one(record)
        finally:
            self._failing_fast.discard(record.id)

    async def delete(self, app_id: str) -> None:
        """Remove every container of the app (running ones are killed).

        Unlike :meth:`cancel`, the logs and status are gone afterwards. Unknown
        apps are ignored.
        """
        self._check_open()
        await self._remove(app_id, [])

    # -- logs ------------------------------------------------------------------

    async def _log_iter(self, app: AppSnapshot, query: LogQuery) -> AsyncIterator[str]:
        role_name, k = query.role_name, query.k
        view: AppView = app.native
        [record] = [
            r for r in view.records if r.role == role_name and r.replica_id == k
        ]
        batches = iter_container_log(
            self._docker(),
            self._host,
            record.id,
            since=query.since,
            until=query.until,
            should_tail=query.should_tail,
            streams=query.streams,
            max_line_bytes=self.max_line_bytes,
        )
        # closing this generator closes the HTTP response at once
        async with contextlib.aclosing(batches):
            async for batch in batches:
                for line in batch:
                    yield line


def _bind(func: Callable[..., Awaitable[T]], *args: Any) -> Callable[[], Awaitable[T]]:
    async def call() -> T:
        return await func(*args)

    return call


#: what runc (through Docker) says when a container's command does not exist
_MISSING_EXECUTABLE = re.compile(
    r"executable file not found|exec: .*no such file or directory", re.IGNORECASE
)


def _explain_create_error(
    exc: SubmitError, container: DockerContainer, job: DockerJob
) -> SubmitError:
    cause = exc.__cause__
    if not isinstance(cause, DockerError):
        return exc
    message = cause.message
    if cause.status == 409:
        return SubmitError(
            f"container name {container.name!r} is already in use (app id "
            f"{job.app_id!r} was already scheduled?): {message}"
        )
    if cause.status == 404 and "image" in message.lower():
        return SubmitError(
            f"image {container.image!r} of {container.name!r}: {message}"
        )
    if cause.status == 404 and "network" in message.lower():
        return SubmitError(f"network {job.network!r} of {container.name!r}: {message}")
    if "mount" in message.lower() or "volume" in message.lower():
        return SubmitError(f"invalid mount for {container.name!r}: {message}")
    return exc


def create_scheduler(session_name: str, **kwargs: Any) -> DockerScheduler:
    """Registry factory; unknown keyword arguments are ignored.

    Known ones: ``docker_host``, ``client``, ``network``, ``max_concurrency``,
    ``stop_timeout``, ``max_line_bytes``, ``connect_timeout``, ``read_timeout``.
    """
    return DockerScheduler(session_name, **keyword_params(DockerScheduler, kwargs))
