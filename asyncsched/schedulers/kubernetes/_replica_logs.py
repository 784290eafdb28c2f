"""One replica's log: find its pod in the caches, wait for it, read or follow it.

Beside :mod:`._logs` (the pod log over HTTP), this module knows which pod
is replica ``k`` of a role (Volcano: its replica-id label; Indexed Jobs:
its completion index; the newest one when a replica was retried) and waits
on the pods cache, not by polling: for the pod to appear, for its container
to start, and for the pod to end.

Example:
    >>> async def main(logs: ReplicaLogs, found: Found, query: LogQuery) -> None:
    ...     async for line in logs.lines("team:trainer-x1", found, query, app_over):
    ...         print(line, end="")
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import KW_ONLY, dataclass

import anyio

from asyncsched.schedulers.kit import LogQuery
from asyncsched.schedulers.kubernetes._connector import Connector
from asyncsched.schedulers.kubernetes._found import Found, labels
from asyncsched.schedulers.kubernetes._job_names import (
    LABEL_REPLICA_ID,
    LABEL_ROLE_NAME,
    sanitize_label_value,
)
from asyncsched.schedulers.kubernetes._json import JSON
from asyncsched.schedulers.kubernetes._logs import has_log, iter_pod_log
from asyncsched.schedulers.kubernetes._lookup import is_managed
from asyncsched.schedulers.kubernetes._registry import NamespaceRegistry
from asyncsched.schedulers.kubernetes._state import completion_index, main_container

__all__ = ("ReplicaLogs",)

#: seconds a log follow waiting for its container re-reads the cache anyway
_LOG_START_RECHECK = 30.0


@dataclass
class ReplicaLogs:
    """Replicas' logs over one connection, waiting on the namespaces' caches.

    ``changed(key)`` is the scheduler's change signal of an app.
    """

    _connector: Connector
    _registry: NamespaceRegistry
    _changed: Callable[[str], anyio.Event]
    _: KW_ONLY
    idle_timeout: float | None
    max_line_bytes: int

    async def lines(
        self,
        app_id: str,
        found: Found,
        query: LogQuery,
        app_over: Callable[[], Awaitable[bool]],
    ) -> AsyncGenerator[str, None]:
        """The lines of ``query``'s replica; ``app_over()``: the app is finished."""
        role_name, k = query.role_name, query.k
        if query.should_tail and not found.caches.live and is_managed(found.jobs[0]):
            # following waits on the pods cache: start the namespace's caches
            await self._registry.watch(found.caches.name)
            again = await self._registry.lookup(app_id)
            if again is None:
                return
            found = again
        ns, kind = found.caches, found.job_api
        role_label = sanitize_label_value(role_name)
        key = found.key

        def find_pod() -> JSON | None:
            pods = [
                p
                for p in ns.pods.with_key(key)
                if labels(p).get(LABEL_ROLE_NAME) == role_label
                and (
                    labels(p).get(LABEL_REPLICA_ID) == str(k)
                    if kind == "volcano"
                    else completion_index(p) == k
                )
            ]
            pods.sort(key=lambda p: str(p["metadata"].get("creationTimestamp") or ""))
            return pods[-1] if pods else None

        pod = find_pod()
        while pod is None:
            if not query.should_tail or await app_over():
                return
            changed = self._changed(key)
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
                changed = self._changed(key)
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
            await self._connector.connect(),
            ns.name,
            pod_name,
            query,
            # a sidecar (an overlay's, a mesh's) makes the server ask which one
            container=container,
            wait_started=wait_started,
            pod_done=pod_done,
            idle_timeout=self.idle_timeout,
            max_line_bytes=self.max_line_bytes,
        )
        async with aclosing(lines):  # closing this iterator releases the response
            async for line in lines:
                yield line
