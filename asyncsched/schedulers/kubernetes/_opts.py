"""The run options of the Kubernetes backend (``cfg`` of ``submit``).

Example:
    >>> kubernetes_run_opts().get("job_api").default
    'volcano'
"""

from __future__ import annotations

from typing import TypedDict

from asyncsched.schedulers.shared.run_options import add_fail_fast
from asyncsched.specs import runopts

__all__ = ("KubernetesOpts", "kubernetes_run_opts")


class KubernetesOpts(TypedDict, total=False):
    """Run options of :class:`KubernetesScheduler` (after resolution)."""

    namespace: str
    queue: str | None
    job_api: str
    service_account: str | None
    priority_class: str | None
    image_repo: str | None
    reserved_millicpu: int
    reserved_memmb: int
    efa_device_count: int | None
    node_selector: dict[str, str] | None
    tolerations: list[str] | None
    image_pull_secrets: list[str] | None
    image_pull_policy: str | None
    fail_fast: bool
    context: str | None
    validate_spec: bool
    ttl_seconds_after_finished: int | None


def kubernetes_run_opts() -> runopts:
    """The options :class:`KubernetesOpts` describes, with defaults and help."""
    opts = runopts()
    opts.add("namespace", type_=str, default="default", help="namespace to run in")
    opts.add(
        "queue",
        type_=str,
        help="Volcano queue to schedule the job in (required with job_api=volcano);"
        " with job_api=indexed, the Kueue LocalQueue (kueue.x-k8s.io/queue-name)",
    )
    opts.add(
        "job_api",
        type_=str,
        default="volcano",
        help="volcano (a Volcano Job, as TorchX) or indexed (one batch/v1"
        " Indexed Job per role plus a headless Service; no Volcano needed)",
    )
    opts.add("service_account", type_=str, help="service account of the pods")
    opts.add(
        "priority_class",
        type_=str,
        help="PriorityClass of the Volcano job (of the pods with job_api=indexed)",
    )
    opts.add(
        "reserved_millicpu",
        type_=int,
        default=100,
        help="millicpu subtracted from the cpu request (left to system pods)",
    )
    opts.add(
        "reserved_memmb",
        type_=int,
        default=1024,
        help="MB subtracted from the memory request (left to system pods)",
    )
    opts.add(
        "efa_device_count",
        type_=int,
        help="override the vpc.amazonaws.com/efa limit (0 removes it)",
    )
    opts.add(
        "node_selector",
        type_=dict[str, str],
        help="node labels the pods must match (K1:v1,K2:v2)",
    )
    opts.add(
        "tolerations",
        type_=list[str],
        help="taints the pods tolerate, each KEY[=VALUE][:EFFECT]",
    )
    opts.add(
        "image_pull_secrets",
        type_=list[str],
        help="names of Secrets used to pull the images",
    )
    opts.add(
        "image_pull_policy",
        type_=str,
        help="imagePullPolicy of each replica's container: Always, IfNotPresent"
        " or Never (default: the cluster's, Always for :latest or an untagged"
        " image); IfNotPresent/Never run images already on the nodes",
    )
    add_fail_fast(opts)
    opts.add("context", type_=str, help="kubeconfig context to use")
    opts.add(
        "ttl_seconds_after_finished",
        type_=int,
        help="seconds after it finished that the cluster deletes the job"
        " (ttlSecondsAfterFinished; on Kubernetes < 1.21 only with the"
        " TTLAfterFinished feature gate on, else it is kept)",
    )
    opts.add(
        "validate_spec",
        type_=bool,
        default=False,
        help="validate the manifests with a server-side dry run (dryRun=All)"
        " during submit_dryrun (needs cluster access)",
    )
    return opts
