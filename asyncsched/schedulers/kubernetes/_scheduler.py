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
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import functools
import logging
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Mapping,
)
from contextlib import aclosing
from typing import Any, TypedDict, cast, final

import anyio
from anyio.abc import TaskStatus

from asyncsched._version import __version__
from asyncsched.errors import (
    InvalidArgumentError,
    InvalidRunConfigException,
    SchedulerUnavailableError,
    SubmitError,
)
from asyncsched.schedulers.kit import (
    DEFAULT_MAX_LINE_BYTES,
    AppSnapshot,
    Capabilities,
    LogQuery,
    ReplicaLimits,
    ReplicaSnapshot,
    Scheduler,
    Stream,
    TaskHost,
    all_or_nothing,
    check_max_line_bytes,
    render_off_loop,
)
from asyncsched.schedulers.kubernetes._caches import (
    BATCH_JOBS,
    VOLCANO_JOBS,
    Caches,
    app_key,
    expired_state,
)
from asyncsched.schedulers.kubernetes._client import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_REQUEST_TIMEOUT,
    MERGE_PATCH_CT,
    KubeApi,
)
from asyncsched.schedulers.kubernetes._config import connect
from asyncsched.schedulers.kubernetes._create_errors import create_error
from asyncsched.schedulers.kubernetes._features import (
    check_indexed_jobs,
    dropped_completion_mode,
    is_indexed_job,
    job_api_version,
    no_indexed_jobs,
    server_version,
)
from asyncsched.schedulers.kubernetes._field_validation import create_query
from asyncsched.schedulers.kubernetes._gate import (
    BACKEND,
    KubernetesApiError,
    import_client_off_loop,
)
from asyncsched.schedulers.kubernetes._informer import DEFAULT_PAGE_SIZE
from asyncsched.schedulers.kubernetes._logs import has_log, iter_pod_log
from asyncsched.schedulers.kubernetes._lookup import (
    Found,
    is_managed,
    read_once,
    read_stale,
    read_uncached,
    refresh_pods,
)
from asyncsched.schedulers.kubernetes._names import (
    check_namespace,
    is_dns_label,
    namespace_problem,
    split_app_id,
)
from asyncsched.schedulers.kubernetes._pacing import DEFAULT_MAX_HOLD, DEFAULT_MAX_QPS
from asyncsched.schedulers.kubernetes._render import (
    ANNOTATION_CANCELLED,
    LABEL_APP_NAME,
    LABEL_REPLICA_ID,
    LABEL_ROLE_NAME,
    LABEL_SESSION,
    LABEL_VERSION,
    KubernetesJob,
    check_env_names,
    fit_to_server,
    format_job,
    job_name,
    render_job,
    sanitize_label_value,
)
from asyncsched.schedulers.kubernetes._state import (
    completion_index,
    describe_indexed,
    describe_volcano,
    main_container,
)
from asyncsched.schedulers.shared.docker_daemon import (
    image_workspace_opts,
    registry_auth,
    resolve_host,
)
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

__all__ = [
    "KubernetesJob",
    "KubernetesOpts",
    "KubernetesScheduler",
    "create_scheduler",
]

logger = logging.getLogger(__name__)

#: seconds a failed submit may spend deleting what it created
_UNDO_TIMEOUT = 60.0

JSON = dict[str, Any]
SERVICES = "/api/v1/namespaces/{ns}/services"
#: how long delete() waits for its watch to report the Job(s) gone
_DELETE_SETTLE = 10.0
#: how long a terminal app's pods may lag behind its Job in the cache
_POD_SETTLE = 5.0
#: seconds between polls of a Volcano job asyncsched did not create
_FOREIGN_POLL = 5.0
#: how often ``wait`` reads an app by GETs while a cache is stale
_STALE_POLL = 1.0
#: marks a role Job suspended because another role's Job failed
ANNOTATION_STOPPED = "asyncsched.io/stopped-after-failure"
#: seconds a log follow waiting for its container re-reads the cache anyway
_LOG_START_RECHECK = 30.0
#: seconds a namespace whose caches failed to start answers that error again
_START_BACKOFF = 1.0
#: default seconds a finished app stays whole in the caches
DEFAULT_CACHE_RETENTION = 3600.0


