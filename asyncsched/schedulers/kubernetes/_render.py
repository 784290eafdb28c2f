"""AppDef + run config -> Kubernetes manifests (plain dicts), without I/O.

Two shapes, chosen by the ``job_api`` run option:

* ``volcano``: one ``batch.volcano.sh/v1alpha1`` Job with one task per
  replica, laid out as TorchX lays it out, with TorchX's known bugs fixed
  (field-path prefix, ``-`` in the rank-0 variable, names over 63
  characters, unsanitised label values).
* ``indexed``: one ``batch/v1`` Job per role (``completionMode: Indexed``) plus
  a headless Service for rank-0 discovery, for clusters without Volcano
  (no gang scheduling; ``queue`` becomes Kueue's queue-name label; the
  optional Job fields are fitted to the server by :func:`fit_to_server`).

Example:
    >>> from asyncsched.specs import AppDef, Role
    >>> app = AppDef("hello", roles=[Role("r", image="busybox", entrypoint="echo")])
    >>> job = render_job(app, {"queue": "q"}, name="hello-bcd", session="s", version="1")
    >>> job.app_id, job.manifests[0]["spec"]["tasks"][0]["name"]
    ('default:hello-bcd', 'r-0')
"""

from __future__ import annotations

import copy
import hashlib
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from asyncsched.errors import InvalidRunConfigException, SpecError
from asyncsched.schedulers.kubernetes._names import namespace_problem
from asyncsched.schedulers.shared.identity import (
    ENV_APP_ID,
    ENV_REPLICA_ID,
    RANK0_ENV,
    identity_env,
)
from asyncsched.schedulers.shared.labels import (
    LABEL_APP_ID,
    LABEL_APP_NAME,
    LABEL_PREFIX,
    LABEL_REPLICA_ID,
    LABEL_ROLE_INDEX,
    LABEL_ROLE_NAME,
    LABEL_SESSION,
    LABEL_VERSION,
)
from asyncsched.schedulers.shared.replicas import expand_role
from asyncsched.specs import (
    AppDef,
    BindMount,
    CfgVal,
    DeviceMount,
    RetryPolicy,
    Role,
    VolumeMount,
    macros,
)

__all__ = [
    "ANNOTATION_CANCELLED",
    "COMPLETION_INDEX",
    "JOB_APIS",
    "LABEL_APP_ID",
    "LABEL_APP_NAME",
    "LABEL_INSTANCE",
    "LABEL_MANAGED_BY",
    "LABEL_NAME",
    "LABEL_REPLICA_ID",
    "LABEL_ROLE_INDEX",
    "LABEL_ROLE_NAME",
    "LABEL_SESSION",
    "LABEL_VERSION",
    "MANAGED_BY",
    "MAX_NAME",
    "BACKOFF_PER_INDEX_SINCE",
    "LABEL_KUEUE_QUEUE",
    "POD_FAILURE_POLICY_SINCE",
    "KubernetesJob",
    "check_env_names",
    "fit_to_server",
    "format_job",
    "job_name",
    "normalize_str",
    "render_job",
    "sanitize_label_value",
    "shorten",
    "volcano_job_max_retry",
]

logger = logging.getLogger(__name__)

LABEL_NAME = "app.kubernetes.io/name"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "asyncsched"
#: set (with ``spec.suspend``) on the Jobs of a cancelled ``indexed`` app
ANNOTATION_CANCELLED = LABEL_PREFIX + "cancelled"
#: the annotation/label the Job controller puts the completion index in
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"

