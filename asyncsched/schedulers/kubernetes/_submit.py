"""Submitting an app: the dry run's manifests, then creating them all or none.

:func:`validate_manifests` asks the server to check the manifests without
creating them (``dryRun=All``). :func:`manifests_for` fits them to the
server (Indexed Jobs refused where the server has none, optional Job fields
dropped where it does not know them). :func:`create_all` creates them in
order with the kit's :func:`~asyncsched.schedulers.kit.all_or_nothing`: if a
later one fails, or the submit is cancelled, the earlier ones are deleted
(shielded, within :data:`UNDO_TIMEOUT` seconds).

Example:
    >>> async def main(api: KubeApi, job: KubernetesJob) -> None:
    ...     await create_all(api, job, await manifests_for(api, job), caches=None)
"""

from __future__ import annotations

import copy
import functools
import logging

from asyncsched.errors import SubmitError
from asyncsched.schedulers.kit import all_or_nothing
from asyncsched.schedulers.kubernetes._caches import BATCH_JOBS, VOLCANO_JOBS, Caches
from asyncsched.schedulers.kubernetes._client import KubeApi
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
from asyncsched.schedulers.kubernetes._found import labels
from asyncsched.schedulers.kubernetes._gate import KubernetesApiError
from asyncsched.schedulers.kubernetes._indexed import fit_to_server
from asyncsched.schedulers.kubernetes._json import JSON
from asyncsched.schedulers.kubernetes._render import KubernetesJob

__all__ = (
    "SERVICES",
    "UNDO_TIMEOUT",
    "collection",
    "create_all",
    "delete_object",
    "manifests_for",
    "validate_manifests",
)

logger = logging.getLogger(__name__)

SERVICES = "/api/v1/namespaces/{ns}/services"
#: seconds a failed submit may spend deleting what it created
UNDO_TIMEOUT = 60.0


async def validate_manifests(api: KubeApi, job: KubernetesJob) -> None:
    """A server-side dry run of each manifest (``dryRun=All``).

    Raises:
        SubmitError: the server refused one (its message says why).
    """
    for manifest in job.manifests:
        try:
            await api.request(
                "POST",
                collection(manifest, job.namespace),
                query={"dryRun": "All", **await create_query(api)},
                body=manifest,
            )
        except KubernetesApiError as exc:
            raise SubmitError(
                f"invalid job spec ({manifest['kind']} "
                f"{manifest['metadata']['name']}): {exc.message}"
            ) from exc


async def manifests_for(api: KubeApi, job: KubernetesJob) -> list[JSON]:
    """``job``'s manifests as this server takes them (a copy if changed).

    Raises:
        InvalidRunConfigException: Indexed Jobs on a server without them
            (Kubernetes < 1.21).
    """
    manifests = job.manifests
    if any(is_indexed_job(m) for m in manifests):
        await check_indexed_jobs(api)
        version = await job_api_version(api)
        manifests = copy.deepcopy(manifests)
        for manifest in manifests:
            if is_indexed_job(manifest):
                fit_to_server(manifest, version)
    return manifests


async def create_all(
    api: KubeApi, job: KubernetesJob, manifests: list[JSON], caches: Caches | None
) -> None:
    """Create ``manifests`` in order, all or none; file the Jobs in ``caches``.

    Raises:
        SubmitError: the server rejected a manifest (409: the name is taken);
            what was created before it is deleted.
        InvalidRunConfigException: the server dropped ``completionMode``
            (Indexed Jobs off); what was created is deleted.
    """
    # a refused create made nothing (and a 409 names someone else's
    # object); a cancelled or lost one may have landed: it is deleted too.
    # Bounded: a hung API server must not hang the failed submit
    async with all_or_nothing(job.app_id, undo_within=UNDO_TIMEOUT) as steps:
        for manifest in manifests:
            where = collection(manifest, job.namespace)
            path = f"{where}/{manifest['metadata']['name']}"
            obj = await steps.create(
                functools.partial(_create, api, where, manifest),
                undo=functools.partial(delete_object, api, path),
                name=path,
                refusals=(SubmitError,),
            )
            if dropped_completion_mode(manifest, obj):
                raise no_indexed_jobs((await server_version(api))[0])
            _warn_if_ttl_dropped(manifest, obj)
            if manifest["kind"] == "Job" and caches is not None:
                target = caches.volcano if _is_volcano(manifest) else caches.batch
                target.upsert(obj)


async def _create(api: KubeApi, path: str, manifest: JSON) -> JSON:
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
            mine = await _created_by_this_submit(api, path, manifest)
            if mine is not None:
                return mine
        namespace = path.split("/namespaces/", 1)[-1].split("/", 1)[0]
        raise create_error(exc, manifest, namespace) from exc


async def _created_by_this_submit(
    api: KubeApi, path: str, manifest: JSON
) -> JSON | None:
    """The existing object, when its labels say it is this very app."""
    try:
        existing: JSON = await api.request(
            "GET", f"{path}/{manifest['metadata']['name']}"
        )
    except KubernetesApiError:
        return None
    wanted = labels(manifest)
    if wanted and all(labels(existing).get(k) == v for k, v in wanted.items()):
        return existing
    return None


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


def _is_volcano(manifest: JSON) -> bool:
    return str(manifest.get("apiVersion", "")).startswith("batch.volcano.sh/")


def collection(manifest: JSON, namespace: str) -> str:
    """The API path a manifest is created under.

    Raises:
        SubmitError: not a Volcano Job, a batch Job or a Service.
    """
    api_version, kind = manifest["apiVersion"], manifest["kind"]
    if _is_volcano(manifest):
        return VOLCANO_JOBS.format(ns=namespace)
    if kind == "Service":
        return SERVICES.format(ns=namespace)
    if kind == "Job":
        return BATCH_JOBS.format(ns=namespace)
    raise SubmitError(f"cannot create a {api_version} {kind}")


async def delete_object(api: KubeApi, path: str) -> None:
    """Delete the object at ``path`` (its dependents in the background); a 404 is fine."""
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