class KubernetesOpts(TypedDict, total=False):
    """Run options of :class:`KubernetesScheduler` (after resolution)."""

    namespace: str
    queue: str | None
    job_api: str
    service_account: str | None
    priority_class: str | None
    image_repo: str | None
    reserved_millicpu: int
    reserved_memmb: int
    efa_device_count: int | None
    node_selector: dict[str, str] | None
    tolerations: list[str] | None
    image_pull_secrets: list[str] | None
    context: str | None
    validate_spec: bool
    ttl_seconds_after_finished: int | None


_Namespace = Caches
_app_key = app_key


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
            of waiting out a token's lifetime).

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
        log_idle_timeout: float | None = 300.0,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        cache_retention: float | None = DEFAULT_CACHE_RETENTION,
        list_page_size: int = DEFAULT_PAGE_SIZE,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(BACKEND, session_name)
        self.max_line_bytes = check_max_line_bytes(max_line_bytes)
        if namespace is not None and (problem := namespace_problem(namespace)):
            raise InvalidRunConfigException(
                problem, "namespace", {"namespace": namespace}
            )
        self._client = client
        self._docker_client = docker_client
        self._kubeconfig = kubeconfig
        self._context = context
        self._namespace = namespace
        self._qps = qps
        self._burst = burst
        if not max_hold >= 0:
            raise InvalidArgumentError(
                f"max_hold must be a number of seconds >= 0, got {max_hold!r}"
            )
        self._max_qps = max_qps
        self._max_hold = max_hold
        self._max_retries = max_retries
        self._resync = resync
        self._watch_timeout = watch_timeout
        self._log_idle_timeout = log_idle_timeout
        self._connect_timeout = connect_timeout
        self._request_timeout = request_timeout
        self._cache_retention = cache_retention
        self._list_page_size = list_page_size
        self._wall_clock = wall_clock
        self._api_: KubeApi | None = None
        self._namespaces: dict[str, _Namespace] = {}
        # namespaces whose caches failed to start: (retry after, the error)
        self._failed: dict[str, tuple[float, Exception]] = {}
        #: namespaces this scheduler submitted to (``list()`` shows them too)
        self._submitted_to: set[str] = set()
        self._tasks = TaskHost("KubernetesScheduler")
        self._lock = anyio.Lock()

    # -- lifecycle -------------------------------------------------------------

    async def _aenter(self) -> None:
        await self._tasks.enter()

    async def _aclose(self) -> None:
        await self._tasks.aclose()
        if self._api_ is not None:
            await self._api_.aclose()
        self._api_ = None

    async def _api(self, context: str | None = None) -> KubeApi:
        self._check_open()
        if self._api_ is not None:
            if context and context != self._context:
                raise InvalidRunConfigException(
                    f"this scheduler talks to context {self._context!r}; make"
                    f" another scheduler for context {context!r}",
                    "context",
                    {"context": context},
                )
            return self._api_
        async with self._lock:
            if self._api_ is None:
                self._context = context or self._context
                client, owns, creds = self._client, False, None
                namespace = "default"  # of an injected client: not known
                if client is None:
                    conn = await connect(
                        kubeconfig=self._kubeconfig,
                        context=self._context,
                        clock=self._wall_clock,
                    )
                    client, creds, owns = conn.client, conn.credentials, True
                    namespace = conn.namespace
                    if self._namespace is None and not is_dns_label(namespace):
                        await client.close()
                        raise SchedulerUnavailableError(
                            BACKEND,
                            "the default namespace (of the kubeconfig context,"
                            f" or of the pod's service account) {namespace!r} is"
                            " not a valid namespace name",
                            "fix it there, or pass namespace=... to the scheduler",
                        )
                if self._namespace is None:
                    self._namespace = namespace
                self._api_ = KubeApi(
                    client,
                    qps=self._qps,
                    burst=self._burst,
                    max_qps=self._max_qps,
                    max_hold=self._max_hold,
                    max_retries=self._max_retries,
                    owns_client=owns,
                    credentials=creds,
                    connect_timeout=self._connect_timeout,
                    request_timeout=self._request_timeout,
                )
            return self._api_

    @property
    def api(self) -> KubeApi | None:
        """The connection, once made (for request accounting)."""
        return self._api_

    @property
    def namespace(self) -> str | None:
        """The namespace ``list()`` shows and an app id without one means.

        The constructor's, else (once connected) the kubeconfig context's, or
        in a pod the service account's, else ``default``.
        """
        return self._namespace

    # -- run options -----------------------------------------------------------

    def _run_opts(self) -> runopts:
        opts = runopts()
        opts.add("namespace", type_=str, default="default", help="namespace to run in")
        opts.add(
            "queue",
            type_=str,
            help="Volcano queue to schedule the job in (required with job_api=volcano);"
            " with job_api=indexed, the Kueue LocalQueue (kueue.x-k8s.io/queue-name)",
        )
        opts.add(
            "job_api",
            type_=str,
            default="volcano",
            help="volcano (a Volcano Job, as TorchX) or indexed (one batch/v1"
            " Indexed Job per role plus a headless Service; no Volcano needed)",
        )
        opts.add("service_account", type_=str, help="service account of the pods")
        opts.add(
            "priority_class",
            type_=str,
            help="PriorityClass of the Volcano job (of the pods with job_api=indexed)",
        )
        opts.add(
            "reserved_millicpu",
            type_=int,
            default=100,
            help="millicpu subtracted from the cpu request (left to system pods)",
        )
        opts.add(
            "reserved_memmb",
            type_=int,
            default=1024,
            help="MB subtracted from the memory request (left to system pods)",
        )
        opts.add(
            "efa_device_count",
            type_=int,
            help="override the vpc.amazonaws.com/efa limit (0 removes it)",
        )
        opts.add(
            "node_selector",
            type_=dict[str, str],
            help="node labels the pods must match (K1:v1,K2:v2)",
        )
        opts.add(
            "tolerations",
            type_=list[str],
            help="taints the pods tolerate, each KEY[=VALUE][:EFFECT]",
        )
        opts.add(
            "image_pull_secrets",
            type_=list[str],
            help="names of Secrets used to pull the images",
        )
        opts.add("context", type_=str, help="kubeconfig context to use")
        opts.add(
            "ttl_seconds_after_finished",
            type_=int,
            help="seconds after it finished that the cluster deletes the job"
            " (ttlSecondsAfterFinished; on Kubernetes < 1.21 only with the"
            " TTLAfterFinished feature gate on, else it is kept)",
        )
        opts.add(
            "validate_spec",
            type_=bool,
            default=False,
            help="validate the manifests with a server-side dry run (dryRun=All)"
            " during submit_dryrun (needs cluster access)",
        )
        return opts

    def workspace_opts(self) -> runopts:
        """``image_repo`` (where local images are pushed) and ``quiet``."""
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
        aiodocker, images = _docker_modules()
        docker = self._docker_client or aiodocker.Docker()
        try:
            label = (
                workspace
                if isinstance(workspace, str)
                else ",".join(workspace.projects)
            )
            async with images.open_context(workspace) as context:
                role.image = await images.build_image(
                    docker,
                    resolve_host(None),
                    context,
                    base_image=role.image,
                    workspace=label,
                    labels={
                        LABEL_VERSION: __version__,
                        LABEL_SESSION: self.session_name,
                    },
                    quiet=bool(cfg.get("quiet")),
                )
        finally:
            if self._docker_client is None:
                await docker.close()

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
            api = await self._api(cfg.get("context"))
            for manifest in job.manifests:
                try:
                    await api.request(
                        "POST",
                        _collection(manifest, job.namespace),
                        query={"dryRun": "All", **await create_query(api)},
                        body=manifest,
                    )
                except KubernetesApiError as exc:
                    raise SubmitError(
                        f"invalid job spec ({manifest['kind']} "
                        f"{manifest['metadata']['name']}): {exc.message}"
                    ) from exc
        return AppDryRunInfo(job, format_job)

    async def _schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        """Create the manifests (after pushing ``images_to_push``); return the app id.

        All or nothing: if a later manifest fails, the earlier ones are deleted.

        Raises:
            SubmitError: the server rejected a manifest (409: the name is taken).
            UnsupportedOperationError: ``job_api=indexed`` on a server without
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
        api = await self._api(str(context) if context else None)
        manifests = job.manifests
        if any(is_indexed_job(m) for m in manifests):
            await check_indexed_jobs(api)
            version = await job_api_version(api)
            manifests = copy.deepcopy(manifests)
            for manifest in manifests:
                if is_indexed_job(manifest):
                    fit_to_server(manifest, version)
        await self._push_images(job)
        # the caches learn of the new app if they run; submit starts none
        ns = self._namespaces.get(job.namespace)
        # a refused create made nothing (and a 409 names someone else's
        # object); a cancelled or lost one may have landed: it is deleted too.
        # Bounded: a hung API server must not hang the failed submit
        async with all_or_nothing(job.app_id, undo_within=_UNDO_TIMEOUT) as steps:
            for manifest in manifests:
                collection = _collection(manifest, job.namespace)
                path = f"{collection}/{manifest['metadata']['name']}"
                obj = await steps.create(
                    functools.partial(self._create, api, collection, manifest),
                    undo=functools.partial(_delete, api, path),
                    name=path,
                    refusals=(SubmitError,),
                )
                if dropped_completion_mode(manifest, obj):
                    raise no_indexed_jobs((await server_version(api))[0])
                _warn_if_ttl_dropped(manifest, obj)
                if manifest["kind"] == "Job" and ns is not None:
                    target = ns.volcano if _is_volcano(manifest) else ns.batch
                    target.upsert(obj)
        self._submitted_to.add(job.namespace)
        return job.app_id

    async def _create(self, api: KubeApi, path: str, manifest: JSON) -> JSON:
        try:
            # unknown fields (a typo in an overlay) are refused, not dropped
            result: JSON = await api.request(
                "POST",
                path,
                body=manifest,
                query=await create_query(api),
                map_denied=False,
            )
            return result
        except KubernetesApiError as exc:
            if exc.status == 409 and exc.attempts > 1:
                # a retried create: the first attempt may have landed, its
                # answer lost (a 5xx from a proxy, a dropped connection)
                mine = await self._created_by_this_submit(api, path, manifest)
                if mine is not None:
                    return mine
            namespace = path.split("/namespaces/", 1)[-1].split("/", 1)[0]
            raise create_error(exc, manifest, namespace) from exc

    async def _created_by_this_submit(
        self, api: KubeApi, path: str, manifest: JSON
    ) -> JSON | None:
        """The existing object, when its labels say it is this very app."""
        try:
            existing: JSON = await api.request(
                "GET", f"{path}/{manifest['metadata']['name']}"
            )
        except KubernetesApiError:
            return None
        wanted = _labels(manifest)
        if wanted and all(_labels(existing).get(k) == v for k, v in wanted.items()):
            return existing
        return None

    async def _push_images(self, job: KubernetesJob) -> None:
        if not job.images_to_push:
            return
        aiodocker, images = _docker_modules()
        docker = self._docker_client or aiodocker.Docker()
        try:
            for image, (repo, _tag) in job.images_to_push.items():
                auth = await registry_auth(repo)
                await images.push_image(docker, resolve_host(None), image, repo, auth)
        finally:
            if self._docker_client is None:
                await docker.close()

    # -- the caches ------------------------------------------------------------

    def _caches(self, api: KubeApi, namespace: str, *, live: bool) -> _Namespace:
        return Caches(
            api,
            namespace,
            changes=self.change_source,
            live=live,
            resync=self._resync,
            watch_timeout=self._watch_timeout,
            page_size=self._list_page_size,
        )

    async def _watch(self, namespace: str) -> _Namespace:
        """The running caches of ``namespace`` (started on first use)."""
        ns = self._namespaces.get(namespace)
        if ns is not None:
            return ns
        api = await self._api()
        async with self._lock:
            ns = self._namespaces.get(namespace)
            if ns is None:
                ns = self._caches(api, namespace, live=True)
                failed = self._failed.get(namespace)
                if failed is not None and time.monotonic() < failed[0]:
                    raise failed[1]  # failed a moment ago: no new requests yet
                scopes: builtins.list[anyio.CancelScope] = []
                try:
                    for informer in ns.informers:
                        # one after the other: a refusal surfaces as itself, not
                        # inside an exception group
                        scope = anyio.CancelScope()
                        scopes.append(scope)
                        await self._tasks.start(
                            _scoped(scope, informer.run),
                            name=f"kube-watch {informer.path}",
                        )
                except Exception as exc:
                    # all or none: no cache of this namespace keeps watching
                    for scope in scopes:
                        scope.cancel()
                    self._failed[namespace] = (time.monotonic() + _START_BACKOFF, exc)
                    raise
                if self._cache_retention is not None:
                    await self._tasks.start_soon(
                        self._sweep,
                        ns,
                        self._cache_retention,
                        name=f"kube-expire {namespace}",
                    )
                self._failed.pop(namespace, None)
                self._namespaces[namespace] = ns
            return ns

    async def _sweep(self, ns: _Namespace, retention: float) -> None:
        """Expire the apps of ``ns`` finished for longer than ``retention`` s."""
        interval = min(max(retention / 4, 0.2), 60.0)
        while True:
            await anyio.sleep(interval)
            expired = 0
            steps = ns.sweep_steps(
                retention,
                lambda kind, jobs: (
                    _describe(f"{ns.name}:{_app_key(jobs[0])}", kind, ns, jobs).state
                ),
            )
            for count in steps:  # 10,000 apps in steps: the loop keeps running
                expired += count
                await anyio.lowlevel.checkpoint()
            if expired:
                logger.debug("%d finished apps expired from %s", expired, ns.name)

    async def _watch_app(self, app_id: str) -> None:
        """Start the caches of ``app_id``'s namespace.

        Raises:
            InvalidArgumentError: a malformed app id (before any request).
        """
        namespace, _ = split_app_id(app_id)
        await self._api()  # knows the default namespace once connected
        _check_allowed(await self._watch(namespace or self._namespace or "default"))

    @contextlib.asynccontextmanager
    async def _watching(self, app_id: str) -> AsyncIterator[None]:
        # a wait starts the caches of the app's namespace (they stay up
        # afterwards): waiting costs the open watches, not a request per change
        await self._watch_app(app_id)
        yield

    async def _lookup(self, app_id: str) -> Found | None:
        """``(job_api, caches, jobs)`` of the app, or None when it does not exist.

        An app whose Jobs are all being deleted (``deletionTimestamp`` set: a
        foreground delete waits for the garbage collector to remove the pods)
        is gone already.
        """
        found = await self._lookup_any(app_id)
        if found is None or all(_deleting(job) for job in found[2]):
            return None
        return found

    async def _lookup_any(self, app_id: str) -> Found | None:
        given, name = split_app_id(app_id)  # a malformed id: before any request
        await self._api()  # knows the default namespace once connected
        namespace = given or self._namespace or "default"
        ns = self._namespaces.get(namespace)
        if ns is None:  # no cache runs here: one GET (or labelled list) will do
            return await self._lookup_once(namespace, name)
        _check_allowed(ns)
        key = f"{namespace}:{name}"
        if ns.is_expired(key):  # only stubs are cached: read it anew
            return await self._lookup_once(namespace, name)
        if ns.volcano.stale or ns.batch.stale:
            return await read_stale(await self._api(), ns, name, key)
        job = ns.volcano.get(name)
        if job is not None:
            return "volcano", ns, [job]
        jobs = ns.batch.with_key(key)
        if jobs:
            return "indexed", ns, jobs
        # not cached: made by another process a moment ago, or gone
        return await read_uncached(await self._api(), ns, name)

    async def _lookup_once(self, namespace: str, name: str) -> Found | None:
        """The app read from the server alone (no cache runs in ``namespace``)."""
        api = await self._api()
        return await read_once(api, self._caches(api, namespace, live=False), name)

    async def _fresh_pods(self, ns: _Namespace, jobs: builtins.list[JSON]) -> None:
        """While the pods cache is stale, read the app's pods into it by a list."""
        if ns.live and ns.pods.stale:
            await refresh_pods(await self._api(), ns, jobs)

    # -- observation -----------------------------------------------------------

    async def _describe(self, app_id: str) -> AppSnapshot | None:
        """State, per-replica status (from the pods) and messages; None if unknown."""
        found = await self._lookup(app_id)
        if found is None:
            return None
        await self._fresh_pods(found[1], found[2])
        snapshot = _describe(app_id, *found)
        kind, ns, jobs = found
        if kind == "indexed" and snapshot.state == AppState.FAILED:
            # one role's Job failed: the others would hold their nodes for nothing
            await self._suspend_unfinished(ns, jobs, cancelled=False)
        return snapshot

    async def _list(self) -> builtins.list[AppSnapshot]:
        """The asyncsched apps in the configured namespace and in every one
        this scheduler submitted to (jobs without status too)."""
        await self._api()
        home = self._namespace or "default"
        snapshots: builtins.list[AppSnapshot] = []
        for namespace in [home, *sorted(self._submitted_to - {home})]:
            ns = await self._watch(namespace)
            _check_allowed(ns)
            snapshots.extend(
                _describe(f"{namespace}:{name}", "volcano", ns, [job])
                for name, job in ns.volcano.objects.items()
                if not _deleting(job)
            )
            for key, jobs in ns.batch.by_key.items():
                live = [j for j in jobs.values() if not _deleting(j)]
                if live:
                    snapshots.append(_describe(key, "indexed", ns, live))
        return snapshots

    def _poll_interval(self, snapshot: AppSnapshot) -> float | None:
        _, ns, jobs = snapshot.native
        if not ns.live or ns.volcano.stale or ns.batch.stale or ns.pods.stale:
            return _STALE_POLL  # a cache misses changes: read the app anew
        # a job of someone else's is in no cache: nothing signals its changes
        return None if is_managed(jobs[0]) else _FOREIGN_POLL

    def _find_replica(
        self, app: AppSnapshot, role_name: str, k: int
    ) -> ReplicaSnapshot | None:
        # role names may be read back from labels (sanitised)
        return app.replica(role_name, k) or app.replica(
            sanitize_label_value(role_name), k
        )

    # -- control ---------------------------------------------------------------

    async def _suspend_unfinished(
        self, ns: _Namespace, jobs: builtins.list[JSON], *, cancelled: bool
    ) -> None:
        """Suspend the role Jobs still running (their pods are deleted)."""
        api = await self._api()
        watched = False
        for job in jobs:
            if not _unfinished(job):
                continue
            if not watched:
                watched = True
                ns = await self._watch_stopping(ns)
            meta: JSON = {"annotations": {ANNOTATION_STOPPED: "true"}}
            if cancelled:
                meta = {"annotations": {ANNOTATION_CANCELLED: "true"}}
            try:
                obj = await api.request(
                    "PATCH",
                    f"{ns.batch.path}/{job['metadata']['name']}",
                    body={"metadata": meta, "spec": {"suspend": True}},
                    content_type=MERGE_PATCH_CT,
                )
            except (KubernetesApiError, SchedulerUnavailableError) as exc:
                if cancelled:
                    raise
                logger.warning(
                    "stopping Job %s failed: %s", job["metadata"]["name"], exc
                )
                continue
            ns.batch.upsert(obj)

    async def _watch_stopping(self, ns: _Namespace) -> _Namespace:
        """Start the caches of ``ns`` before stopping pods there, and return
        them: the pods' last status (their exit codes) arrives on the watch
        just before they are deleted, and the cache keeps it for ``wait``
        (a refused watch is logged: the stop goes on, ``ns`` is returned)."""
        if ns.live:
            return ns
        try:
            return await self._watch(ns.name)
        except Exception as exc:  # noqa: BLE001 -- the stop matters more
            logger.info("cannot watch %s while stopping pods: %s", ns.name, exc)
            return ns

    async def _cancel(self, app: AppSnapshot) -> None:
        kind, ns, jobs = app.native
        if app.terminal:
            if kind == "indexed":  # a failed app may have roles still running
                await self._suspend_unfinished(ns, jobs, cancelled=False)
            return
        ns = await self._watch_stopping(ns)
        api = await self._api()
        if kind == "volcano":
            name = jobs[0]["metadata"]["name"]
            obj = await api.request(
                "PATCH",
                f"{ns.volcano.path}/{name}/status",
                body={"status": {"state": {"phase": "Aborted"}}},
                content_type=MERGE_PATCH_CT,
            )
            ns.volcano.upsert(obj)
            return
        for job in jobs:
            obj = await api.request(
                "PATCH",
                f"{ns.batch.path}/{job['metadata']['name']}",
                body={
                    "metadata": {"annotations": {ANNOTATION_CANCELLED: "true"}},
                    "spec": {"suspend": True},
                },
                content_type=MERGE_PATCH_CT,
            )
            ns.batch.upsert(obj)

    async def delete(self, app_id: str) -> None:
        """Delete the app's Job(s) (and Service); their pods go with them.

        Unlike :meth:`cancel`, logs and status are gone afterwards. Unknown
        apps are ignored.

        Raises:
            InvalidArgumentError: a malformed app id (before any request).
        """
        self._check_open()
        found = await self._lookup(app_id)
        if found is None:
            return
        kind, ns, jobs = found
        api = await self._api()
        name = _app_key(jobs[0])
        informer = ns.volcano if kind == "volcano" else ns.batch
        key = informer.key(jobs[0])  # what the cache files the app's Jobs under
        if kind == "volcano":
            await _delete(api, f"{ns.volcano.path}/{jobs[0]['metadata']['name']}")
        else:
            for job in jobs:
                await _delete(api, f"{ns.batch.path}/{job['metadata']['name']}")
            await _delete(api, f"{SERVICES.format(ns=ns.name)}/{name}")
        if not ns.live:
            return  # no cache holds it: the next describe GETs it (gone)
        # the cache learns of it from its watch: wait (bounded) so that a
        # describe() right after delete() answers None. A stale cache (its
        # re-list refused) has no watch: lookups GET the objects meanwhile
        with anyio.move_on_after(_DELETE_SETTLE):
            while not informer.stale:
                changed = informer.changes.changed(key)
                if not [j for j in informer.with_key(key) if not _deleting(j)]:
                    break
                await changed.wait()

    # -- logs ------------------------------------------------------------------

    def _check_app_id(self, app_id: str) -> None:
        """A malformed app id is refused at once (before any request).

        Raises:
            InvalidArgumentError: the id is not ``namespace:name`` (or a bare
                name) with Kubernetes names.
        """
        split_app_id(app_id)

    async def _log_iter(self, app: AppSnapshot, query: LogQuery) -> AsyncIterator[str]:
        role_name, k = query.role_name, query.k
        app_id = app.app_id
        kind, ns, jobs = app.native
        if query.should_tail and not ns.live and is_managed(jobs[0]):
            # following waits on the pods cache: start the namespace's caches
            await self._watch(ns.name)
            found = await self._lookup(app_id)
            if found is None:
                return
            kind, ns, jobs = found
        role_label = sanitize_label_value(role_name)
        namespace = ns.name
        key = f"{namespace}:{_app_key(jobs[0])}"

        def find_pod() -> JSON | None:
            pods = [
                p
                for p in ns.pods.with_key(key)
                if _labels(p).get(LABEL_ROLE_NAME) == role_label
                and (
                    _labels(p).get(LABEL_REPLICA_ID) == str(k)
                    if kind == "volcano"
                    else completion_index(p) == k
                )
            ]
            pods.sort(key=lambda p: str(p["metadata"].get("creationTimestamp") or ""))
            return pods[-1] if pods else None

        async def app_over() -> bool:
            current = await self._describe(app_id)
            return current is None or current.terminal

        pod = find_pod()
        while pod is None:
            if not query.should_tail or await app_over():
                return
            changed = self.changed(key)
            if (pod := find_pod()) is None:
                await changed.wait()
                pod = find_pod()
        pod_name = pod["metadata"]["name"]

        async def pod_done() -> bool:
            current = ns.pods.get(pod_name)
            if current is None:
                return True
            phase = (current.get("status") or {}).get("phase")
            return phase in ("Succeeded", "Failed") or await app_over()

        container = main_container(pod)

        async def wait_started() -> bool:
            """Sleep on the pods cache until the container started (True), or
            the pod ended without it (False): no polling of pods/log."""
            while True:
                changed = self.changed(key)
                current = ns.pods.get(pod_name)
                if current is None:
                    return False
                if has_log(current, container) or ns.pods.stale:
                    return True  # (a stale cache may miss the start: ask)
                if await pod_done():
                    return False
                with anyio.move_on_after(_LOG_START_RECHECK):
                    await changed.wait()

        lines = iter_pod_log(
            await self._api(),
            namespace,
            pod_name,
            # a sidecar (an overlay's, a mesh's) makes the server ask which one
            container=container,
            wait_started=wait_started,
            since=query.since,
            until=query.until,
            follow=query.should_tail,
            pod_done=pod_done,
            idle_timeout=self._log_idle_timeout,
            max_line_bytes=self.max_line_bytes,
        )
        async with aclosing(lines):  # closing this iterator releases the response
            async for line in lines:
                yield line


