"""A Volcano Job no controller has looked at: say so after a bounded time.

A cluster that serves the Volcano CRD but runs no Volcano controller (or no
Volcano scheduler) stores the Job and never gives it a status: the app would
read SUBMITTED forever with no word. Once a Job is older than the bound and
still has no phase (no controller action), each replica reads reason
``UNSCHEDULABLE`` with a message naming the missing controller.

Example:
    >>> job = {"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"}}
    >>> no_controller_message(job, now=1767225600.0 + 61, after=60.0) is not None
    True
    >>> no_controller_message(job, now=1767225600.0 + 10, after=60.0) is None
    True
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from asyncsched.schedulers.kit import AppSnapshot
from asyncsched.specs import AppState, StatusReason

__all__ = (
    "NO_CONTROLLER_AFTER",
    "flag_no_controller",
    "no_controller_message",
    "remaining",
)

#: seconds a Volcano Job may stay without any status before it is reported
NO_CONTROLLER_AFTER = 60.0


def _created(job: dict[str, Any]) -> float | None:
    stamp = (job.get("metadata") or {}).get("creationTimestamp")
    try:
        return datetime.fromisoformat(str(stamp)).timestamp()
    except ValueError:
        return None


def no_controller_message(
    job: dict[str, Any], *, now: float, after: float
) -> str | None:
    """The message for a Job without a phase ``after`` seconds after its
    creation; None while it is younger, or once a controller gave it a phase."""
    if ((job.get("status") or {}).get("state") or {}).get("phase"):
        return None
    created = _created(job)
    if created is None or now - created < after:
        return None
    return (
        f"no Volcano controller has acted on this Job for {now - created:.0f} s"
        " (no status, no PodGroup, no pods): is the Volcano controller and"
        " scheduler running? (kubectl get pods -n volcano-system)"
    )


def remaining(job: dict[str, Any], *, now: float, after: float) -> float | None:
    """Seconds until :func:`no_controller_message` would answer; None: never."""
    if ((job.get("status") or {}).get("state") or {}).get("phase"):
        return None
    created = _created(job)
    return None if created is None else max(0.0, created + after - now)


def flag_no_controller(snapshot: AppSnapshot, message: str) -> AppSnapshot:
    """``snapshot`` with each waiting replica saying ``message`` (UNSCHEDULABLE)."""
    snapshot.replicas = [
        dataclasses.replace(r, reason=StatusReason.UNSCHEDULABLE, message=message)
        if r.state in (AppState.SUBMITTED, AppState.PENDING)
        else r
        for r in snapshot.replicas
    ]
    snapshot.msg = message
    return snapshot
