"""One app as the caches (or a read from the server) found it, and its snapshot.

:class:`Found` names the three things every hook needs of an app: which Job
API runs it, the namespace's caches it is filed in, and its Jobs. It is also
the ``native`` of the :class:`~asyncsched.schedulers.kit.AppSnapshot` that
``describe`` hands back, so ``cancel`` and ``log_iter`` read it by name.

Example:
    >>> found = Found("volcano", caches, [job])  # doctest: +SKIP
    >>> snapshot_of("team:trainer-x1", found).native is found  # doctest: +SKIP
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from asyncsched.errors import SchedulerError
from asyncsched.schedulers.kit import AppSnapshot
from asyncsched.schedulers.kubernetes._caches import Caches, app_key, expired_state
from asyncsched.schedulers.kubernetes._job_names import LABEL_APP_NAME
from asyncsched.schedulers.kubernetes._json import JSON
from asyncsched.schedulers.kubernetes._resumable import version_number
from asyncsched.schedulers.kubernetes._state import (
    describe_indexed,
    describe_volcano,
    volcano_pods_unseen,
)

__all__ = (
    "Found",
    "JobApi",
    "deleting",
    "found_of",
    "labels",
    "pods_behind",
    "snapshot_of",
)

#: how the app runs: one Volcano Job, or one Indexed Job per role
JobApi = Literal["volcano", "indexed"]


@dataclass(frozen=True)
class Found:
    """An app's Job API, the caches of its namespace, and its Jobs."""

    job_api: JobApi
    caches: Caches
    jobs: list[JSON]

    @property
    def key(self) -> str:
        """``namespace:name``, what the caches file the app's objects under."""
        return f"{self.caches.name}:{app_key(self.jobs[0])}"


def found_of(snapshot: AppSnapshot) -> Found:
    """The :class:`Found` a Kubernetes snapshot carries as its ``native``."""
    native = snapshot.native
    if not isinstance(native, Found):
        raise SchedulerError(f"{snapshot.app_id}: not a Kubernetes app's snapshot")
    return native


def deleting(job: JSON) -> bool:
    """The object is being deleted (``deletionTimestamp`` set)."""
    return bool((job.get("metadata") or {}).get("deletionTimestamp"))


def labels(obj: JSON) -> dict[str, str]:
    """The object's labels (empty when it has none)."""
    return dict((obj.get("metadata") or {}).get("labels") or {})


def snapshot_of(app_id: str, found: Found) -> AppSnapshot:
    """The app's snapshot from the caches' Jobs and pods; ``native`` is ``found``."""
    ns, jobs = found.caches, found.jobs
    key = found.key
    pods = ns.pods.with_key(key)
    deleted = ns.pods.deleted_with_key(key)
    expired = expired_state(jobs)
    if expired is not None:  # expired from the cache: its name and final state
        snapshot = AppSnapshot(
            app_id, [], name=labels(jobs[0]).get(LABEL_APP_NAME, ""), decided=expired
        )
    elif found.job_api == "volcano":
        snapshot = describe_volcano(app_id, jobs[0], pods, deleted)
    else:
        snapshot = describe_indexed(app_id, jobs, pods, deleted)
    snapshot.change_key = key
    snapshot.native = found
    return snapshot


def pods_behind(found: Found) -> bool:
    """True when the pods cache has not caught up with the app's Job yet.

    The Job's status is written after the pod changes it counts, and the two
    come on separate watches: a Volcano Job that counts an ended pod
    (``taskStatusCount``) of a task the cache shows no pod of is ahead of
    the pods cache -- unless that cache's version is past the
    Job's already (then what it shows is the truth: the pod was deleted).
    A cache that is not live (a one-shot read: the pods listed after the
    Job) is never behind.
    """
    ns = found.caches
    if not ns.live or found.job_api != "volcano" or expired_state(found.jobs):
        return False
    job = found.jobs[0]
    pods_at = version_number(ns.pods.resource_version)
    job_at = version_number(str((job.get("metadata") or {}).get("resourceVersion")))
    if pods_at is not None and job_at is not None and pods_at >= job_at:
        return False
    key = found.key
    return volcano_pods_unseen(
        job, ns.pods.with_key(key), ns.pods.deleted_with_key(key)
    )