def _scoped(
    scope: anyio.CancelScope, run: Callable[..., Awaitable[None]]
) -> Callable[..., Coroutine[Any, Any, None]]:
    """``run`` inside ``scope`` (cancelled with its siblings if one fails)."""

    async def runner(*, task_status: TaskStatus[None]) -> None:
        with scope:
            await run(task_status=task_status)

    return runner


def _docker_modules() -> tuple[Any, Any]:
    """aiodocker and the shared image build/push module (the docker extra)."""
    try:
        import aiodocker

        from asyncsched.schedulers.shared import images
    except ImportError as exc:
        raise SchedulerUnavailableError(
            BACKEND,
            "building or pushing local images needs aiodocker",
            "pip install 'asyncsched[docker]'",
        ) from exc
    return aiodocker, images


def _warn_if_ttl_dropped(manifest: JSON, created: JSON) -> None:
    """Say so when the server dropped ``ttlSecondsAfterFinished`` (Kubernetes
    1.20 without the TTLAfterFinished feature gate): the job will be kept."""
    wanted = (manifest.get("spec") or {}).get("ttlSecondsAfterFinished")
    if wanted is None or "ttlSecondsAfterFinished" in (created.get("spec") or {}):
        return
    logger.warning(
        "the API server dropped ttlSecondsAfterFinished from %s %s (on Kubernetes"
        " 1.20 the TTLAfterFinished feature gate is off by default): it will not be"
        " deleted after it finished",
        manifest.get("kind"),
        (manifest.get("metadata") or {}).get("name"),
    )


