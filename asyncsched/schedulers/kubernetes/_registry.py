"""The namespaces' watch caches of one scheduler, and finding an app in them.

A :class:`NamespaceRegistry` starts the caches of a namespace (Volcano Jobs,
batch Jobs, pods) the first time a ``wait``, ``list`` or followed log needs
them, all or none, and keeps them running until the scheduler closes; a
namespace whose caches failed to start answers the same error for a moment
before it is tried again. :meth:`NamespaceRegistry.lookup` finds an app: in
the running caches, else by reads from the server (:mod:`._lookup`), and
answers a :class:`~._found.Found` or None.

Example:
    >>> async def main(registry: NamespaceRegistry) -> None:
    ...     found = await registry.lookup("team:trainer-x1")
    ...     if found is not None:
    ...         print(found.job_api, len(found.jobs))
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
from anyio.abc import TaskStatus

from asyncsched.errors import SchedulerUnavailableError
from asyncsched.schedulers.kit import ChangeNotifier, TaskHost
from asyncsched.schedulers.kubernetes._caches import Caches, WatchSettings, app_key
from asyncsched.schedulers.kubernetes._client import KubeApi
from asyncsched.schedulers.kubernetes._connector import Connector
from asyncsched.schedulers.kubernetes._found import (
    Found,
    JobApi,
    deleting,
    snapshot_of,
)
from asyncsched.schedulers.kubernetes._gate import BACKEND
from asyncsched.schedulers.kubernetes._lookup import (
    read_once,
    read_stale,
    read_uncached,
    refresh_pods,
)
from asyncsched.schedulers.kubernetes._names import split_app_id

__all__ = (
    "DEFAULT_CACHE_RETENTION",
    "CacheSettings",
    "NamespaceRegistry",
    "check_allowed",
)

logger = logging.getLogger(__name__)

#: seconds a namespace whose caches failed to start answers that error again
_START_BACKOFF = 1.0
#: default seconds a finished app stays whole in the caches
DEFAULT_CACHE_RETENTION = 3600.0


@dataclass
class CacheSettings(WatchSettings):
    """How the caches list, watch and keep finished apps (see
    :class:`KubernetesScheduler`)."""

    retention: float | None = DEFAULT_CACHE_RETENTION


@dataclass(eq=False, repr=False)
class NamespaceRegistry:
    """The running caches of each namespace, started on first use."""

    _connector: Connector
    _tasks: TaskHost
    _changes: ChangeNotifier
    settings: CacheSettings
    _running: dict[str, Caches] = field(default_factory=dict, init=False)
    #: namespaces whose caches failed to start: (retry after, the error)
    _failed: dict[str, tuple[float, Exception]] = field(
        default_factory=dict, init=False
    )
    #: namespaces the scheduler submitted to (``list()`` shows them too)
    submitted_to: set[str] = field(default_factory=set, init=False)
    _lock: anyio.Lock = field(default_factory=anyio.Lock, init=False)

    def running(self, namespace: str) -> Caches | None:
        """The caches of ``namespace`` if they run."""
        return self._running.get(namespace)

    def caches(self, api: KubeApi, namespace: str, *, live: bool) -> Caches:
        """New caches of ``namespace`` over ``api`` (not started)."""
        return Caches(
            api, namespace, changes=self._changes, live=live, settings=self.settings
        )

    async def watch(self, namespace: str) -> Caches:
        """The running caches of ``namespace`` (started on first use)."""
        ns = self._running.get(namespace)
        if ns is not None:
            return ns
        api = await self._connector.connect()
        async with self._lock:
            ns = self._running.get(namespace)
            if ns is None:
                ns = self.caches(api, namespace, live=True)
                failed = self._failed.get(namespace)
                if failed is not None and time.monotonic() < failed[0]:
                    raise failed[1]  # failed a moment ago: no new requests yet
                scopes: list[anyio.CancelScope] = []
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
                if self.settings.retention is not None:
                    await self._tasks.start_soon(
                        self._sweep,
                        ns,
                        self.settings.retention,
                        name=f"kube-expire {namespace}",
                    )
                self._failed.pop(namespace, None)
                self._running[namespace] = ns
            return ns

    async def watch_app(self, app_id: str) -> None:
        """Start the caches of ``app_id``'s namespace.

        Raises:
            InvalidArgumentError: a malformed app id (before any request).
        """
        namespace, _ = split_app_id(app_id)
        await self._connector.connect()  # knows the default namespace once connected
        check_allowed(await self.watch(namespace or self._connector.home))

    async def watch_stopping(self, ns: Caches) -> Caches:
        """Start the caches of ``ns`` before stopping pods there, and return
        them: the pods' last status (their exit codes) arrives on the watch
        just before they are deleted, and the cache keeps it for ``wait``
        (a refused watch is logged: the stop goes on, ``ns`` is returned)."""
        if ns.live:
            return ns
        try:
            return await self.watch(ns.name)
        except Exception as exc:  # noqa: BLE001 -- the stop matters more
            logger.info("cannot watch %s while stopping pods: %s", ns.name, exc)
            return ns

    async def _sweep(self, ns: Caches, retention: float) -> None:
        """Expire the apps of ``ns`` finished for longer than ``retention`` s."""
        interval = min(max(retention / 4, 0.2), 60.0)
        while True:
            await anyio.sleep(interval)
            expired = 0
            steps = ns.sweep_steps(
                retention,
                lambda kind, jobs: (
                    snapshot_of(
                        f"{ns.name}:{app_key(jobs[0])}",
                        Found(cast(JobApi, kind), ns, jobs),
                    ).state
                ),
            )
            for count in steps:  # 10,000 apps in steps: the loop keeps running
                expired += count
                await anyio.lowlevel.checkpoint()
            if expired:
                logger.debug("%d finished apps expired from %s", expired, ns.name)

    async def lookup(self, app_id: str) -> Found | None:
        """The app, or None when it does not exist.

        An app whose Jobs are all being deleted (``deletionTimestamp`` set: a
        foreground delete waits for the garbage collector to remove the pods)
        is gone already.
        """
        found = await self._lookup_any(app_id)
        if found is None or all(deleting(job) for job in found.jobs):
            return None
        return found

    async def _lookup_any(self, app_id: str) -> Found | None:
        given, name = split_app_id(app_id)  # a malformed id: before any request
        api = await self._connector.connect()  # knows the default namespace
        namespace = given or self._connector.home
        ns = self._running.get(namespace)
        if ns is None:  # no cache runs here: one GET (or labelled list) will do
            return await self._lookup_once(namespace, name)
        check_allowed(ns)
        key = f"{namespace}:{name}"
        if ns.is_expired(key):  # only stubs are cached: read it anew
            return await self._lookup_once(namespace, name)
        if ns.volcano.stale or ns.batch.stale:
            return await read_stale(api, ns, name, key)
        job = ns.volcano.get(name)
        if job is not None:
            return Found("volcano", ns, [job])
        jobs = ns.batch.with_key(key)
        if jobs:
            return Found("indexed", ns, jobs)
        # not cached: made by another process a moment ago, or gone
        return await read_uncached(api, ns, name)

    async def _lookup_once(self, namespace: str, name: str) -> Found | None:
        """The app read from the server alone (no cache runs in ``namespace``)."""
        api = await self._connector.connect()
        return await read_once(api, self.caches(api, namespace, live=False), name)

    async def fresh_pods(self, found: Found) -> None:
        """While the pods cache is stale, read the app's pods into it by a list."""
        ns = found.caches
        if ns.live and ns.pods.stale:
            await refresh_pods(await self._connector.connect(), ns, found.jobs)


def check_allowed(ns: Caches) -> None:
    """Refuse a namespace where neither Job kind may be listed.

    Raises:
        SchedulerUnavailableError: RBAC allows neither list.
    """
    if ns.volcano.denied and ns.batch.denied:
        raise SchedulerUnavailableError(
            BACKEND,
            f"not allowed to list Volcano jobs nor batch jobs in {ns.name!r}",
            "grant the RBAC Role in docs/backends/kubernetes.md",
        )


def _scoped(
    scope: anyio.CancelScope, run: Callable[..., Awaitable[None]]
) -> Callable[..., Coroutine[Any, Any, None]]:
    """``run`` inside ``scope`` (cancelled with its siblings if one fails)."""

    async def runner(*, task_status: TaskStatus[None]) -> None:
        with scope:
            await run(task_status=task_status)

    return runner
