"""A replica stopped by a cancel is CANCELLED, one that failed by itself FAILED.

Aborting a Volcano Job deletes the pods still live and keeps those that had
already failed: a pod being deleted when the Job is Aborted was stopped by
the cancel, whenever the cache happens to read it.
"""

from __future__ import annotations

from typing import Any, cast

from asyncsched.schedulers.kubernetes._caches import KEEP_DELETED_PODS, Caches
from asyncsched.schedulers.kubernetes._job_names import (
    LABEL_APP_ID,
    LABEL_REPLICA_ID,
    LABEL_ROLE_INDEX,
    LABEL_ROLE_NAME,
)
from asyncsched.schedulers.kubernetes._state import describe_volcano
from asyncsched.schedulers.shared.changes import ChangeNotifier
from asyncsched.specs import AppState, StatusReason

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


def _running_pod(deleting: bool) -> dict[str, Any]:
    pod = _failed_pod(deleting)
    pod["status"] = {
        "phase": "Running",
        "containerStatuses": [
            {"name": "worker-0", "state": {"running": {"startedAt": "x"}}}
        ],
    }
    return pod


def test_a_pod_still_in_its_grace_keeps_the_cancelled_app_from_being_over() -> None:
    """Aborted, but the pod runs on (its SIGTERM grace): the app reads
    CANCELLED, yet ``wait`` must not return it (the replica still runs)."""
    for deleting in (False, True):
        snap = describe_volcano(
            "ns:app", _job("Running"), [_running_pod(deleting=deleting)]
        )
        assert snap.state == AppState.CANCELLED
        assert [r.state for r in snap.replicas] == [AppState.RUNNING]
        assert not snap.stopped


def test_a_deleted_pod_gives_the_cancelled_replica_its_exit_code() -> None:
    """The abort deleted the pod: its last status, kept by the cache, says
    how it ended."""
    snap = describe_volcano(
        "ns:app", _job("Failed"), [], deleted=[_failed_pod(deleting=True)]
    )
    [replica] = snap.replicas
    assert (replica.state, replica.exit_code, replica.reason) == (
        AppState.CANCELLED,
        143,
        StatusReason.CANCELLED,
    )
    assert snap.stopped


def test_the_pods_cache_remembers_deleted_pods_by_app() -> None:
    caches = Caches(cast(Any, None), "ns", changes=ChangeNotifier(), live=False)
    pod = _failed_pod(deleting=True)
    pod["metadata"]["labels"] = {**LABELS, LABEL_APP_ID: "app"}
    pod["metadata"]["resourceVersion"] = "7"
    caches.pods._apply({"type": "MODIFIED", "object": pod})
    assert caches.pods.with_key("ns:app") == [pod]
    caches.pods._apply({"type": "DELETED", "object": pod})
    assert caches.pods.with_key("ns:app") == []
    [kept] = caches.pods.deleted_with_key("ns:app")
    assert kept["status"]["phase"] == "Failed"
    # a new pod of the same name replaces what was remembered
    caches.pods._apply({"type": "ADDED", "object": _running_pod(deleting=False)})
    assert caches.pods.deleted_with_key("ns:app") == []


def test_the_pods_cache_remembers_a_bounded_number_of_deleted_pods() -> None:
    caches = Caches(cast(Any, None), "ns", changes=ChangeNotifier(), live=False)
    for i in range(KEEP_DELETED_PODS + 10):
        pod = _failed_pod(deleting=True)
        pod["metadata"]["name"] = f"p{i}"
        pod["metadata"]["labels"] = {**LABELS, LABEL_APP_ID: f"app{i % 3}"}
        caches.pods._apply({"type": "DELETED", "object": pod})
    assert len(caches.pods.deleted) == KEEP_DELETED_PODS
    assert "p0" not in caches.pods.deleted  # the oldest went first
    total = sum(len(caches.pods.deleted_with_key(f"ns:app{i}")) for i in range(3))
    assert total == KEEP_DELETED_PODS


def test_a_pod_deleted_while_it_ran_gives_the_code_the_kubelet_reported() -> None:
    """Kubernetes 1.20's kubelet reports the container of a pod deleted while
    it ran only as its last state (137, ContainerStatusUnknown)."""
    pod = _failed_pod(deleting=True)
    last = {"exitCode": 137, "reason": "ContainerStatusUnknown"}
    pod["status"]["containerStatuses"] = [
        {
            "name": "worker-0",
            "state": {"waiting": {"reason": "ContainerCreating"}},
            "lastState": {"terminated": last},
        }
    ]
    snap = describe_volcano("ns:app", _job("Running"), [pod])
    [replica] = snap.replicas
    assert (replica.state, replica.exit_code, replica.reason) == (
        AppState.CANCELLED,
        137,
        StatusReason.CANCELLED,
    )
