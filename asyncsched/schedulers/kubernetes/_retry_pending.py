"""A failed replica that Volcano is about to restart is not over yet.

A pod's failure reaches the pods watch a moment before Volcano's controller
marks the Job ``Restarting``; a one-replica app read in between would roll
up to FAILED, then go back to RUNNING when the new pod starts (``wait``
returned FAILED for an app that was then retried and succeeded). While the
Job is live and a restart policy with budget left covers the failure, the
replica reads PENDING instead, keeping its exit code and reason as the
evidence of the failure that is being retried.

Example:
    >>> job = {"spec": {"maxRetry": 1}, "status": {"state": {"phase": "Running"}}}
    >>> task = {"policies": [{"event": "PodFailed", "action": "RestartJob"}]}
    >>> r = ReplicaSnapshot("w", 0, AppState.FAILED, exit_code=3)
    >>> restarting(r, job, task).state.name, restarting(r, job, task).exit_code
    ('PENDING', 3)
"""

from __future__ import annotations

import dataclasses

from asyncsched.schedulers.kit import ReplicaSnapshot
from asyncsched.schedulers.kubernetes._json import JSON
from asyncsched.specs import AppState

__all__ = ["job_version", "restarting"]

#: Job phases in which Volcano still applies the policies of a failed pod
#: ("": a Job whose status the client has not seen yet, e.g. its watch lags
#: behind the pods')
_LIVE_PHASES = frozenset({"", "Pending", "Running", "Restarting"})
_RESTARTS = frozenset({"RestartJob", "RestartTask", "RestartPod"})
#: Volcano's default ``maxRetry``
_DEFAULT_MAX_RETRY = 3
#: the Job version (restart count) a Volcano pod was made for
_JOB_VERSION = "volcano.sh/job-version"


def job_version(pod: JSON | None) -> int:
    """The Volcano Job version ``pod`` belongs to (0 when not told).

    Pods of an earlier attempt may linger while their replacements start:
    the newest attempt is the highest version, whatever the timestamps say.
    """
    annotations = ((pod or {}).get("metadata") or {}).get("annotations") or {}
    try:
        return int(annotations.get(_JOB_VERSION) or 0)
    except ValueError:
        return 0


def restarting(
    replica: ReplicaSnapshot, job: JSON, task: JSON, pod: JSON | None = None
) -> ReplicaSnapshot:
    """``replica`` (read from ``pod``), PENDING when it FAILED and Volcano
    will restart it, or has restarted the Job since (``pod`` is of an earlier
    version: its replacement is on its way)."""
    if replica.state != AppState.FAILED:
        return replica
    status = job.get("status") or {}
    if pod is not None and job_version(pod) < int(status.get("version") or 0):
        return dataclasses.replace(replica, state=AppState.PENDING)
    if str((status.get("state") or {}).get("phase") or "") not in _LIVE_PHASES:
        return replica
    spec = job.get("spec") or {}
    policies = [*(task.get("policies") or []), *(spec.get("policies") or [])]
    if not any(
        p.get("event") in ("PodFailed", "*") and p.get("action") in _RESTARTS
        for p in policies
    ):
        return replica
    budget = spec.get("maxRetry")
    budget = _DEFAULT_MAX_RETRY if budget is None else int(budget)
    if int(status.get("retryCount") or 0) >= budget:
        return replica
    return dataclasses.replace(replica, state=AppState.PENDING)
