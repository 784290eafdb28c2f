"""Kubernetes gives the answers of every other backend (issue: one app, one
behaviour): replica messages without the pod name, the app message naming the
failed replica, fail-fast siblings CANCELLED with the engine's exit code, and
the run options ``fail_fast`` and ``image_pull_policy``."""

from __future__ import annotations

from typing import Any

import pytest

from asyncsched.errors import InvalidRunConfigException
from asyncsched.schedulers.kubernetes._job_names import (
    COMPLETION_INDEX,
    LABEL_REPLICA_ID,
)
from asyncsched.schedulers.kubernetes._render import render_job
from asyncsched.schedulers.kubernetes._state import describe_indexed, describe_volcano
from asyncsched.specs import AppDef, AppState, Role, StatusReason

from .test_cancelled_replicas import LABELS


def _job(phase: str, tasks: int = 2) -> dict[str, Any]:
    def labels(i: int) -> dict[str, str]:
        return {**LABELS, LABEL_REPLICA_ID: str(i)}

    return {
        "metadata": {"name": "app", "labels": {}},
        "spec": {
            "tasks": [
                {"name": f"worker-{i}", "template": {"metadata": {"labels": labels(i)}}}
                for i in range(tasks)
            ]
        },
        "status": {"state": {"phase": phase}},
    }


def _pod(
    replica: int, phase: str, code: int | None, *, deleting: bool = False
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": f"app-worker-{replica}-0",
        "labels": {**LABELS, LABEL_REPLICA_ID: str(replica)},
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:30Z"
    state: dict[str, Any] = {"running": {"startedAt": "x"}}
    if code is not None:
        state = {"terminated": {"exitCode": code, "reason": "Error"}}
    return {
        "metadata": meta,
        "spec": {"containers": [{"name": "worker-0"}]},
        "status": {
            "phase": phase,
            "containerStatuses": [{"name": "worker-0", "state": state}],
        },
    }


def test_replica_and_app_messages_have_the_shape_of_the_other_backends() -> None:
    snap = describe_volcano(
        "ns:app", _job("Failed"), [_pod(0, "Succeeded", 0), _pod(1, "Failed", 3)]
    )
    failed = snap.replicas[1]
    assert failed.message == "exited with code 3"
    assert "app-worker" not in failed.message
    assert snap.msg == "replica worker/1 exited with code 3"


def test_fail_fast_siblings_read_cancelled_with_the_exit_code_the_kubelet_saw() -> None:
    """Volcano's TerminateJob (fail-fast) deleted the live sibling: it reads
    CANCELLED with its exit code, the replica that failed FAILED; the app is
    FAILED and over once both ended."""
    snap = describe_volcano(
        "ns:app",
        _job("Terminated"),
        [_pod(0, "Failed", 3), _pod(1, "Failed", 143, deleting=True)],
    )
    first, sibling = snap.replicas
    assert (first.state, first.exit_code) == (AppState.FAILED, 3)
    assert (sibling.state, sibling.exit_code, sibling.reason, sibling.message) == (
        AppState.CANCELLED,
        143,
        StatusReason.CANCELLED,
        "stopped: another replica failed",
    )
    assert snap.state == AppState.FAILED
    assert snap.stopped


def test_a_sibling_in_its_grace_keeps_wait_from_returning() -> None:
    snap = describe_volcano(
        "ns:app",
        _job("Terminated"),
        [_pod(0, "Failed", 3), _pod(1, "Running", None, deleting=True)],
    )
    assert snap.state == AppState.FAILED
    assert not snap.stopped


def test_a_sibling_deleted_by_the_job_controller_reads_cancelled() -> None:
    """An Indexed Job that failed deletes its other live pods."""

    def pod(index: int, phase: str, code: int, deleting: bool) -> dict[str, Any]:
        p = _pod(index, phase, code, deleting=deleting)
        p["metadata"]["annotations"] = {COMPLETION_INDEX: str(index)}
        return p

    job = {
        "metadata": {"name": "app-worker", "labels": LABELS},
        "spec": {"completions": 2},
        "status": {"conditions": [{"type": "Failed", "status": "True"}]},
    }
    snap = describe_indexed(
        "ns:app",
        [job],
        [pod(0, "Failed", 3, False), pod(1, "Failed", 143, True)],
    )
    assert [(r.state, r.exit_code) for r in snap.replicas] == [
        (AppState.FAILED, 3),
        (AppState.CANCELLED, 143),
    ]
    assert snap.replicas[1].message == "stopped: another replica failed"


def _render(cfg: dict[str, Any]) -> dict[str, Any]:
    app = AppDef("a", roles=[Role("worker", "busybox", entrypoint="true")])
    job = render_job(app, {"queue": "q", **cfg}, name="a-1", session="s", version="0")
    return job.manifests[-1]


def _container(manifest: dict[str, Any]) -> dict[str, Any]:
    spec = manifest["spec"]
    template = spec["tasks"][0]["template"] if "tasks" in spec else spec["template"]
    container: dict[str, Any] = template["spec"]["containers"][0]
    return container


def test_fail_fast_is_a_terminate_job_policy_unless_turned_off() -> None:
    policy = {"event": "PodFailed", "action": "TerminateJob"}
    assert _render({})["spec"]["policies"] == [policy]
    assert "policies" not in _render({"fail_fast": False})["spec"]


def test_fail_fast_off_on_indexed_jobs_is_refused_before_launch() -> None:
    with pytest.raises(InvalidRunConfigException, match="job_api=volcano") as info:
        _render({"job_api": "indexed", "fail_fast": False})
    assert info.value.cfg_key == "fail_fast"


@pytest.mark.parametrize("policy", ["Always", "IfNotPresent", "Never"])
def test_image_pull_policy_sets_the_main_container(policy: str) -> None:
    for job_api in ("volcano", "indexed"):
        cfg = {"job_api": job_api, "image_pull_policy": policy}
        assert _container(_render(cfg))["imagePullPolicy"] == policy
    assert "imagePullPolicy" not in _container(_render({}))


def test_an_unknown_image_pull_policy_is_refused() -> None:
    with pytest.raises(InvalidRunConfigException, match="IfNotPresent") as info:
        _render({"image_pull_policy": "Sometimes"})
    assert info.value.cfg_key == "image_pull_policy"
