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
from collections.abc import AsyncIterator, Mapping
from typing import Any, cast, final

import aiodocker

from asyncsched._version import __version__
from asyncsched.errors import InvalidArgumentError
from asyncsched.schedulers.docker._client import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_READ_TIMEOUT,
)
from asyncsched.schedulers.docker._connection import DockerConnection, check_asyncio
from asyncsched.schedulers.docker._control import Control
from asyncsched.schedulers.docker._event_source import DockerEventSource
from asyncsched.schedulers.docker._events import EventWatcher
from asyncsched.schedulers.docker._images import (
    build_workspace,
    plan_pushes,
    push_planned,
)
from asyncsched.schedulers.docker._logs import iter_container_log
from asyncsched.schedulers.docker._lookup import Lookup
from asyncsched.schedulers.docker._opts import DockerOpts, run_opts
from asyncsched.schedulers.docker._render import (
    DEFAULT_NETWORK,
    DockerJob,
    format_job,
    render_job,
)
from asyncsched.schedulers.docker._state import AppView, ContainerIndex
from asyncsched.schedulers.docker._stop import Stopper
from asyncsched.schedulers.docker._submit import Submitter
from asyncsched.schedulers.kit import (
    DEFAULT_MAX_LINE_BYTES,
    AppEvent,
    AppSnapshot,
    Capabilities,
    LogQuery,
    ReplicaLimits,
    Scheduler,
    TaskHost,
    keyword_params,
    make_unique,
    render_off_loop,
)
from asyncsched.schedulers.shared.docker_daemon import (
    image_workspace_opts,
    resolve_host,
)
from asyncsched.schedulers.shared.docker_errors import BACKEND
from asyncsched.schedulers.shared.ids import unique_app_id
from asyncsched.specs import (
    AppDef,
    AppDryRunInfo,
    CfgVal,
    Role,
    Workspace,
    runopts,
)
from asyncsched.workspace.api import WorkspaceMixin

__all__ = ("DockerOpts", "DockerScheduler", "create_scheduler")

#: TorchX's path of this backend: its ``make_unique``, when patched, makes the ids
_TORCHX_MODULE = "asyncsched.schedulers.docker_scheduler"


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
        self._conn = DockerConnection(
            host=resolve_host(docker_host),
            check_open=self._check_open,
            client=client,
            max_concurrency=max_concurrency,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
        )
        self._network = network
        self._tasks = TaskHost("DockerScheduler")
        self._index = ContainerIndex(changes=self.change_source)
        self._control = Control(
            Stopper(self._conn, self._index, self._tasks, stop_timeout=stop_timeout)
        )
        self._lookup = Lookup(
            self._conn,
            self._index,
            self._tasks,
            on_view=self._control.fail_fast,
            on_exit=self._control.on_exit,
        )
        self._submitter = Submitter(self._conn, self._index, network=network)
        self._event_source: DockerEventSource | None = None

    # -- lifecycle -------------------------------------------------------------

    async def _aenter(self) -> None:
        check_asyncio()
        await self._tasks.enter()

    async def _aclose(self) -> None:
        if self._event_source is not None:
            self._event_source.close()  # readers end
        await self._tasks.aclose()
        await self._conn.aclose()

    @property
    def docker_host(self) -> str:
        """The daemon URL this scheduler talks to."""
        return self._conn.host

    @property
    def _watcher(self) -> EventWatcher | None:
        """The events watcher, once started (tests read its resyncs)."""
        return self._lookup.watcher

    # -- run options and workspaces ----------------------------------------------

    def _run_opts(self) -> runopts:
        return run_opts()

    def workspace_opts(self) -> runopts:
        """``image_repo`` (push built images there) and ``quiet`` (no build output)."""
        return image_workspace_opts(
            "repository to push workspace images to, e.g."
            " registry.example.com/team/app (push access required)"
        )

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
        await build_workspace(
            self._conn.docker(),
            self._conn.host,
            self.session_name,
            role,
            workspace,
            cast(Mapping[str, CfgVal], cfg),
        )

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
        return plan_pushes(app, cfg)

    async def push_images(self, images_to_push: dict[str, tuple[str, str]]) -> None:
        """Tag and push what :meth:`dryrun_push_images` returned (nothing: no I/O).

        Raises:
            SchedulerError: tagging or pushing failed.
        """
        if images_to_push:
            await push_planned(self._conn.docker(), self._conn.host, images_to_push)

    # -- submission ------------------------------------------------------------

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
        self._conn.docker()
        await self._lookup.ensure_watching()
        app = dryrun_info.app
        roles = [role.name for role in app.roles] if app is not None else []
        return await self._submitter.schedule(dryrun_info.request, roles)

    # -- observation -----------------------------------------------------------

    async def _describe(self, app_id: str) -> AppSnapshot | None:
        """Per-role/replica states with exit codes; None for an unknown app.

        A cancelled app is CANCELLED (TorchX says FAILED).
        """
        view = await self._lookup.view(app_id)
        return None if view is None else view.snapshot()

    async def _list(self) -> builtins.list[AppSnapshot]:
        """The apps of this scheduler's session on this daemon (session label)."""
        self._conn.docker()
        return [v.snapshot() for v in await self._lookup.views(self.session_name)]

    def _poll_interval(self, snapshot: AppSnapshot) -> float | None:
        # while the events stream reconnects, nothing signals: poll
        return None if self._lookup.synced else 2.0

    # -- events (the daemon's own stream, see _event_source) --------------------

    def _events(self, since: str | None) -> AsyncIterator[AppEvent]:
        if self._event_source is None:
            self._event_source = DockerEventSource(
                self._conn, self.session_name, lambda: not self._closed
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
        await self._control.cancel(view)

    async def delete(self, app_id: str) -> None:
        """Remove every container of the app (running ones are killed).

        Unlike :meth:`cancel`, the logs and status are gone afterwards. Unknown
        apps are ignored.
        """
        self._check_open()
        await self._submitter.remove(app_id, [])

    # -- logs ------------------------------------------------------------------

    async def _log_iter(self, app: AppSnapshot, query: LogQuery) -> AsyncIterator[str]:
        view: AppView = app.native
        [record] = [
            r
            for r in view.records
            if r.role == query.role_name and r.replica_id == query.k
        ]
        batches = iter_container_log(
            self._conn.docker(),
            self._conn.host,
            record.id,
            query,
            max_line_bytes=self.max_line_bytes,
        )
        # closing this generator closes the HTTP response at once
        async with contextlib.aclosing(batches):
            async for batch in batches:
                for line in batch:
                    yield line


def create_scheduler(session_name: str, **kwargs: Any) -> DockerScheduler:
    """Registry factory; unknown keyword arguments are ignored.

    Known ones: ``docker_host``, ``client``, ``network``, ``max_concurrency``,
    ``stop_timeout``, ``max_line_bytes``, ``connect_timeout``, ``read_timeout``.
    """
    return DockerScheduler(session_name, **keyword_params(DockerScheduler, kwargs))
