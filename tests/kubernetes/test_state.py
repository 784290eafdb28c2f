"""Kubernetes objects -> states, without a server."""

from __future__ import annotations

from typing import Any

import pytest

from asyncsched.schedulers.kubernetes._render import render_job
from asyncsched.schedulers.kubernetes._state import (
    describe_indexed,
    describe_volcano,
    indexed_state,
    volcano_state,
)
from asyncsched.specs import AppDef, AppState, Role, StatusReason

JSON = dict[str, Any]


@pytest.mark.parametrize(
    ("phase", "state"),
    [
        ("Pending", AppState.PENDING),
        ("Aborting", AppState.RUNNING),
        ("Aborted", AppState.CANCELLED),
        ("Running", AppState.RUNNING),
        ("Restarting", AppState.RUNNING),
        ("Completing", AppState.RUNNING),
        ("Completed", AppState.SUCCEEDED),
        ("Terminating", AppState.RUNNING),
        ("Terminated", AppState.FAILED),
        ("Failed", AppState.FAILED),
        ("SomethingNew", AppState.UNKNOWN),
    ],
)
def test_volcano_phase_maps_like_torchx_and_unknown_is_unknown(
    phase: str, state: AppState
) -> None:
    assert volcano_state({"status": {"state": {"phase": phase}}}) == state


def test_volcano_job_without_status_is_submitted() -> None:
    assert volcano_state({}) == AppState.SUBMITTED
    assert volcano_state({"status": {}}) == AppState.SUBMITTED


def volcano_job(replicas: int = 2, **status: Any) -> JSON:
    app = AppDef(
        "a",
        roles=[Role("my_role", image="i", entrypoint="e", num_replicas=replicas)],
    )
    job = render_job(app, {"queue": "q"}, name="a-b", session="s", version="1")
    manifest: JSON = job.manifests[0]
    manifest["status"] = status
    return manifest


def pod(replica: int, phase: str, **container: Any) -> JSON:
    return {
        "metadata": {
            "name": f"a-b-myrole-{replica}-0",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {
                "asyncsched.io/role-name": "my_role",
                "asyncsched.io/replica-id": str(replica),
            },
        },
        # Volcano's svc plugin: hostname = pod name, subdomain = job name
        "spec": {"hostname": f"a-b-myrole-{replica}-0", "subdomain": "a-b"},
        "status": {
            "phase": phase,
            "podIP": "10.244.1.5",
            "containerStatuses": [{"state": container, "restartCount": 1}],
        },
    }


def test_replicas_come_from_pods_with_exit_codes_and_hostnames() -> None:
    job = volcano_job(state={"phase": "Failed"})
    pods = [
        pod(0, "Succeeded", terminated={"exitCode": 0}),
        pod(1, "Failed", terminated={"exitCode": 2, "reason": "Error"}),
    ]
    desc = describe_volcano("ns:a-b", job, pods)
    assert desc.state == AppState.FAILED
    [role] = desc.role_statuses()
    assert role.role == "my_role"  # as written, not normalised
    assert [(r.id, r.state, r.exit_code) for r in role.replicas] == [
        (0, AppState.SUCCEEDED, 0),
        (1, AppState.FAILED, 2),
    ]
    assert role.replicas[0].hostname == "a-b-myrole-0-0.a-b"
    assert role.replicas[0].num_restarts == 1
    # the same words as every backend, no pod name in front
    assert desc.msg == "replica my_role/1 exited with code 2"
    assert role.replicas[1].message == "exited with code 2"
    assert [(r.name, r.num_replicas) for r in desc.roles] == [("my_role", 2)]


def test_replica_without_pod_falls_back_to_task_status_count() -> None:
    job = volcano_job(
        state={"phase": "Running"},
        taskStatusCount={"myrole-1": {"phase": {"Running": 1}}},
    )
    desc = describe_volcano("ns:a-b", job, [pod(0, "Running", running={})])
    states = [r.state for r in desc.role_statuses()[0].replicas]
    assert states == [AppState.RUNNING, AppState.RUNNING]


@pytest.mark.parametrize(
    "reason",
    # ErrImageNeverPull: the image is absent and its pull policy is Never
    ["ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull"],
)
def test_stuck_image_pull_is_reported(reason: str) -> None:
    job = volcano_job(replicas=1, state={"phase": "Pending"})
    stuck = pod(0, "Pending", waiting={"reason": reason, "message": "no"})
    desc = describe_volcano("ns:a-b", job, [stuck])
    assert desc.state == AppState.PENDING
    assert desc.msg == f"{reason}: no"  # no pod name in front


def test_aborted_job_cancels_unfinished_replicas() -> None:
    job = volcano_job(state={"phase": "Aborted"})
    desc = describe_volcano(
        "ns:a-b", job, [pod(0, "Succeeded", terminated={"exitCode": 0})]
    )
    states = [r.state for r in desc.role_statuses()[0].replicas]
    assert states == [AppState.SUCCEEDED, AppState.CANCELLED]


def batch_job(role: str, completions: int, **status: Any) -> JSON:
    return {
        "metadata": {
            "name": f"a-{role}",
            "labels": {
                "asyncsched.io/role-name": role,
                "asyncsched.io/role-index": "0",
            },
        },
        "spec": {"completions": completions},
        "status": status,
    }


def test_indexed_app_state_from_job_conditions() -> None:
    done = {"conditions": [{"type": "Complete", "status": "True"}]}
    failed = {"conditions": [{"type": "Failed", "status": "True"}]}
    assert indexed_state([batch_job("r", 1, **done)]) == AppState.SUCCEEDED
    assert (
        indexed_state([batch_job("r", 1, **done), batch_job("s", 1, **failed)])
        == AppState.FAILED
    )
    assert indexed_state([batch_job("r", 1)]) == AppState.PENDING
    cancelled = batch_job("r", 1)
    cancelled["metadata"]["annotations"] = {"asyncsched.io/cancelled": "true"}
    assert indexed_state([cancelled]) == AppState.CANCELLED
    assert indexed_state([]) == AppState.UNKNOWN


def test_indexed_replicas_use_completed_indexes_when_pods_are_gone() -> None:
    job = batch_job(
        "r",
        4,
        completedIndexes="0-1,3",
        conditions=[{"type": "Failed", "status": "True"}],
    )
    desc = describe_indexed("ns:a", [job], [])
    states = [r.state for r in desc.role_statuses()[0].replicas]
    assert states == [
        AppState.SUCCEEDED,
        AppState.SUCCEEDED,
        AppState.FAILED,
        AppState.SUCCEEDED,
    ]


def test_a_command_not_found_reads_127_launch_failed_in_every_backends_words() -> None:
    missing = (
        'failed to create containerd task: exec: "nope": executable file not found'
    )
    job = volcano_job(replicas=1, state={"phase": "Failed"})
    failed = pod(
        0,
        "Failed",
        terminated={"exitCode": 128, "reason": "StartError", "message": missing},
    )
    desc = describe_volcano("ns:a-b", job, [failed])
    [replica] = desc.role_statuses()[0].replicas
    assert (replica.state, replica.exit_code) == (AppState.FAILED, 127)
    assert replica.reason == StatusReason.LAUNCH_FAILED
    assert replica.message == f"command not found (exit code 127): {missing}"
    assert desc.msg == f"replica my_role/0 command not found (exit code 127): {missing}"
