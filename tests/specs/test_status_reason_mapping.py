"""Each backend maps what its engine reports to a StatusReason (pure mappings).

The inputs are shaped as the engines write them: Docker's ``State`` object, a
pod status as the kubelet writes it, Slurm's state words and pending reasons.
Real-engine tests live beside each backend.
"""

from __future__ import annotations

from typing import Any

import pytest

from asyncsched.schedulers.docker._reasons import container_reason
from asyncsched.schedulers.kubernetes._reasons import pod_reason
from asyncsched.schedulers.slurm._reasons import (
    exit_code_of,
    pending_reason,
    state_reason,
)
from asyncsched.specs import StatusReason


def test_docker_oom_kill_reads_oom_not_exit_137() -> None:
    reason, message = container_reason(
        {"Status": "exited", "ExitCode": 137, "OOMKilled": True}
    )
    assert reason == StatusReason.OOM_KILLED
    assert "out of memory" in message


def test_docker_runtime_error_is_a_launch_failure_with_the_engines_words() -> None:
    error = 'exec: "nope": executable file not found in $PATH'
    reason, message = container_reason(
        {"Status": "created", "ExitCode": 127, "Error": error}
    )
    assert (reason, message) == (StatusReason.LAUNCH_FAILED, error)


@pytest.mark.parametrize(
    ("code", "reason"),
    [(0, None), (3, StatusReason.EXIT_CODE), (143, StatusReason.SIGNAL)],
)
def test_docker_exit_codes(code: int, reason: StatusReason | None) -> None:
    assert container_reason({"Status": "exited", "ExitCode": code})[0] == reason


def test_docker_cancel_by_the_user_wins_and_running_has_no_reason() -> None:
    stopped = {"Status": "exited", "ExitCode": 137}
    assert container_reason(stopped, cancelled=True)[0] == StatusReason.CANCELLED
    assert container_reason({"Status": "running"}) == (None, "")


def _pod(
    phase: str,
    *containers: dict[str, Any],
    reason: str | None = None,
    conditions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "containerStatuses": list(containers)}
    if reason:
        status["reason"] = reason
        status["message"] = "The node was low on resource: memory."
    if conditions:
        status["conditions"] = conditions
    return {"metadata": {"name": "p"}, "status": status}


def _terminated(name: str, reason: str, code: int) -> dict[str, Any]:
    return {
        "name": name,
        "ready": False,
        "restartCount": 0,
        "state": {"terminated": {"reason": reason, "exitCode": code}},
    }


def test_kubernetes_reads_the_main_container_not_a_sidecar_sorted_first() -> None:
    # the kubelet sorts container statuses by name: "envoy" before "main"
    pod = _pod(
        "Failed",
        _terminated("envoy", "Completed", 0),
        _terminated("main", "OOMKilled", 137),
    )
    got = pod_reason(pod, "main")
    assert (got.reason, got.exit_code) == (StatusReason.OOM_KILLED, 137)
    assert pod_reason(pod, "envoy").reason is None


@pytest.mark.parametrize(
    ("waiting", "reason"),
    [
        ("ErrImagePull", StatusReason.IMAGE_PULL),
        ("ImagePullBackOff", StatusReason.IMAGE_PULL),
        ("ErrImageNeverPull", StatusReason.IMAGE_PULL),
        ("CreateContainerConfigError", StatusReason.LAUNCH_FAILED),
        ("ContainerCreating", None),
    ],
)
def test_kubernetes_waiting_reasons(waiting: str, reason: StatusReason | None) -> None:
    status = {
        "name": "main",
        "state": {"waiting": {"reason": waiting, "message": "words"}},
    }
    got = pod_reason(_pod("Pending", status), "main")
    assert got.reason == reason
    if reason is not None:
        assert got.message == f"{waiting}: words"


def test_kubernetes_evicted_and_unschedulable_pods() -> None:
    evicted = pod_reason(_pod("Failed", reason="Evicted"), "main")
    assert evicted.reason == StatusReason.EVICTED
    assert "low on resource" in evicted.message
    unschedulable = _pod(
        "Pending",
        conditions=[
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/1 nodes are available: 1 Insufficient cpu.",
            }
        ],
    )
    got = pod_reason(unschedulable, "main")
    assert got.reason == StatusReason.UNSCHEDULABLE
    assert "Insufficient cpu" in got.message


def test_kubernetes_error_exit_is_an_exit_code_or_a_signal() -> None:
    assert pod_reason(_pod("Failed", _terminated("main", "Error", 3))).reason == (
        StatusReason.EXIT_CODE
    )
    killed = pod_reason(_pod("Failed", _terminated("main", "Error", 143)))
    assert (killed.reason, killed.exit_code) == (StatusReason.SIGNAL, 143)


@pytest.mark.parametrize(
    ("state", "code", "reason"),
    [
        ("TIMEOUT", "0:0", StatusReason.TIME_LIMIT),
        ("OUT_OF_MEMORY", "0:125", StatusReason.OOM_KILLED),
        ("NODE_FAIL", "0:0", StatusReason.NODE_FAILURE),
        ("PREEMPTED", "0:0", StatusReason.PREEMPTED),
        ("CANCELLED by 1000", "0:15", StatusReason.CANCELLED),
        ("FAILED", "3:0", StatusReason.EXIT_CODE),
        ("FAILED", "0:9", StatusReason.SIGNAL),
        ("COMPLETED", "0:0", None),
        ("RUNNING", "0:0", None),
    ],
)
def test_slurm_states(state: str, code: str, reason: StatusReason | None) -> None:
    assert state_reason(state, code)[0] == reason


def test_slurm_cancel_message_keeps_who_cancelled() -> None:
    assert "by 1000" in state_reason("CANCELLED by 1000")[1]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Resources", StatusReason.QUEUED),
        ("(Priority)", StatusReason.QUEUED),
        ("ReqNodeNotAvail, UnavailableNodes:n1", StatusReason.UNSCHEDULABLE),
        ("PartitionTimeLimit", StatusReason.UNSCHEDULABLE),
        ("launch failed requeued held", StatusReason.LAUNCH_FAILED),
        ("None", None),
    ],
)
def test_slurm_pending_reasons(text: str, reason: StatusReason | None) -> None:
    assert pending_reason(text)[0] == reason


def test_slurm_exit_code_pairs_become_one_code() -> None:
    assert [exit_code_of(t) for t in ("0:0", "3:0", "0:15", "x")] == [0, 3, 143, None]
