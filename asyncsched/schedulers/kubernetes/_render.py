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

The pieces live by output kind: names and labels in ``_job_names``, the
Volcano Job in ``_volcano``, Indexed Jobs (and Kueue) in ``_indexed``, the
pod template in ``_pod``. This module chooses and assembles them, and hands
their names on to the rest of the backend.

Example:
    >>> from asyncsched.specs import AppDef, Role
    >>> app = AppDef("hello", roles=[Role("r", image="busybox", entrypoint="echo")])
    >>> job = render_job(app, {"queue": "q"}, name="hello-bcd", session="s", version="1")
    >>> job.app_id, job.manifests[0]["spec"]["tasks"][0]["name"]
    ('default:hello-bcd', 'r-0')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from asyncsched.errors import InvalidRunConfigException
from asyncsched.schedulers.kubernetes._indexed import indexed_jobs
from asyncsched.schedulers.kubernetes._names import namespace_problem
from asyncsched.schedulers.kubernetes._pod import RenderContext
from asyncsched.schedulers.kubernetes._volcano import volcano_job
from asyncsched.specs import AppDef, CfgVal

__all__ = (
    "IMAGE_PULL_POLICIES",
    "JOB_APIS",
    "KubernetesJob",
    "format_job",
    "render_job",
)

JOB_APIS = ("volcano", "indexed")
#: the values of the ``image_pull_policy`` run option (the container field)
IMAGE_PULL_POLICIES = ("Always", "IfNotPresent", "Never")


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
            ``job_api``, ``queue``, ``image_pull_policy`` or toleration;
            ``fail_fast=False`` with ``job_api=indexed``.
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
    policy = cfg.get("image_pull_policy")
    if policy is not None and policy not in IMAGE_PULL_POLICIES:
        raise InvalidRunConfigException(
            f"image_pull_policy must be one of {list(IMAGE_PULL_POLICIES)},"
            f" got {policy!r}",
            "image_pull_policy",
            dict(cfg),
        )
    if job_api == "indexed" and cfg.get("fail_fast", True) is False:
        raise InvalidRunConfigException(
            "fail_fast=False needs job_api=volcano: a batch/v1 Job stops its"
            " other pods when one of them fails for good",
            "fail_fast",
            dict(cfg),
        )
    ctx = RenderContext(app, cfg, name, namespace, session, version)
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
        job.manifests.append(volcano_job(ctx, queue))
    else:
        job.manifests.extend(indexed_jobs(ctx))
    return job
