"""Reading one app from the server when the caches cannot answer alone.

A scheduler answers from its watch caches (:mod:`._caches`) when they run;
these functions read an app's Jobs and pods with GETs and labelled lists
instead, and file what they read in the given caches:

* :func:`read_once` -- no cache runs in the namespace (a one-shot
  ``describe``): a GET of the Volcano Job, else a labelled list of batch Jobs,
  then the app's pods;
* :func:`read_uncached` -- the caches run but do not hold the app (made by
  another process a moment ago, or gone);
* :func:`read_stale` -- a re-list failed: each object is read anew, and only
  a 404 on the object itself means it is gone;
* :func:`refresh_pods` -- the app's pods while the pods cache is stale.

Each returns a :class:`~._found.Found` (job API, caches, jobs) or None when the app
does not exist.

Example:
    >>> found = await read_once(api, caches, "team-a", "trainer-x1")  # doctest: +SKIP
"""

from __future__ import annotations

import logging

from asyncsched.errors import SchedulerUnavailableError
from asyncsched.schedulers.kubernetes._caches import SELECTOR, Caches, app_key
from asyncsched.schedulers.kubernetes._client import KubeApi, denied_error
from asyncsched.schedulers.kubernetes._found import Found
from asyncsched.schedulers.kubernetes._gate import BACKEND, KubernetesApiError
from asyncsched.schedulers.kubernetes._job_names import (
    LABEL_APP_ID,
    LABEL_MANAGED_BY,
    MANAGED_BY,
)
from asyncsched.schedulers.kubernetes._json import JSON
from asyncsched.schedulers.kubernetes._names import MAX_LABEL

__all__ = (
    "is_managed",
    "read_once",
    "read_pods",
    "read_stale",
    "read_uncached",
    "refresh_pods",
)

logger = logging.getLogger(__name__)


