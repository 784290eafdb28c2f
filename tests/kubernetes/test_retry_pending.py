"""A replica Volcano is about to restart does not end its app.

The failed pod reaches the watch a moment before the Job turns
``Restarting``: ``wait`` (and the events) must not read the app as FAILED in
between, then RUNNING again.
"""

from __future__ import annotations

from typing import Any

import pytest

from asyncsched.schedulers.kubernetes._render import render_job
from asyncsched.schedulers.kubernetes._state import describe_volcano
from asyncsched.specs import AppDef, AppState, Role

from .fakeapi.env import KubeEnv
from .helpers import cfg_for, make_app, scheduler


def _job(retries: int, version: int, max_retry: int = 1) -> dict[str, Any]:
    app = AppDef(
        "a",
        roles=[
            Role("my_role", image="i", entrypoint="e", max_retries=max_retry),
        ],
    )
    job = render_job(app, {"queue": "q"}, name="a-b", session="s", version="1")
    manifest: dict[str, Any] = job.manifests[0]
    manifest["status"] = {
        "state": {"phase": "Running"},
        "retryCount": retries,
        "version": version,
    }
    return manifest


def _pod(version: int, phase: str, **container: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"a-b-myrole-0-{version}",
            "creationTimestamp": "2026-01-01T00:00:00Z",  # the same second
            "annotations": {"volcano.sh/job-version": str(version)},
            "labels": {
                "asyncsched.io/role-name": "my_role",
                "asyncsched.io/replica-id": "0",
            },
        },
        "status": {"phase": phase, "containerStatuses": [{"state": container}]},
    }


def test_a_failed_pod_with_retries_left_reads_pending_with_its_exit_code() -> None:
    failed = _pod(0, "Failed", terminated={"exitCode": 4, "reason": "Error"})
    desc = describe_volcano("ns:a-b", _job(retries=0, version=0), [failed])
    [replica] = desc.replicas
    assert (replica.state, replica.exit_code) == (AppState.PENDING, 4)
    assert desc.state == AppState.PENDING


def test_a_failed_pod_seen_before_its_jobs_first_status_reads_pending() -> None:
    """The Jobs' watch behind the pods' (a resumed reader replaying both):
    the retry's pod failed while the cached Job has no status yet. Read as
    FAILED, a reader saw the app end, then PENDING once the status came."""
    job = _job(retries=0, version=0)
    del job["status"]
    failed = _pod(1, "Failed", terminated={"exitCode": 4, "reason": "Error"})
    desc = describe_volcano("ns:a-b", job, [failed])
    [replica] = desc.replicas
    assert (replica.state, replica.exit_code) == (AppState.PENDING, 4)
    assert desc.state == AppState.PENDING


def test_the_last_attempt_is_read_not_a_lingering_pod_of_an_earlier_one() -> None:
    # the retry budget is spent (1 of 1): the new attempt runs while the
    # failed pod of the first attempt is still being deleted
    job = _job(retries=1, version=1)
    old = _pod(0, "Failed", terminated={"exitCode": 4, "reason": "Error"})
    new = _pod(1, "Running", running={})
    for pods in ([new, old], [old, new]):
        desc = describe_volcano("ns:a-b", job, pods)
        assert desc.state == AppState.RUNNING, pods
    # only the earlier attempt's pod is left: its replacement is on its way
    desc = describe_volcano("ns:a-b", job, [old])
    assert desc.state == AppState.PENDING


@pytest.mark.usefixtures("kube_controller")
async def test_wait_returns_after_the_retry_of_a_failed_replica(
    kube_env: KubeEnv,
) -> None:
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(
            make_app("sleep 1; exit 4", name="retried", retries=1),
            cfg_for(kube_env, "volcano"),
        )
        final = await sched.wait(app_id, timeout=120)
    assert final is not None
    assert final.state == AppState.FAILED
    assert final.num_restarts == 1  # not the first attempt's failure
    replica = final.roles_statuses[0].replicas[0]
    assert replica.state == AppState.FAILED
    assert replica.exit_code == 4
