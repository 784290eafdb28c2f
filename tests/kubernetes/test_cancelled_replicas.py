"""A replica stopped by a cancel is CANCELLED, one that failed by itself FAILED.

Aborting a Volcano Job deletes the pods still live and keeps those that had
already failed: a pod being deleted when the Job is Aborted was stopped by
the cancel, whenever the cache happens to read it.
"""

from __future__ import annotations

from typing import Any

from asyncsched.schedulers.kubernetes._render import (
    LABEL_REPLICA_ID,
    LABEL_ROLE_INDEX,
    LABEL_ROLE_NAME,
)
from asyncsched.schedulers.kubernetes._state import describe_volcano
from asyncsched.specs import AppState

LABELS = {LABEL_ROLE_NAME: "worker", LABEL_REPLICA_ID: "0", LABEL_ROLE_INDEX: "0"}


def _job(task_phase: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "app", "labels": {}},
        "spec": {
            "tasks": [
                {"name": "worker-0", "template": {"metadata": {"labels": LABELS}}}
            ]
        },
        "status": {
            "state": {"phase": "Aborted"},
            "taskStatusCount": {"worker-0": {"phase": {task_phase: 1}}},
        },
    }


def _failed_pod(deleting: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "app-worker-0-0",
        "labels": LABELS,
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:30Z"
    terminated = {"exitCode": 143, "reason": "Error"}
    return {
        "metadata": meta,
        "spec": {"containers": [{"name": "worker-0"}]},
        "status": {
            "phase": "Failed",
            "containerStatuses": [
                {"name": "worker-0", "state": {"terminated": terminated}}
            ],
        },
    }


def test_a_pod_killed_by_the_abort_is_a_cancelled_replica() -> None:
    snap = describe_volcano("ns:app", _job("Running"), [_failed_pod(deleting=True)])
    assert [r.state for r in snap.replicas] == [AppState.CANCELLED]
    assert snap.state == AppState.CANCELLED


def test_a_task_count_saying_failed_after_the_abort_is_cancelled() -> None:
    snap = describe_volcano("ns:app", _job("Failed"), [])
    assert [r.state for r in snap.replicas] == [AppState.CANCELLED]
    assert snap.state == AppState.CANCELLED


def test_a_pod_that_failed_before_the_abort_stays_failed() -> None:
    snap = describe_volcano("ns:app", _job("Failed"), [_failed_pod(deleting=False)])
    assert [r.state for r in snap.replicas] == [AppState.FAILED]
    assert snap.state == AppState.FAILED
