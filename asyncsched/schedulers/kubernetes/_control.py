"""Stopping and deleting apps: abort a Volcano Job, suspend Indexed Jobs, delete.

``cancel`` keeps the app readable: a Volcano Job is aborted, each role's
Indexed Job suspended (its pods are deleted, the Job and its status stay).
When one role's Job of an indexed app failed, :func:`suspend_unfinished`
stops the others, which would hold their nodes for nothing. :func:`delete`
removes the app's objects and waits (bounded) for the caches to see them go.

Example:
    >>> async def main(control: Control, found: Found) -> None:
    ...     await control.cancel(found, terminal=False)
"""

from __future__ import annotations

import logging

import anyio

from asyncsched.errors import SchedulerUnavailableError
from asyncsched.schedulers.kubernetes._caches import app_key
from asyncsched.schedulers.kubernetes._client import MERGE_PATCH_CT
from asyncsched.schedulers.kubernetes._connector import Connector
from asyncsched.schedulers.kubernetes._found import Found, deleting
from asyncsched.schedulers.kubernetes._gate import KubernetesApiError
from asyncsched.schedulers.kubernetes._job_names import ANNOTATION_CANCELLED
from asyncsched.schedulers.kubernetes._json import JSON
from asyncsched.schedulers.kubernetes._registry import NamespaceRegistry
from asyncsched.schedulers.kubernetes._submit import SERVICES, delete_object

__all__ = ("ANNOTATION_STOPPED", "Control")

logger = logging.getLogger(__name__)

#: marks a role Job suspended because another role's Job failed
ANNOTATION_STOPPED = "asyncsched.io/stopped-after-failure"
#: how long delete() waits for its watch to report the Job(s) gone
_DELETE_SETTLE = 10.0


class Control:
    """Cancel, stop after a failure, and delete, over one connection."""

    def __init__(self, connector: Connector, registry: NamespaceRegistry) -> None:
        self._connector = connector
        self._registry = registry

    async def cancel(self, found: Found, *, terminal: bool) -> None:
        """Abort the app (a finished one: only its roles still running)."""
        ns, jobs = found.caches, found.jobs
        if terminal:
            if found.job_api == "indexed":  # a failed app may have roles running
                await self.suspend_unfinished(found, cancelled=False)
            return
        ns = await self._registry.watch_stopping(ns)
        api = await self._connector.connect()
        if found.job_api == "volcano":
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

    async def suspend_unfinished(self, found: Found, *, cancelled: bool) -> None:
        """Suspend the role Jobs still running (their pods are deleted)."""
        api = await self._connector.connect()
        ns = found.caches
        watched = False
        for job in found.jobs:
            if not _unfinished(job):
                continue
            if not watched:
                watched = True
                ns = await self._registry.watch_stopping(ns)
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

    async def delete(self, found: Found) -> None:
        """Delete the app's Job(s) (and Service); wait for the caches to see it."""
        ns, jobs = found.caches, found.jobs
        api = await self._connector.connect()
        name = app_key(jobs[0])
        informer = ns.volcano if found.job_api == "volcano" else ns.batch
        key = informer.key(jobs[0])  # what the cache files the app's Jobs under
        if found.job_api == "volcano":
            await delete_object(api, f"{ns.volcano.path}/{jobs[0]['metadata']['name']}")
        else:
            for job in jobs:
                await delete_object(api, f"{ns.batch.path}/{job['metadata']['name']}")
            await delete_object(api, f"{SERVICES.format(ns=ns.name)}/{name}")
        if not ns.live:
            return  # no cache holds it: the next describe GETs it (gone)
        # the cache learns of it from its watch: wait (bounded) so that a
        # describe() right after delete() answers None. A stale cache (its
        # re-list refused) has no watch: lookups GET the objects meanwhile
        with anyio.move_on_after(_DELETE_SETTLE):
            while not informer.stale:
                changed = informer.changes.changed(key)
                if not [j for j in informer.with_key(key) if not deleting(j)]:
                    break
                await changed.wait()


def _unfinished(job: JSON) -> bool:
    """A role Job neither finished (Complete/Failed) nor suspended."""
    if (job.get("spec") or {}).get("suspend"):
        return False
    conditions = (job.get("status") or {}).get("conditions") or []
    return not any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in conditions
    )
