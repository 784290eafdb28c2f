"""One Volcano Job per app (``job_api=volcano``), laid out as TorchX lays it out.

One task per replica, with TorchX's known bugs fixed (field-path prefix,
``-`` in the rank-0 variable, names over 63 characters, unsanitised label
values); retries become Volcano policies and the Job's ``maxRetry``.

Example:
    >>> app = AppDef("a", roles=[Role("r", "i", max_retries=2), Role("s", "i")])
    >>> volcano_job_max_retry(app)
    2
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from asyncsched.errors import SpecError
from asyncsched.schedulers.kubernetes._job_names import (
    LABEL_REPLICA_ID,
    MAX_NAME,
    MAX_TASK,
    role_parts,
)
from asyncsched.schedulers.kubernetes._pod import (
    ENV_IMAGE,
    RenderContext,
    env_list,
    replica_pod,
    set_ttl,
)
from asyncsched.schedulers.shared.identity import ENV_APP_ID, RANK0_ENV
from asyncsched.schedulers.shared.replicas import expand_role
from asyncsched.specs import AppDef, RetryPolicy, Role

__all__ = ("VOLCANO_API", "volcano_job", "volcano_job_max_retry")

logger = logging.getLogger(__name__)

VOLCANO_API = "batch.volcano.sh/v1alpha1"


def _task_names(app: AppDef, limit: int) -> list[list[str]]:
    """Task name of every replica (role by role), unique and within ``limit``."""
    return [
        [f"{part}-{i}" for i in range(role.num_replicas)]
        for part, role in zip(role_parts(app, limit), app.roles, strict=True)
    ]


def volcano_job(ctx: RenderContext, queue: str) -> dict[str, Any]:
    app, cfg = ctx.app, ctx.cfg
    limit = min(MAX_TASK, MAX_NAME - len(ctx.name) - len("--0"))
    tasks_by_role = _task_names(app, limit)
    rank0_var = f"VC_{tasks_by_role[0][0].upper().replace('-', '_')}_HOSTS"
    tasks = []
    for role_index, role in enumerate(app.roles):
        policies = _volcano_policies(role, role_index) if role.max_retries > 0 else []
        specs = expand_role(ctx.name, role, role_index=role_index, rank0_env=rank0_var)
        if role_index == 0:
            specs[0] = expand_role(ctx.name, role, rank0_env=RANK0_ENV)[0]
        for spec in specs:
            task_name = tasks_by_role[role_index][spec.replica_id]
            replica = spec.role
            env = env_list(replica.env)
            if role_index == 0 and spec.replica_id == 0:
                env.append({"name": RANK0_ENV, "value": "localhost"})
            env.append({"name": ENV_IMAGE, "value": ctx.image(role)})
            identity = {**spec.identity, ENV_APP_ID: ctx.app_id}
            env.extend({"name": k, "value": v} for k, v in identity.items())
            labels = {
                **ctx.pod_labels(role, role_index),
                LABEL_REPLICA_ID: str(spec.replica_id),
            }
            pod = replica_pod(
                ctx, role_index, replica, name=task_name, env=env, labels=labels
            )
            task: dict[str, Any] = {
                "name": task_name,
                "replicas": 1,
                "template": pod,
            }
            if role.max_retries > 0:
                task["maxRetry"] = role.max_retries
                task["policies"] = copy.deepcopy(policies)
            if role.min_replicas is not None:
                task["minAvailable"] = 1 if spec.replica_id < role.min_replicas else 0
            tasks.append(task)
    spec_: dict[str, Any] = {
        "schedulerName": "volcano",
        "queue": queue,
        "plugins": {"svc": ["--publish-not-ready-addresses"], "env": []},
        "tasks": tasks,
    }
    if cfg.get("fail_fast", True) is not False:
        # a replica that fails for good (no task policy left) stops the others
        spec_["policies"] = [{"event": "PodFailed", "action": "TerminateJob"}]
    job_retries = volcano_job_max_retry(app)
    if job_retries:
        spec_["maxRetry"] = job_retries
    priority = cfg.get("priority_class")
    if priority:
        spec_["priorityClassName"] = str(priority)
    set_ttl(spec_, cfg)
    return {
        "apiVersion": VOLCANO_API,
        "kind": "Job",
        "metadata": {"name": ctx.name, "labels": ctx.job_labels()},
        "spec": spec_,
    }


def volcano_job_max_retry(app: AppDef) -> int | None:
    """The Volcano Job's ``maxRetry``: the largest restart budget of a role.

    Volcano counts every restart (a ``RestartJob`` or a ``RestartTask``)
    against the job's ``maxRetry``, and its admission webhook turns a ``0``
    (or a missing value) into 3, so the job level cannot say "no retries":
    the budget is what the roles ask for -- ``max_retries`` for an
    APPLICATION role, ``max_retries`` per replica for a REPLICA role -- and
    None (the key left out) when no role retries, as no policy then
    restarts anything.

    Example:
        >>> app = AppDef("a", roles=[Role("r", "i", max_retries=2), Role("s", "i")])
        >>> volcano_job_max_retry(app)
        2
    """
    budgets = [
        role.max_retries
        * (role.num_replicas if role.retry_policy == RetryPolicy.REPLICA else 1)
        for role in app.roles
        if role.max_retries > 0
    ]
    return max(budgets) if budgets else None


def _volcano_policies(role: Role, role_index: int) -> list[dict[str, str]]:
    logger.warning(
        "role %r: Volcano (volcano-sh/volcano#1651) may drop failed pods on retry",
        role.name,
    )
    if role.retry_policy in (RetryPolicy.APPLICATION, RetryPolicy.REPLICA):
        # one task per replica: RestartTask restarts that replica alone
        action = (
            "RestartJob"
            if role.retry_policy == RetryPolicy.APPLICATION
            else "RestartTask"
        )
        return [
            {"event": "PodEvicted", "action": action},
            {"event": "PodFailed", "action": action},
        ]
    raise SpecError(
        f"roles[{role_index}].retry_policy",
        f"{role.retry_policy.value} is not supported on Volcano; use APPLICATION"
        " or REPLICA",
    )
