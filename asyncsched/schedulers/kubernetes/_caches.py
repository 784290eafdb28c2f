"""The three caches of one namespace (Volcano Jobs, batch Jobs, pods).

Each is an :class:`~._informer.Informer` that keeps only the fields status
reads (:func:`~._slim.slim`). Finished apps do not stay there for ever:
:meth:`Caches.sweep` replaces the Jobs of an app finished for longer than the
retention by small stubs (name, labels, final state: enough for ``list``)
and drops its pods; ``describe`` of such an app reads it from the server
again. A stub is replaced by the whole object as soon as the server reports
a change of it (a restarted app is cached in full again), and goes away with
the Job (a DELETED event, or a re-list without it).

Example:
    >>> async def main(api: KubeApi, changes: ChangeNotifier) -> None:
    ...     ns = Caches(api, "team", changes=changes, live=False)
    ...     print(ns.pods.path)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from asyncsched.schedulers.kit import ChangeNotifier
from asyncsched.schedulers.kubernetes._client import KubeApi
from asyncsched.schedulers.kubernetes._informer import (
    ANSWER_TIMEOUT,
    DEFAULT_PAGE_SIZE,
    Informer,
)
from asyncsched.schedulers.kubernetes._job_names import (
    LABEL_APP_ID,
    LABEL_MANAGED_BY,
    MANAGED_BY,
)
from asyncsched.schedulers.kubernetes._json import JSON
from asyncsched.schedulers.kubernetes._slim import slim
from asyncsched.schedulers.kubernetes._state import volcano_state
from asyncsched.specs import AppState, is_terminal

__all__ = [
    "BATCH_JOBS",
    "PODS",
    "SELECTOR",
    "VOLCANO_JOBS",
    "Caches",
    "WatchSettings",
    "app_key",
    "expired_state",
]

VOLCANO_JOBS = "/apis/batch.volcano.sh/v1alpha1/namespaces/{ns}/jobs"
BATCH_JOBS = "/apis/batch/v1/namespaces/{ns}/jobs"
PODS = "/api/v1/namespaces/{ns}/pods"
SELECTOR = f"{LABEL_MANAGED_BY}={MANAGED_BY}"
#: deleted pods whose last status the pods cache remembers (per namespace):
#: the exit codes of replicas stopped by a cancel, whose pods are deleted
KEEP_DELETED_PODS = 1024
#: the key a stub carries its app's final state under (never sent anywhere)
_EXPIRED = "asyncsched.expired"


def app_key(obj: JSON) -> str:
    """The app name an object belongs to (its app-id label, else its name)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return str(labels.get(LABEL_APP_ID) or obj["metadata"]["name"])


def expired_state(jobs: list[JSON]) -> AppState | None:
    """The final state kept by a stub among ``jobs``; None when all are whole."""
    for job in jobs:
        state = job.get(_EXPIRED)
        if state is not None:
            return AppState[str(state)]
    return None


def job_done(job: JSON) -> bool:
    """A Job (either kind) that will not change any more by itself."""
    if str(job.get("apiVersion", "")).startswith("batch.volcano.sh/") or (
        "tasks" in (job.get("spec") or {})
    ):
        return is_terminal(volcano_state(job))
    if (job.get("spec") or {}).get("suspend"):
        return True
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in conditions
    )


def _stub(job: JSON, state: AppState) -> JSON:
    meta = job.get("metadata") or {}
    kept = ("name", "namespace", "resourceVersion", "labels", "deletionTimestamp")
    return {
        "apiVersion": job.get("apiVersion", ""),
        "kind": job.get("kind", ""),
        "metadata": {k: meta[k] for k in kept if k in meta},
        _EXPIRED: state.name,
    }


@dataclass
class WatchSettings:
    """How a namespace's caches list and watch (see :class:`Informer`)."""

    resync: float = 600.0
    watch_timeout: int = 290
    answer_timeout: float = ANSWER_TIMEOUT
    page_size: int = DEFAULT_PAGE_SIZE