def _deleting(job: JSON) -> bool:
    return bool((job.get("metadata") or {}).get("deletionTimestamp"))


def _is_volcano(manifest: JSON) -> bool:
    return str(manifest.get("apiVersion", "")).startswith("batch.volcano.sh/")


def _check_allowed(ns: _Namespace) -> None:
    if ns.volcano.denied and ns.batch.denied:
        raise SchedulerUnavailableError(
            BACKEND,
            f"not allowed to list Volcano jobs nor batch jobs in {ns.name!r}",
            "grant the RBAC Role in docs/backends/kubernetes.md",
        )


def _unfinished(job: JSON) -> bool:
    """A role Job neither finished (Complete/Failed) nor suspended."""
    if (job.get("spec") or {}).get("suspend"):
        return False
    conditions = (job.get("status") or {}).get("conditions") or []
    return not any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in conditions
    )


def _labels(obj: JSON) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _describe(
    app_id: str, kind: str, ns: _Namespace, jobs: builtins.list[JSON]
) -> AppSnapshot:
    key = f"{ns.name}:{_app_key(jobs[0])}"
    pods = ns.pods.with_key(key)
    deleted = ns.pods.deleted_with_key(key)
    expired = expired_state(jobs)
    if expired is not None:  # expired from the cache: its name and final state
        snapshot = AppSnapshot(
            app_id, [], name=_labels(jobs[0]).get(LABEL_APP_NAME, ""), decided=expired
        )
    elif kind == "volcano":
        snapshot = describe_volcano(app_id, jobs[0], pods, deleted)
    else:
        snapshot = describe_indexed(app_id, jobs, pods, deleted)
    snapshot.change_key = f"{ns.name}:{_app_key(jobs[0])}"
    snapshot.native = (kind, ns, jobs)
    return snapshot


