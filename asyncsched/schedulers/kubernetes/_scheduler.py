"""Run apps on Kubernetes as Volcano Jobs or Indexed Jobs (``kubernetes``).

Talks to the API server through one ``kubernetes_asyncio`` ``ApiClient`` per
scheduler (``pip install 'asyncsched[kubernetes]'``). Status comes from one
shared list+watch cache per namespace and resource type (Volcano Jobs, batch
Jobs, pods), selected by ``app.kubernetes.io/managed-by=asyncsched``:
``describe`` reads the cache and ``wait`` sleeps until the cache changes, so
waiting on any number of apps costs a few open watches. The caches start
with the first ``wait``, ``list`` or followed log of a namespace; before
that, a ``describe`` (or ``cancel``) reads the app with a GET and a
labelled list instead.

This module wires the scheduler's hooks to the parts that do the work: the
connection (:mod:`._connector`), run options (:mod:`._opts`), workspace
images (:mod:`._workspace`), the all-or-nothing submit (:mod:`._submit`),
the namespaces' caches and lookups (:mod:`._registry`), control
(:mod:`._control`) and replica logs (:mod:`._replica_logs`).
"""

from __future__ import annotations

import builtins
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, cast, final

from asyncsched._version import __version__
from asyncsched.errors import InvalidArgumentError, InvalidRunConfigException
from asyncsched.schedulers.kit import (
    DEFAULT_MAX_LINE_BYTES,
    AppEvent,
    AppSnapshot,
    Capabilities,
    LogQuery,
    ReplicaLimits,
    ReplicaSnapshot,
    Scheduler,
    Stream,
    TaskHost,
    check_max_line_bytes,
    render_off_loop,
)
from asyncsched.schedulers.kubernetes._client import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_REQUEST_TIMEOUT,
    KubeApi,
)
from asyncsched.schedulers.kubernetes._connector import ConnectionSettings, Connector
from asyncsched.schedulers.kubernetes._control import Control
from asyncsched.schedulers.kubernetes._events import KubeEvents, read_cursor
from asyncsched.schedulers.kubernetes._found import (
    Found,
    deleting,
    found_of,
    snapshot_of,
)
from asyncsched.schedulers.kubernetes._gate import BACKEND, import_client_off_loop
from asyncsched.schedulers.kubernetes._informer import ANSWER_TIMEOUT, DEFAULT_PAGE_SIZE
from asyncsched.schedulers.kubernetes._job_names import (
    job_name,
    sanitize_label_value,
)
from asyncsched.schedulers.kubernetes._lookup import is_managed
from asyncsched.schedulers.kubernetes._names import (
    check_namespace,
    namespace_problem,
    split_app_id,
)
from asyncsched.schedulers.kubernetes._no_controller import (
    NO_CONTROLLER_AFTER,
    flag_no_controller,
    no_controller_message,
    remaining,
)
from asyncsched.schedulers.kubernetes._opts import KubernetesOpts, kubernetes_run_opts
from asyncsched.schedulers.kubernetes._pacing import DEFAULT_MAX_HOLD, DEFAULT_MAX_QPS
from asyncsched.schedulers.kubernetes._pod import check_env_names
from asyncsched.schedulers.kubernetes._registry import (
    DEFAULT_CACHE_RETENTION,
    CacheSettings,
    NamespaceRegistry,
    check_allowed,
)
from asyncsched.schedulers.kubernetes._render import (
    KubernetesJob,
    format_job,
    render_job,
)
from asyncsched.schedulers.kubernetes._replica_logs import ReplicaLogs
from asyncsched.schedulers.kubernetes._submit import (
    create_all,
    manifests_for,
    validate_manifests,
)
from asyncsched.schedulers.kubernetes._workspace import build_workspace, push_images
from asyncsched.schedulers.shared.docker_daemon import image_workspace_opts
from asyncsched.schedulers.shared.ids import random_id
from asyncsched.specs import (
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    Role,
    Workspace,
    runopts,
)

__all__ = (
    "KubernetesJob",
    "KubernetesOpts",
    "KubernetesScheduler",
    "create_scheduler",
)

#: seconds between polls of a Volcano job asyncsched did not create
_FOREIGN_POLL = 5.0
#: how often ``wait`` reads an app by GETs while a cache is stale
_STALE_POLL = 1.0