def is_managed(obj: JSON) -> bool:
    """Made by asyncsched (its ``managed-by`` label)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return bool(labels.get(LABEL_MANAGED_BY) == MANAGED_BY)


async def read_once(api: KubeApi, ns: Caches, name: str) -> Found | None:
    """App ``name`` read from the server alone, filed in caches that are never
    started (for this one answer).

    Raises:
        SchedulerUnavailableError: neither job kind may be read (or a 401).
    """
    volcano_denied: KubernetesApiError | None = None
    try:
        job = await api.request("GET", f"{ns.volcano.path}/{name}", map_denied=False)
    except KubernetesApiError as exc:
        if exc.status == 401:
            raise denied_error(exc) from exc
        if exc.status not in (403, 404):
            raise
        volcano_denied = exc if exc.status == 403 else None
    else:
        if is_managed(job):  # a job of someone else's is described, not cached
            ns.volcano.upsert(job)
            await read_pods(api, ns, name)
        return Found("volcano", ns, [job])
    if not _label_value(name):
        return None  # no indexed app has it
    try:
        data = await api.request(
            "GET",
            ns.batch.path,
            query={"labelSelector": f"{SELECTOR},{LABEL_APP_ID}={name}"},
            map_denied=False,
        )
    except KubernetesApiError as exc:
        if exc.status == 401:
            raise denied_error(exc) from exc
        if exc.status == 403 and volcano_denied is not None:
            raise SchedulerUnavailableError(
                BACKEND,
                f"not allowed to read Volcano jobs nor batch jobs in {ns.name!r}",
                "grant the RBAC Role in docs/backends/kubernetes.md",
            ) from exc
        if exc.status not in (403, 404):
            raise
        return None  # the kind one may not read, or no such kind here
    jobs = [j for j in (data or {}).get("items") or [] if is_managed(j)]
    if not jobs:
        return None
    for j in jobs:
        ns.batch.upsert(j)
    await read_pods(api, ns, name)
    return Found("indexed", ns, jobs)


async def read_pods(api: KubeApi, ns: Caches, name: str) -> None:
    """Read the pods of app ``name`` into ``ns`` by a labelled list."""
    data = await api.request(
        "GET",
        ns.pods.path,
        query={"labelSelector": f"{SELECTOR},{LABEL_APP_ID}={name}"},
    )
    for pod in (data or {}).get("items") or []:
        ns.pods.upsert(pod)


async def read_uncached(api: KubeApi, ns: Caches, name: str) -> Found | None:
    """App ``name``, which the running caches do not hold: a GET of its
    Volcano Job, else a labelled list of its batch Jobs (filed when ours)."""
    if not ns.volcano.absent:
        try:
            job = await api.request("GET", f"{ns.volcano.path}/{name}")
        except KubernetesApiError as exc:
            if exc.status != 404:
                raise
        else:
            if is_managed(job):  # a job of someone else's is described, not cached
                ns.volcano.upsert(job)
            return Found("volcano", ns, [job])
    if not ns.batch.absent and _label_value(name):
        data = await api.request(
            "GET", ns.batch.path, query={"labelSelector": f"{LABEL_APP_ID}={name}"}
        )
        jobs = [j for j in (data or {}).get("items") or [] if is_managed(j)]
        for j in jobs:
            ns.batch.upsert(j)
        if jobs:
            return Found("indexed", ns, jobs)
    return None


async def read_stale(api: KubeApi, ns: Caches, name: str, key: str) -> Found | None:
    """App ``name`` while a re-list failed: each object is read by a GET; only
    a 404 on the object itself means it is gone, another failure answers from
    the (stale) cache."""
    cached = ns.volcano.get(name)
    if cached is not None or not ns.volcano.absent:
        try:
            job = await api.request("GET", f"{ns.volcano.path}/{name}")
        except KubernetesApiError as exc:
            if exc.status != 404:
                if cached is None:
                    raise
                return Found("volcano", ns, [cached])
            ns.volcano.discard(name)
        else:
            if is_managed(job):
                ns.volcano.upsert(job)
            return Found("volcano", ns, [job])
    names = [j["metadata"]["name"] for j in ns.batch.with_key(key)]
    if not names:
        if ns.batch.absent or not _label_value(name):
            return None
        try:
            data = await api.request(
                "GET",
                ns.batch.path,
                query={"labelSelector": f"{LABEL_APP_ID}={name}"},
            )
        except (KubernetesApiError, SchedulerUnavailableError) as exc:
            if not ns.batch.stale:
                raise
            # the stale cache (which does not hold it) is the best answer
            logger.info("looking up %s failed: %s", key, exc)
            return None
        jobs = [j for j in (data or {}).get("items") or [] if is_managed(j)]
        for j in jobs:
            ns.batch.upsert(j)
        return Found("indexed", ns, jobs) if jobs else None
    jobs = []
    for cached_name in names:
        try:
            job = await api.request("GET", f"{ns.batch.path}/{cached_name}")
        except KubernetesApiError as exc:
            if exc.status != 404:
                kept = ns.batch.get(cached_name)
                if kept is not None:
                    jobs.append(kept)
                continue
            ns.batch.discard(cached_name)
        else:
            ns.batch.upsert(job)
            jobs.append(job)
    return Found("indexed", ns, jobs) if jobs else None


def _label_value(name: str) -> bool:
    """``name`` (a valid object name) can be a label value: an indexed app's
    name is one (its label selects its Jobs and pods); a longer Volcano Job
    name is never listed by label (the server would refuse the selector)."""
    return len(name) <= MAX_LABEL


async def refresh_pods(api: KubeApi, ns: Caches, jobs: list[JSON]) -> None:
    """While the pods cache is stale, read the app's pods into it by a list
    (a failure is logged: the stale cache stays the answer)."""
    name = app_key(jobs[0])
    try:
        data = await api.request(
            "GET", ns.pods.path, query={"labelSelector": f"{LABEL_APP_ID}={name}"}
        )
    except (KubernetesApiError, SchedulerUnavailableError) as exc:
        logger.info("reading the pods of %s failed: %s", name, exc)
        return
    for pod in (data or {}).get("items") or []:
        ns.pods.upsert(pod)