def _collection(manifest: JSON, namespace: str) -> str:
    api_version, kind = manifest["apiVersion"], manifest["kind"]
    if _is_volcano(manifest):
        return VOLCANO_JOBS.format(ns=namespace)
    if kind == "Service":
        return SERVICES.format(ns=namespace)
    if kind == "Job":
        return BATCH_JOBS.format(ns=namespace)
    raise SubmitError(f"cannot create a {api_version} {kind}")


async def _delete(api: KubeApi, path: str) -> None:
    try:
        await api.request(
            "DELETE",
            path,
            body={
                "kind": "DeleteOptions",
                "apiVersion": "v1",
                "propagationPolicy": "Background",
            },
        )
    except KubernetesApiError as exc:
        if exc.status != 404:
            raise


def create_scheduler(session_name: str, **kwargs: Any) -> KubernetesScheduler:
    """Registry factory; unknown keyword arguments are ignored.

    Known ones: ``client``, ``docker_client``, ``kubeconfig``, ``context``,
    ``namespace``, ``qps``, ``burst``, ``max_qps``, ``max_hold``, ``max_retries``,
    ``resync``,
    ``watch_timeout``, ``log_idle_timeout``, ``max_line_bytes``,
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
        "log_idle_timeout",
        "max_line_bytes",
        "connect_timeout",
        "request_timeout",
    }
    return KubernetesScheduler(
        session_name, **{k: v for k, v in kwargs.items() if k in known}
    )