@final
class KubernetesScheduler(Scheduler[KubernetesOpts]):
    """Run each app as a Volcano Job (default) or as Indexed Jobs.

    App ids are ``namespace:name`` (a bare ``name``: :attr:`namespace`); one
    whose namespace is not a DNS-1123 label or whose name is not a DNS-1123
    subdomain is an ``InvalidArgumentError`` before any request. ``cancel``
    aborts the app (pods and logs stay readable); :meth:`delete` removes it. Logs are the container's
    output as Kubernetes keeps it: stdout and stderr merged into one stream.

    Args:
        session_name: Recorded in the ``asyncsched.io/session`` label.
        client: A ``kubernetes_asyncio`` ``ApiClient`` to use (not closed by
            :meth:`aclose`); by default one is made from the in-cluster
            config, else the kubeconfig.
        docker_client: An aiodocker client to push ``images_to_push`` with.
        kubeconfig: Path of the kubeconfig (default ``$KUBECONFIG``; when
            neither is set, the in-cluster config of a pod, else
            ``~/.kube/config``).
        context: Kubeconfig context (default: the current one).
        namespace: Namespace ``list()`` shows, besides every namespace this
            scheduler submitted to (default: the kubeconfig context's; in a
            pod, the service account's; else ``default``).
        qps: Requests per second at first; the rate then rises while the
            server accepts and halves when it throttles (``<= 0``: no
            client-side pacing). See docs/backends/kubernetes.md, "Pacing".
        burst: Requests allowed at once above the rate.
        max_qps: The client-side ceiling of the rate (the safety net;
            ``max_qps=qps`` for a fixed rate).
        max_hold: Longest time in seconds a ``Retry-After`` holds *every*
            request (default 5): a longer one holds the others this long,
            while the request it answered waits all of it. ``0``: only the
            throttled request waits. It bounds, for instance, how long a
            cancelled ``submit`` takes to delete what it had created after
            the server said "come back in 30 s".
        max_retries: Retries of a 5xx or a connection error (a throttled
            request, 429, is sent again after its ``Retry-After`` up to 30
            times).
        resync: Seconds between full re-lists of the caches.
        watch_timeout: ``timeoutSeconds`` of each watch request.
        watch_answer_timeout: Seconds a watch request may wait for its answer
            (status and headers) before it is given up and opened again
            (default 30): an API server starting up can take a watch and
            hold it unanswered, the cache missing every change meanwhile.
        log_idle_timeout: Seconds a followed log may stay silent before its
            connection is re-opened (resuming after the last line; None: never).
        max_line_bytes: Cap of one ``log_iter`` line in bytes (default 1 MiB);
            a longer line comes in pieces of at most this size.
        connect_timeout: Seconds to open a connection to the API server.
        request_timeout: Seconds one non-streaming request may take in all
            (retries of timeouts and connection errors included); then
            :class:`~asyncsched.errors.SchedulerUnavailableError`.
        cache_retention: Seconds a finished app stays whole in the caches;
            then only its name and final state stay (for ``list``) and
            ``describe`` reads it from the server again (None: for ever).
        list_page_size: Objects per page of the caches' lists (``limit``;
            100: each page is decoded in one event-loop callback).
        wall_clock: Epoch seconds, what the expiry of an exec plugin's
            token is compared with to renew it ahead of time (default
            :func:`time.time`; a test passes a clock it moves forward instead
            of waiting out a token's lifetime). Also the clock a Volcano
            Job's age is read with (``no_controller_after``).
        no_controller_after: Seconds a Volcano Job may go without any status
            (no controller action) before its replicas read
            ``UNSCHEDULABLE`` with a message naming the missing Volcano
            controller / scheduler (default 60).

    Example:
        >>> async def main() -> None:
        ...     role = Role("hi", image="busybox", entrypoint="echo", args=["hello"])
        ...     async with KubernetesScheduler("demo") as sched:
        ...         app_id = await sched.submit(AppDef("hi", roles=[role]),
        ...                                     {"queue": "default"})
        ...         status = await sched.wait(app_id, timeout=600)
        ...         async for line in sched.log_iter(app_id, "hi"):
        ...             print(line, end="")
    """

    capabilities = Capabilities(
        logs=True,
        log_streams=frozenset({Stream.COMBINED}),
        log_since_until=True,
        log_tail=True,
        cancel=True,
        list=True,
        workspaces=True,
        mounts=True,
        retries=True,
        per_replica_status=True,
        event_loops=("asyncio",),
    )
    #: ``job_api=volcano``: one Volcano Job holds a task per replica, and the
    #: manifest (about 1.2 KB per task) must fit etcd's default 1.5 MiB request
    replica_limits = ReplicaLimits(
        per_role=1000,
        per_app=1000,
        why="with job_api=volcano the Job has one task per replica and must fit"
        " etcd's default 1.5 MiB request limit; job_api=indexed allows 100000",
    )
    #: ``job_api=indexed``: Kubernetes caps an Indexed Job's parallelism at 10^5
    indexed_replica_limits = ReplicaLimits(
        per_role=100_000,
        per_app=100_000,
        why="Kubernetes runs at most 100000 pods of an Indexed Job in parallel",
    )

    def __init__(
        self,
        session_name: str,
        *,
        client: Any = None,
        docker_client: Any = None,
        kubeconfig: str | None = None,
        context: str | None = None,
        namespace: str | None = None,
        qps: float = 50.0,
        burst: int = 100,
        max_qps: float = DEFAULT_MAX_QPS,
        max_hold: float = DEFAULT_MAX_HOLD,
        max_retries: int = 5,
        resync: float = 600.0,
        watch_timeout: int = 290,
        watch_answer_timeout: float = ANSWER_TIMEOUT,
        log_idle_timeout: float | None = 300.0,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        cache_retention: float | None = DEFAULT_CACHE_RETENTION,
        list_page_size: int = DEFAULT_PAGE_SIZE,
        wall_clock: Callable[[], float] = time.time,
        no_controller_after: float = NO_CONTROLLER_AFTER,
    ) -> None:
        super().__init__(BACKEND, session_name)
        self.max_line_bytes = check_max_line_bytes(max_line_bytes)
        if namespace is not None and (problem := namespace_problem(namespace)):
            raise InvalidRunConfigException(
                problem, "namespace", {"namespace": namespace}
            )
        if not max_hold >= 0:
            raise InvalidArgumentError(
                f"max_hold must be a number of seconds >= 0, got {max_hold!r}"
            )
        if not watch_answer_timeout > 0:
            raise InvalidArgumentError(
                "watch_answer_timeout must be a number of seconds > 0,"
                f" got {watch_answer_timeout!r}"
            )
        if not no_controller_after >= 0:
            raise InvalidArgumentError(
                "no_controller_after must be a number of seconds >= 0,"
                f" got {no_controller_after!r}"
            )
        self._wall_clock = wall_clock
        self._no_controller_after = no_controller_after
        self._docker_client = docker_client
        self._tasks = TaskHost("KubernetesScheduler")
        self._connector = Connector(
            ConnectionSettings(
                client=client,
                kubeconfig=kubeconfig,
                context=context,
                namespace=namespace,
                qps=qps,
                burst=burst,
                max_qps=max_qps,
                max_hold=max_hold,
                max_retries=max_retries,
                connect_timeout=connect_timeout,
                request_timeout=request_timeout,
                wall_clock=wall_clock,
            ),
            self._check_open,
        )
        self._registry = NamespaceRegistry(
            self._connector,
            self._tasks,
            self.change_source,
            CacheSettings(
                resync=resync,
                watch_timeout=watch_timeout,
                answer_timeout=watch_answer_timeout,
                page_size=list_page_size,
                retention=cache_retention,
            ),
        )
        self._control = Control(self._connector, self._registry)
        self._logs = ReplicaLogs(
            self._connector,
            self._registry,
            self.changed,
            idle_timeout=log_idle_timeout,
            max_line_bytes=self.max_line_bytes,
        )

    # -- lifecycle -------------------------------------------------------------

    async def _aenter(self) -> None:
        await self._tasks.enter()

    async def _aclose(self) -> None:
        await self._tasks.aclose()
        await self._connector.aclose()

    @property
    def api(self) -> KubeApi | None:
        """The connection, once made (for request accounting)."""
        return self._connector.api

    @property
    def namespace(self) -> str | None:
        """The namespace ``list()`` shows and an app id without one means.

        The constructor's, else (once connected) the kubeconfig context's, or
        in a pod the service account's, else ``default``.
        """
        return self._connector.namespace

    # -- run options -----------------------------------------------------------

    def _run_opts(self) -> runopts:
        return kubernetes_run_opts()

    def workspace_opts(self) -> runopts:
        return image_workspace_opts(
            "repository local sha256: images (and workspace builds) are pushed"
            " to before submitting, e.g. registry.example.com/team/app"
        )

    async def build_workspace_and_update_role(
        self, role: Role, workspace: str | Workspace, cfg: KubernetesOpts
    ) -> None:
        """Build ``workspace`` over ``role.image`` with the local Docker engine.

        The role then points at the built image id; the dry run maps it to
        ``<image_repo>:<hash>`` and ``schedule`` pushes it there first.

        Raises:
            InvalidRunConfigException: no ``image_repo`` (the cluster could not
                pull a local image).
            SchedulerUnavailableError: the ``docker`` extra is missing.
        """
        if not cfg.get("image_repo"):
            raise InvalidRunConfigException(
                "a workspace is built into a local image that the cluster cannot"
                " pull: set image_repo to a repository it can",
                "image_repo",
                dict(cast(Mapping[str, CfgVal], cfg)),
            )
        await build_workspace(
            role,
            workspace,
            session_name=self.session_name,
            docker_client=self._docker_client,
            quiet=bool(cfg.get("quiet")),
        )

    def _validate(self, app: AppDef, scheduler: str, cfg: Any) -> None:
        """Env names Kubernetes would reject; roles without resources are fine
        (no requests), as in TorchX."""
        check_env_names(app)

    def _replica_limits(self, cfg: KubernetesOpts) -> ReplicaLimits | None:
        """:attr:`indexed_replica_limits` with ``job_api=indexed``, else
        :attr:`replica_limits` (Volcano's)."""
        if cfg.get("job_api") == "indexed":
            return self.indexed_replica_limits
        return self.replica_limits

    # -- submission ------------------------------------------------------------

    async def _submit_dryrun(
        self, app: AppDef, cfg: KubernetesOpts
    ) -> AppDryRunInfo[KubernetesJob]:
        await import_client_off_loop()  # the extra is installed (a clear error if not)
        values = cast(Mapping[str, CfgVal], cfg)
        name = job_name(app.name, random_id())
        job = await render_off_loop(
            app,
            render_job,
            app,
            values,
            name=name,
            session=self.session_name,
            version=__version__,
        )
        if cfg.get("validate_spec"):
            await validate_manifests(
                await self._connector.connect(cfg.get("context")), job
            )
        return AppDryRunInfo(job, format_job)

    async def _schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        """Create the manifests (after pushing ``images_to_push``); return the app id.

        All or nothing: if a later manifest fails, the earlier ones are deleted.

        Raises:
            SubmitError: the server rejected a manifest (409: the name is taken).
            InvalidRunConfigException: ``job_api=indexed`` on a server without
                Indexed Jobs (Kubernetes < 1.21); nothing was created.
            InvalidArgumentError: the request's namespace or name was edited
                into one Kubernetes refuses; nothing was sent.
        """
        job: KubernetesJob = dryrun_info.request
        # a request edited after the dry run: its names go into request paths
        check_namespace(job.namespace)
        split_app_id(job.app_id)
        cfg = dryrun_info.cfg or {}
        context = cfg.get("context")
        api = await self._connector.connect(str(context) if context else None)
        manifests = await manifests_for(api, job)
        await push_images(job, self._docker_client)
        # the caches learn of the new app if they run; submit starts none
        await create_all(api, job, manifests, self._registry.running(job.namespace))
        self._registry.submitted_to.add(job.namespace)
        return job.app_id

    # -- observation -----------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _watching(self, app_id: str) -> AsyncIterator[None]:
        # a wait starts the caches of the app's namespace (they stay up
        # afterwards): waiting costs the open watches, not a request per change
        await self._registry.watch_app(app_id)
        yield

    async def _describe(self, app_id: str) -> AppSnapshot | None:
        """State, per-replica status (from the pods) and messages; None if unknown."""
        found = await self._registry.lookup(app_id)
        if found is None:
            return None
        await self._registry.fresh_pods(found)
        snapshot = self._snapshot(app_id, found)
        if found.job_api == "indexed" and snapshot.state == AppState.FAILED:
            # one role's Job failed: the others would hold their nodes for nothing
            await self._control.suspend_unfinished(found, cancelled=False)
        return snapshot

    async def _list(self) -> builtins.list[AppSnapshot]:
        """The asyncsched apps in the configured namespace and in every one
        this scheduler submitted to (jobs without status too)."""
        await self._connector.connect()
        home = self._connector.home
        snapshots: builtins.list[AppSnapshot] = []
        for namespace in [home, *sorted(self._registry.submitted_to - {home})]:
            ns = await self._registry.watch(namespace)
            check_allowed(ns)
            snapshots.extend(
                self._snapshot(f"{namespace}:{name}", Found("volcano", ns, [job]))
                for name, job in ns.volcano.objects.items()
                if not deleting(job)
            )
            for key, jobs in ns.batch.by_key.items():
                live = [j for j in jobs.values() if not deleting(j)]
                if live:
                    snapshots.append(snapshot_of(key, Found("indexed", ns, live)))
        return snapshots

    def _snapshot(self, app_id: str, found: Found) -> AppSnapshot:
        """``snapshot_of``, saying so when no Volcano controller acts on the Job."""
        snapshot = snapshot_of(app_id, found)
        if found.job_api == "volcano" and snapshot.state == AppState.SUBMITTED:
            message = no_controller_message(
                found.jobs[0], now=self._wall_clock(), after=self._no_controller_after
            )
            if message is not None:
                flag_no_controller(snapshot, message)
        return snapshot

    def _check_cursor(self, cursor: str) -> None:
        """Refuse another source's cursor, or one naming a malformed namespace.

        Raises:
            InvalidArgumentError: either (before any request).
        """
        read_cursor(cursor, self.event_source)

    def _events(self, since: str | None) -> AsyncIterator[AppEvent]:
        """The namespaces' list+watch from the cursor's resourceVersions
        (see :mod:`._events`): resumable from another process."""
        source = KubeEvents(
            self.event_source,
            self._connector,
            self._tasks,
            self._registry.settings,
            lambda: set(self._registry.submitted_to),
        )
        return source.follow(since, lambda: not self._closed)

    def _poll_interval(self, snapshot: AppSnapshot) -> float | None:
        found = found_of(snapshot)
        ns = found.caches
        if not ns.live or ns.volcano.stale or ns.batch.stale or ns.pods.stale:
            return _STALE_POLL  # a cache misses changes: read the app anew
        if found.job_api == "volcano" and snapshot.state == AppState.SUBMITTED:
            # no watch event comes when no controller acts: read it at the bound
            left = remaining(
                found.jobs[0], now=self._wall_clock(), after=self._no_controller_after
            )
            if left is not None and left > 0:
                return left + 0.1
        # a job of someone else's is in no cache: nothing signals its changes
        return None if is_managed(found.jobs[0]) else _FOREIGN_POLL

    def _find_replica(
        self, app: AppSnapshot, role_name: str, k: int
    ) -> ReplicaSnapshot | None:
        # role names may be read back from labels (sanitised)
        return app.replica(role_name, k) or app.replica(
            sanitize_label_value(role_name), k
        )

    # -- control ---------------------------------------------------------------

    async def _cancel(self, app: AppSnapshot) -> None:
        await self._control.cancel(found_of(app), terminal=app.terminal)

    async def delete(self, app_id: str) -> None:
        """Delete the app's Job(s) (and Service); their pods go with them.

        Unlike :meth:`cancel`, logs and status are gone afterwards. Unknown
        apps are ignored.

        Raises:
            InvalidArgumentError: a malformed app id (before any request).
        """
        self._check_open()
        found = await self._registry.lookup(app_id)
        if found is not None:
            await self._control.delete(found)

    # -- logs ------------------------------------------------------------------

    def _check_app_id(self, app_id: str) -> None:
        """A malformed app id is refused at once (before any request).

        Raises:
            InvalidArgumentError: the id is not ``namespace:name`` (or a bare
                name) with Kubernetes names.
        """
        split_app_id(app_id)

    async def _log_iter(self, app: AppSnapshot, query: LogQuery) -> AsyncIterator[str]:
        app_id = app.app_id

        async def app_over() -> bool:
            current = await self._describe(app_id)
            return current is None or current.terminal

        lines = self._logs.lines(app_id, found_of(app), query, app_over)
        async with contextlib.aclosing(lines):
            async for line in lines:
                yield line


def create_scheduler(session_name: str, **kwargs: Any) -> KubernetesScheduler:
    """Registry factory; unknown keyword arguments are ignored.

    Known ones: ``client``, ``docker_client``, ``kubeconfig``, ``context``,
    ``namespace``, ``qps``, ``burst``, ``max_qps``, ``max_hold``, ``max_retries``,
    ``resync``,
    ``watch_timeout``, ``watch_answer_timeout``, ``log_idle_timeout``, ``max_line_bytes``,
    ``connect_timeout``, ``request_timeout``.
    """
    known = {
        "client",
        "docker_client",
        "kubeconfig",
        "context",
        "namespace",
        "qps",
        "burst",
        "max_qps",
        "max_hold",
        "max_retries",
        "resync",
        "watch_timeout",
        "watch_answer_timeout",
        "log_idle_timeout",
        "max_line_bytes",
        "connect_timeout",
        "request_timeout",
    }
    return KubernetesScheduler(
        session_name, **{k: v for k, v in kwargs.items() if k in known}
    )