class Caches:
    """The caches of ``namespace``; ``live`` ones run (list+watch).

    ``informer`` is the class of the three caches (the event source passes
    one that resumes from a cursor's versions).

    A one-shot lookup fills caches that are never started (``live=False``):
    they hold what a few GETs answered, for one answer.
    """

    def __init__(
        self,
        api: KubeApi,
        namespace: str,
        *,
        changes: ChangeNotifier,
        live: bool,
        settings: WatchSettings | None = None,
        informer: type[Informer] = Informer,
    ) -> None:
        self.name = namespace
        self.live = live
        #: apps whose Jobs are stubs: their final state
        self.expired: dict[str, AppState] = {}
        #: when each finished app was first seen finished (monotonic)
        self.finished_at: dict[str, float] = {}
        given = settings if settings is not None else WatchSettings()
        kwargs: dict[str, Any] = {
            "key": self.key,
            "changes": changes,
            "resync": given.resync,
            "watch_timeout": given.watch_timeout,
            "answer_timeout": given.answer_timeout,
            "page_size": given.page_size,
        }

        def jobs(path: str) -> Informer:
            # either job kind may be off limits (RBAC for the one in use)
            return informer(
                api, path, SELECTOR, optional=True, slim=self._slim_job, **kwargs
            )

        self.volcano = jobs(VOLCANO_JOBS.format(ns=namespace))
        self.batch = jobs(BATCH_JOBS.format(ns=namespace))
        self.pods = informer(
            api,
            PODS.format(ns=namespace),
            SELECTOR,
            slim=slim,
            admit=self._admit_pod,
            keep_deleted=KEEP_DELETED_PODS,
            **kwargs,
        )

    def key(self, obj: JSON) -> str:
        """The informers' key: the app id ``namespace:name`` (what changes signal)."""
        return f"{self.name}:{app_key(obj)}"

    @property
    def informers(self) -> tuple[Informer, Informer, Informer]:
        return self.volcano, self.batch, self.pods

    def is_expired(self, key: str) -> bool:
        """True when the app ``key`` is cached as stubs only."""
        return key in self.expired

    # -- hooks of the informers ------------------------------------------------

    def _slim_job(self, job: JSON) -> JSON:
        key = self.key(job)
        state = self.expired.get(key)
        if state is not None:
            if job_done(job):
                return _stub(job, state)  # a re-list does not bring it back whole
            del self.expired[key]  # it runs again: keep all of it again
            self.finished_at.pop(key, None)
        return slim(job)

    def _admit_pod(self, pod: JSON) -> bool:
        return self.key(pod) not in self.expired

    # -- expiry ------------------------------------------------------------------

    def sweep(
        self,
        retention: float,
        state_of: Callable[[str, list[JSON]], AppState],
        now: float | None = None,
    ) -> int:
        """Expire the apps finished for more than ``retention`` seconds.

        ``state_of(kind, jobs)`` gives an app's final state (kept by its stubs).
        Returns how many apps were expired.
        """
        return sum(self.sweep_steps(retention, state_of, now))

    def sweep_steps(
        self,
        retention: float,
        state_of: Callable[[str, list[JSON]], AppState],
        now: float | None = None,
        batch: int = 256,
    ) -> Iterator[int]:
        """:meth:`sweep` in steps of ``batch`` apps; yields each step's count.

        The caller may let other tasks run between steps (10,000 apps are a
        0.1 s pass): each app is read from the caches when its turn comes, so
        a change made meanwhile is never undone.
        """
        now = time.monotonic() if now is None else now
        keys = set(self.volcano.by_key) | set(self.batch.by_key)
        for key in [k for k in self.finished_at if k not in keys]:
            del self.finished_at[key]
        for key in [k for k in self.expired if k not in keys]:
            del self.expired[key]
        count = 0
        for done, key in enumerate(keys, 1):
            count += self._sweep_one(key, retention, state_of, now)
            if done % batch == 0:
                yield count
                count = 0
        yield count

    def _sweep_one(
        self,
        key: str,
        retention: float,
        state_of: Callable[[str, list[JSON]], AppState],
        now: float,
    ) -> int:
        if key in self.expired:
            return 0
        named = self.volcano.by_key.get(key)
        if named:
            kind, jobs = "volcano", list(named.values())[-1:]
        else:
            named = self.batch.by_key.get(key)
            if not named:  # deleted since the sweep began
                return 0
            kind, jobs = "indexed", list(named.values())
        if not all(job_done(j) for j in jobs):
            self.finished_at.pop(key, None)
            return 0
        since = self.finished_at.setdefault(key, now)
        if now - since < retention:
            return 0
        self._expire(key, kind, jobs, state_of(kind, jobs))
        return 1

    def _expire(self, key: str, kind: str, jobs: list[JSON], state: AppState) -> None:
        self.expired[key] = state
        informer = self.volcano if kind == "volcano" else self.batch
        for job in jobs:
            informer.put(job["metadata"]["name"], _stub(job, state))
        for pod in self.pods.with_key(key):
            self.pods.discard(pod["metadata"]["name"])
        self.pods.forget_deleted(key)