ENV_IMAGE = "TORCHX_IMAGE"
FIELD_PATH = "[FIELD_PATH]"
JOB_APIS = ("volcano", "indexed")
VOLCANO_API = "batch.volcano.sh/v1alpha1"
#: a DNS label (pod hostname, Service name, label value) is at most 63 characters
MAX_NAME = 63
_MAX_TASK = 30  # a task (role-replica) name is capped at this, leaving room for the job
_SUFFIX_HASH = 8
_NOT_NAME = re.compile(r"[^a-z0-9-]")
_NOT_LABEL = re.compile(r"[^A-Za-z0-9._-]")
_EDGE_JUNK = re.compile(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$")
_PORT_NAME = re.compile(r"^(?=.*[a-z])[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_TOLERATION = re.compile(r"^([^=:]+)(?:=([^:]*))?(?::(\w+))?$")
_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
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


@dataclass
class KubernetesJob:
    """Everything ``KubernetesScheduler.schedule`` creates for one app.

    ``manifests`` are created in order (the Volcano Job; or the Service then
    one batch/v1 Job per role); edit them in a dry-run result to pass settings
    asyncsched does not render. ``images_to_push`` maps a local image id to
    ``(repository, tag)``, pushed through the Docker backend before creating.
    """

    namespace: str
    name: str
    job_api: str
    manifests: list[dict[str, Any]] = field(default_factory=list)
    images_to_push: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def app_id(self) -> str:
        """``namespace:name``, TorchX's app id format."""
        return f"{self.namespace}:{self.name}"

    def __repr__(self) -> str:
        return format_job(self)


def format_job(job: KubernetesJob) -> str:
    """The manifests as YAML documents, keys sorted (as ``kubectl`` would take them)."""
    return yaml.safe_dump_all(job.manifests, sort_keys=True, default_flow_style=False)


def normalize_str(text: str) -> str:
    """TorchX's name rule: drop one leading ``-``, lower-case, keep ``[a-z0-9-]``.

    Example:
        >>> normalize_str("Trainer_Foo")
        'trainerfoo'
    """
    return _NOT_NAME.sub("", text.removeprefix("-").lower())


def shorten(name: str, limit: int) -> str:
    """``name`` if it fits in ``limit``, else a prefix plus a hash of all of it.

    Deterministic, and two different long names stay different.

    Example:
        >>> shorten("a" * 40, 20)
        'aaaaaaaaaaa-e33cdf9c'
    """
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:_SUFFIX_HASH]
    head = name[: max(limit - _SUFFIX_HASH - 1, 0)].rstrip("-")
    return f"{head}-{digest}" if head else digest[:limit]


def sanitize_label_value(value: str) -> str:
    """A valid label value: ``[A-Za-z0-9._-]``, alphanumeric ends, <= 63 chars.

    Example:
        >>> sanitize_label_value("+foo+bar/")
        'foo.bar'
    """
    cleaned = _EDGE_JUNK.sub("", _NOT_LABEL.sub(".", value))
    return _EDGE_JUNK.sub("", cleaned[:MAX_NAME])


def job_name(app_name: str, suffix: str, longest_task: int = _MAX_TASK) -> str:
    """The job (app) name: ``normalize(app_name)-suffix`` fitting pod names.

    The name starts with a letter (it also names a Service) and leaves room
    for ``-{task}-0`` within 63 characters.

    Example:
        >>> job_name("Trainer_App", "bq4fz7dkm2pwhs")
        'trainerapp-bq4fz7dkm2pwhs'
    """
    base = normalize_str(app_name).strip("-")
    if not base or not base[0].isalpha():
        base = f"app-{base}".rstrip("-")
    budget = MAX_NAME - len("--0") - longest_task - len(suffix) - 1
    return f"{shorten(base, max(budget, 1)).rstrip('-')}-{suffix}"


def render_job(
    app: AppDef,
    cfg: Mapping[str, CfgVal],
    *,
    name: str,
    session: str,
    version: str,
) -> KubernetesJob:
    """Build the manifests of ``app`` (the dry run of ``KubernetesScheduler``).

    ``name`` is the job name (see :func:`job_name`); ``app`` is not modified.

    Raises:
        SpecError: something Kubernetes cannot express (bad mount, port name,
            clashing role names, a ROLE retry policy on Volcano, a
            ``min_replicas`` below ``num_replicas`` on Indexed Jobs).
        InvalidRunConfigException: a bad ``namespace`` (not a DNS-1123 label),
            ``job_api``, ``queue`` or toleration.
    """
    namespace = cfg.get("namespace") or "default"
    problem = namespace_problem(namespace)
    if problem is not None:  # it goes into every request path
        raise InvalidRunConfigException(problem, "namespace", dict(cfg))
    assert isinstance(namespace, str)
    job_api = str(cfg.get("job_api") or "volcano")
    if job_api not in JOB_APIS:
        raise InvalidRunConfigException(
            f"job_api must be one of {list(JOB_APIS)}, got {job_api!r}",
            "job_api",
            dict(cfg),
        )
    ctx = _Context(app, cfg, name, namespace, session, version)
    job = KubernetesJob(namespace=namespace, name=name, job_api=job_api)
    repo = cfg.get("image_repo")
    for role in app.roles:
        if repo and role.image.startswith("sha256:"):
            tag = role.image.removeprefix("sha256:")
            ctx.images[role.image] = f"{repo}:{tag}"
            job.images_to_push[role.image] = (str(repo), tag)
    if job_api == "volcano":
        queue = cfg.get("queue")
        if not isinstance(queue, str) or not queue:
            raise InvalidRunConfigException(
                "queue (the Volcano queue) is required with job_api=volcano",
                "queue",
                dict(cfg),
            )
        job.manifests.append(_volcano_job(ctx, queue))
    else:
        job.manifests.extend(_indexed_jobs(ctx))
    return job


@dataclass
class _Context:
    app: AppDef
    cfg: Mapping[str, CfgVal]
    name: str
    namespace: str
    session: str
    version: str
    images: dict[str, str] = field(default_factory=dict)

    def image(self, role: Role) -> str:
        return self.images.get(role.image, role.image)

    @property
    def app_id(self) -> str:
        return f"{self.namespace}:{self.name}"

    def job_labels(self) -> dict[str, str]:
        return {
            LABEL_APP_ID: self.name,
            LABEL_APP_NAME: sanitize_label_value(self.app.name),
            LABEL_SESSION: sanitize_label_value(self.session),
            LABEL_VERSION: sanitize_label_value(self.version),
            LABEL_MANAGED_BY: MANAGED_BY,
        }

    def pod_labels(self, role: Role, role_index: int) -> dict[str, str]:
        return {
            **self.job_labels(),
            LABEL_ROLE_NAME: sanitize_label_value(role.name),
            LABEL_ROLE_INDEX: str(role_index),
            LABEL_NAME: sanitize_label_value(self.app.name),
            LABEL_INSTANCE: self.name,
        }


# -- validation ----------------------------------------------------------------

# What the API server's validation of a container's env accepts (a Volcano
# job's pod template is not validated at create: a bad name leaves a job
# that never gets a pod, so it is checked here, before submit).
_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")


def check_env_names(app: AppDef) -> None:
    """Raise SpecError naming the first env name Kubernetes would reject.

    Example:
        >>> check_env_names(AppDef("a", roles=[Role("r", "i", env={"OK_1": "x"})]))
    """
    for index, role in enumerate(app.roles):
        for name in role.env:
            if not _ENV_NAME.fullmatch(name):
                raise SpecError(
                    f"roles[{index}].env.{name}",
                    f"{name!r} is not a valid Kubernetes env name: letters,"
                    " digits, '_', '-' and '.', not starting with a digit",
                )


# -- volcano -------------------------------------------------------------------


def _role_parts(app: AppDef, limit: int, suffix_width: int = 0) -> list[str]:
    """Normalised role names, unique, each at most ``limit - suffix_width`` long."""
    seen: dict[str, str] = {}
    parts = []
    for index, role in enumerate(app.roles):
        base = normalize_str(role.name).strip("-")
        if not base:
            raise SpecError(
                f"roles[{index}].name",
                f"{role.name!r} has no character Kubernetes allows in a name"
                " (a-z, 0-9, -)",
            )
        if base in seen:
            raise SpecError(
                f"roles[{index}].name",
                f"{role.name!r} and {seen[base]!r} give the same Kubernetes name"
                f" {base!r}; rename one",
            )
        seen[base] = role.name
        width = suffix_width or len(str(role.num_replicas - 1)) + 1
        parts.append(shorten(base, max(limit - width, 1)))
    return parts


def _task_names(app: AppDef, limit: int) -> list[list[str]]:
    """Task name of every replica (role by role), unique and within ``limit``."""
    return [
        [f"{part}-{i}" for i in range(role.num_replicas)]
        for part, role in zip(_role_parts(app, limit), app.roles, strict=True)
    ]


def _volcano_job(ctx: _Context, queue: str) -> dict[str, Any]:
    app, cfg = ctx.app, ctx.cfg
    limit = min(_MAX_TASK, MAX_NAME - len(ctx.name) - len("--0"))
    tasks_by_role = _task_names(app, limit)
    rank0_var = f"VC_{tasks_by_role[0][0].upper().replace('-', '_')}_HOSTS"
    tasks = []
    for role_index, role in enumerate(app.roles):
        mounts, volumes, privileged = _mounts(role, f"roles[{role_index}]")
        policies = _volcano_policies(role, role_index) if role.max_retries > 0 else []
        specs = expand_role(ctx.name, role, role_index=role_index, rank0_env=rank0_var)
        if role_index == 0:
            specs[0] = expand_role(ctx.name, role, rank0_env=RANK0_ENV)[0]
        for spec in specs:
            task_name = tasks_by_role[role_index][spec.replica_id]
            replica = spec.role
            env = _env_list(replica.env)
            if role_index == 0 and spec.replica_id == 0:
                env.append({"name": RANK0_ENV, "value": "localhost"})
            env.append({"name": ENV_IMAGE, "value": ctx.image(role)})
            identity = {**spec.identity, ENV_APP_ID: ctx.app_id}
            env.extend({"name": k, "value": v} for k, v in identity.items())
            container = _container(
                task_name, ctx.image(role), replica, cfg, env, mounts, privileged
            )
            container["ports"] = _ports(role, role_index)
            labels = {
                **ctx.pod_labels(role, role_index),
                LABEL_REPLICA_ID: str(spec.replica_id),
            }
            pod = _pod_template(container, volumes, labels, replica, cfg, role_index)
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
    job_retries = volcano_job_max_retry(app)
    if job_retries:
        spec_["maxRetry"] = job_retries
    priority = cfg.get("priority_class")
    if priority:
        spec_["priorityClassName"] = str(priority)
    _set_ttl(spec_, cfg)
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


# -- indexed -------------------------------------------------------------------


def _indexed_jobs(ctx: _Context) -> list[dict[str, Any]]:
    app, cfg = ctx.app, ctx.cfg
    # pod hostnames are "{job}-{index}": the role part gets what the index leaves
    widest = max(len(str(r.num_replicas - 1)) for r in app.roles)
    role_parts = _role_parts(app, MAX_NAME - len(ctx.name) - 1, widest + 1)
    role0_job = f"{ctx.name}-{role_parts[0]}"
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
        mounts, volumes, privileged = _mounts(role, f"roles[{role_index}]")
        values = macros.Values(
            img_root="",
            app_id=ctx.name,
            replica_id=f"$({ENV_REPLICA_ID})",
            rank0_env=RANK0_ENV,
        )
        replica = values.apply(role)
        name = f"{ctx.name}-{role_parts[role_index]}"
        identity = identity_env(ctx.app_id, role.name, 0, role.num_replicas)
        env: list[dict[str, Any]] = [
            {
                "name": ENV_REPLICA_ID,
                "valueFrom": {"fieldRef": {"fieldPath": index_ref}},
            }
        ]
        env.extend(_env_list(replica.env))
        env.append({"name": RANK0_ENV, "value": rank0_host})
        env.append({"name": ENV_IMAGE, "value": ctx.image(role)})
        env.extend(
            {"name": k, "value": v} for k, v in identity.items() if k != ENV_REPLICA_ID
        )
        container = _container(
            role_parts[role_index],
            ctx.image(role),
            replica,
            cfg,
            env,
            mounts,
            privileged,
        )
        container["ports"] = _ports(role, role_index)
        pod = _pod_template(
            container,
            volumes,
            ctx.pod_labels(role, role_index),
            replica,
            cfg,
            role_index,
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
        _set_ttl(spec, ctx.cfg)
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


def _set_ttl(spec: dict[str, Any], cfg: Mapping[str, CfgVal]) -> None:
    """``ttlSecondsAfterFinished`` from the ``ttl_seconds_after_finished`` option."""
    ttl = cfg.get("ttl_seconds_after_finished")
    if ttl is None:
        return
    if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 0:
        raise InvalidRunConfigException(
            f"ttl_seconds_after_finished must be a whole number of seconds >= 0,"
            f" got {ttl!r}",
            "ttl_seconds_after_finished",
            dict(cfg),
        )
    spec["ttlSecondsAfterFinished"] = ttl


# -- shared pieces -------------------------------------------------------------


def _env_list(env: Mapping[str, str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for key, value in env.items():
        if value.startswith(FIELD_PATH):
            path = value.removeprefix(FIELD_PATH)
            out.append({"name": key, "valueFrom": {"fieldRef": {"fieldPath": path}}})
        else:
            out.append({"name": key, "value": value})
    return out


def _container(
    name: str,
    image: str,
    role: Role,
    cfg: Mapping[str, CfgVal],
    env: list[dict[str, Any]],
    mounts: list[dict[str, Any]],
    privileged: bool,
) -> dict[str, Any]:
    return {
        "name": name,
        "image": image,
        "command": [role.entrypoint, *role.args],
        "env": env,
        "ports": [],
        "resources": _resources(role, cfg),
        "securityContext": {"privileged": True} if privileged else {},
        "volumeMounts": mounts,
    }


def _ports(role: Role, role_index: int) -> list[dict[str, Any]]:
    ports = []
    for port_name, port in role.port_map.items():
        if len(port_name) > 15 or not _PORT_NAME.match(port_name):
            raise SpecError(
                f"roles[{role_index}].port_map",
                f"port name {port_name!r} is not a valid Kubernetes port name"
                " (at most 15 lower-case letters, digits and '-', with a letter)",
            )
        ports.append({"name": port_name, "containerPort": port})
    return ports


def _resources(role: Role, cfg: Mapping[str, CfgVal]) -> dict[str, dict[str, str]]:
    res = role.resource
    reserved_mcpu = _int(cfg.get("reserved_millicpu"), 100)
    reserved_mem = _int(cfg.get("reserved_memmb"), 1024)
    limits: dict[str, str] = {}
    requests: dict[str, str] = {}
    if res.cpu > 0:
        mcpu = int(res.cpu * 1000)
        limits["cpu"] = f"{mcpu}m"
        requests["cpu"] = f"{max(mcpu - reserved_mcpu, 0)}m"
    if res.memMB > 0:
        limits["memory"] = f"{int(res.memMB)}M"
        requests["memory"] = f"{max(int(res.memMB) - reserved_mem, 0)}M"
    if res.gpu > 0:
        limits["nvidia.com/gpu"] = requests["nvidia.com/gpu"] = str(res.gpu)
    for device, count in res.devices.items():
        limits[device] = str(count)
    efa = cfg.get("efa_device_count")
    if isinstance(efa, int):
        limits.pop("vpc.amazonaws.com/efa", None)
        if efa > 0:
            limits["vpc.amazonaws.com/efa"] = str(efa)
    return {"limits": limits, "requests": requests}


def _mounts(
    role: Role, where: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool]:
    mounts: list[dict[str, Any]] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    privileged = False
    for i, mount in enumerate(role.mounts):
        name, field_name = f"mount-{i}", f"{where}.mounts[{i}]"
        if isinstance(mount, BindMount):
            _check_path(mount.src_path, f"{field_name}.src_path")
            _check_path(mount.dst_path, f"{field_name}.dst_path")
            volumes.append({"name": name, "hostPath": {"path": mount.src_path}})
            read_only = mount.read_only
        elif isinstance(mount, VolumeMount):
            if not mount.src:
                raise SpecError(f"{field_name}.src", "a volume mount needs a PVC name")
            _check_path(mount.dst_path, f"{field_name}.dst_path")
            volumes.append(
                {"name": name, "persistentVolumeClaim": {"claimName": mount.src}}
            )
            read_only = mount.read_only
        elif isinstance(mount, DeviceMount):
            _check_path(mount.src_path, f"{field_name}.src_path")
            _check_path(mount.dst_path, f"{field_name}.dst_path")
            volumes.append({"name": name, "hostPath": {"path": mount.src_path}})
            read_only = "w" not in mount.permissions and "m" not in mount.permissions
            privileged = True
        else:
            raise SpecError(field_name, f"unknown mount type {type(mount).__name__}")
        mounts.append(
            {"name": name, "mountPath": mount.dst_path, "readOnly": read_only}
        )
    return mounts, volumes, privileged


def _pod_template(
    container: dict[str, Any],
    volumes: list[dict[str, Any]],
    labels: dict[str, str],
    role: Role,
    cfg: Mapping[str, CfgVal],
    role_index: int,
) -> dict[str, Any]:
    node_selector: dict[str, str] = {}
    instance_type = role.resource.capabilities.get(_INSTANCE_TYPE)
    if instance_type is not None:
        node_selector[_INSTANCE_TYPE] = str(instance_type)
    selector_cfg = cfg.get("node_selector")
    if isinstance(selector_cfg, dict):
        node_selector.update({str(k): str(v) for k, v in selector_cfg.items()})
    spec: dict[str, Any] = {
        "containers": [container],
        "restartPolicy": "Never",
        "nodeSelector": node_selector,
        "volumes": volumes,
    }
    account = cfg.get("service_account")
    if account:
        spec["serviceAccountName"] = str(account)
    tolerations = _tolerations(cfg.get("tolerations"), cfg)
    if tolerations:
        spec["tolerations"] = tolerations
    secrets = cfg.get("image_pull_secrets")
    if isinstance(secrets, list) and secrets:
        spec["imagePullSecrets"] = [{"name": str(s)} for s in secrets]
    pod: dict[str, Any] = {
        "metadata": {
            "annotations": {"sidecar.istio.io/inject": "false"},
            "labels": labels,
        },
        "spec": spec,
    }
    overlay = role.metadata.get("kubernetes")
    if overlay is not None:
        if not isinstance(overlay, dict):
            raise SpecError(
                f"roles[{role_index}].metadata['kubernetes']",
                f"must be a dict overlaid on the pod, got {type(overlay).__name__}",
            )
        pod = deep_merge(pod, overlay)
    return pod


def deep_merge(base: dict[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``overlay`` merged in: dicts merge, lists append, rest replace.

    Example:
        >>> deep_merge({"a": {"b": 1}, "l": [1]}, {"a": {"c": 2}, "l": [2]})
        {'a': {'b': 1, 'c': 2}, 'l': [1, 2]}
    """
    out = copy.deepcopy(base)
    for key, value in overlay.items():
        current = out.get(key)
        if isinstance(current, dict) and isinstance(value, Mapping):
            out[key] = deep_merge(current, value)
        elif isinstance(current, list) and isinstance(value, list):
            out[key] = current + copy.deepcopy(value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _tolerations(value: CfgVal, cfg: Mapping[str, CfgVal]) -> list[dict[str, str]]:
    if not isinstance(value, list):
        return []
    out = []
    for item in value:
        match = _TOLERATION.match(str(item).strip())
        if match is None:
            raise InvalidRunConfigException(
                f"toleration {item!r} is not KEY[=VALUE][:EFFECT]",
                "tolerations",
                dict(cfg),
            )
        key, val, effect = match.groups()
        tol = {"key": key, "operator": "Exists" if val is None else "Equal"}
        if val is not None:
            tol["value"] = val
        if effect:
            tol["effect"] = effect
        out.append(tol)
    return out


def _check_path(path: object, field_name: str) -> None:
    if not isinstance(path, str) or not path.startswith("/"):
        raise SpecError(field_name, f"must be an absolute path, got {path!r}")


def _int(value: CfgVal, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
