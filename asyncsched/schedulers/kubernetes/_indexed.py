"""Indexed Jobs (``job_api=indexed``): one batch/v1 Job per role, no Volcano.

A headless Service gives rank 0 a stable hostname; each role is an Indexed
Job whose completion index is the replica id. There is no gang scheduling;
``queue`` becomes Kueue's queue-name label. The optional Job fields are
fitted to the server by :func:`fit_to_server`.

Example:
    >>> _kueue_labels({"queue": "team-a"})
    {'kueue.x-k8s.io/queue-name': 'team-a'}
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import Any

from asyncsched.errors import InvalidRunConfigException, SpecError
from asyncsched.schedulers.kubernetes._job_names import (
    COMPLETION_INDEX,
    LABEL_APP_ID,
    MAX_NAME,
    role_parts,
    sanitize_label_value,
)
from asyncsched.schedulers.kubernetes._pod import (
    ENV_IMAGE,
    RenderContext,
    env_list,
    replica_pod,
    set_ttl,
)
from asyncsched.schedulers.shared.identity import (
    ENV_REPLICA_ID,
    RANK0_ENV,
    identity_env,
)
from asyncsched.specs import AppDef, CfgVal, RetryPolicy, macros

__all__ = (
    "BACKOFF_PER_INDEX_SINCE",
    "LABEL_KUEUE_QUEUE",
    "POD_FAILURE_POLICY_SINCE",
    "fit_to_server",
    "indexed_jobs",
)

logger = logging.getLogger(__name__)

#: the label Kueue admits a batch/v1 Job by: the name of its LocalQueue
LABEL_KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
#: first Kubernetes versions whose Job API has these fields on by default
POD_FAILURE_POLICY_SINCE = (1, 26)
BACKOFF_PER_INDEX_SINCE = (1, 29)
# a preemption, an eviction or a node drain is not the replica's failure
_IGNORE_DISRUPTIONS = {
    "rules": [
        {
            "action": "Ignore",
            "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
        }
    ]
}


def indexed_jobs(ctx: RenderContext) -> list[dict[str, Any]]:
    app, cfg = ctx.app, ctx.cfg
    # pod hostnames are "{job}-{index}": the role part gets what the index leaves
    widest = max(len(str(r.num_replicas - 1)) for r in app.roles)
    parts = role_parts(app, MAX_NAME - len(ctx.name) - 1, widest + 1)
    role0_job = f"{ctx.name}-{parts[0]}"
    rank0_host = f"{role0_job}-0.{ctx.name}"
    manifests: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": ctx.name, "labels": ctx.job_labels()},
            "spec": {
                "clusterIP": "None",
                "publishNotReadyAddresses": True,
                "selector": {LABEL_APP_ID: ctx.name},
            },
        }
    ]
    index_ref = f"metadata.annotations['{COMPLETION_INDEX}']"
    _check_indexed_roles(app)
    job_labels = _kueue_labels(cfg)
    priority = cfg.get("priority_class")
    for role_index, role in enumerate(app.roles):
        if role.retry_policy == RetryPolicy.APPLICATION and role.max_retries > 0:
            logger.warning(
                "role %r: indexed Jobs retry failed replicas one by one"
                " (backoffLimit), not the whole app",
                role.name,
            )
        values = macros.Values(
            img_root="",
            app_id=ctx.name,
            replica_id=f"$({ENV_REPLICA_ID})",
            rank0_env=RANK0_ENV,
        )
        replica = values.apply(role)
        name = f"{ctx.name}-{parts[role_index]}"
        identity = identity_env(ctx.app_id, role.name, 0, role.num_replicas)
        env: list[dict[str, Any]] = [
            {
                "name": ENV_REPLICA_ID,
                "valueFrom": {"fieldRef": {"fieldPath": index_ref}},
            }
        ]
        env.extend(env_list(replica.env))
        env.append({"name": RANK0_ENV, "value": rank0_host})
        env.append({"name": ENV_IMAGE, "value": ctx.image(role)})
        env.extend(
            {"name": k, "value": v} for k, v in identity.items() if k != ENV_REPLICA_ID
        )
        pod = replica_pod(
            ctx,
            role_index,
            replica,
            name=parts[role_index],
            env=env,
            labels=ctx.pod_labels(role, role_index),
        )
        pod["spec"]["subdomain"] = ctx.name
        if priority:
            # the overlay may name another one
            pod["spec"].setdefault("priorityClassName", str(priority))
        spec: dict[str, Any] = {
            "completionMode": "Indexed",
            "completions": role.num_replicas,
            "parallelism": role.num_replicas,
            "backoffLimit": role.max_retries,
            "template": pod,
        }
        if pod["spec"].get("restartPolicy") == "Never":  # (an overlay may change it)
            spec["podFailurePolicy"] = copy.deepcopy(_IGNORE_DISRUPTIONS)
        if role.retry_policy == RetryPolicy.REPLICA and role.max_retries > 0:
            # each replica its own budget; the first replica out of retries
            # fails the Job (and so the app)
            spec["backoffLimitPerIndex"] = role.max_retries
            spec["maxFailedIndexes"] = 0
            spec["backoffLimit"] = role.max_retries * role.num_replicas
        set_ttl(spec, ctx.cfg)
        labels = {**ctx.pod_labels(role, role_index), **job_labels}
        manifests.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": name, "labels": labels},
                "spec": spec,
            }
        )
    return manifests


def _check_indexed_roles(app: AppDef) -> None:
    """Refuse what a batch/v1 Job cannot honour (before anything is created)."""
    for role_index, role in enumerate(app.roles):
        if role.min_replicas is not None and role.min_replicas != role.num_replicas:
            raise SpecError(
                f"roles[{role_index}].min_replicas",
                f"job_api=indexed cannot honour min_replicas={role.min_replicas}"
                f" with num_replicas={role.num_replicas}: Indexed Jobs have no gang"
                " scheduling nor elastic minimum. Leave min_replicas unset (or equal"
                " to num_replicas), or use job_api=volcano",
            )


def _kueue_labels(cfg: Mapping[str, CfgVal]) -> dict[str, str]:
    """``queue`` with ``job_api=indexed``: the Kueue LocalQueue label of the Jobs."""
    queue = cfg.get("queue")
    if queue is None or queue == "":
        return {}
    text = str(queue)
    if sanitize_label_value(text) != text:
        raise InvalidRunConfigException(
            f"queue {text!r} cannot be a Kueue queue name (a label value: at most"
            " 63 letters, digits, '-', '_' or '.', starting and ending with a letter"
            " or digit)",
            "queue",
            dict(cfg),
        )
    return {LABEL_KUEUE_QUEUE: text}


def fit_to_server(manifest: dict[str, Any], version: tuple[int, int] | None) -> None:
    """Drop from an Indexed Job ``manifest`` what a server of ``version`` lacks.

    ``podFailurePolicy`` (ignoring disruptions) needs Kubernetes 1.26;
    ``backoffLimitPerIndex``/``maxFailedIndexes`` need 1.29, and without them
    the Job's ``backoffLimit`` falls back to the per-replica budget. An older
    server would drop the fields silently (and count every failure against
    ``backoffLimit``), so they are taken out here. ``version`` None (unknown)
    keeps everything.

    Example:
        >>> job = {"spec": {"backoffLimit": 4, "backoffLimitPerIndex": 2,
        ...                 "maxFailedIndexes": 0, "podFailurePolicy": {}}}
        >>> fit_to_server(job, (1, 25))
        >>> job
        {'spec': {'backoffLimit': 2}}
    """
    if version is None:
        return
    spec = manifest.get("spec") or {}
    if version < POD_FAILURE_POLICY_SINCE:
        spec.pop("podFailurePolicy", None)
    if version < BACKOFF_PER_INDEX_SINCE and "backoffLimitPerIndex" in spec:
        spec["backoffLimit"] = spec.pop("backoffLimitPerIndex")
        spec.pop("maxFailedIndexes", None)
