"""Pods with a sidecar: logs and exit codes are the main container's.

A second container (the documented pod overlay here; a service mesh or a
secrets webhook on real clusters) makes the API server refuse a log request
that names no container (400 "a container name must be specified").
"""

from __future__ import annotations

import pytest

from asyncsched.specs import AppState

from .fakeapi.env import KubeEnv
from .helpers import IMAGE, JOB_APIS, cfg_for, make_app, scheduler

pytestmark = pytest.mark.usefixtures("kube_controller")


@pytest.mark.parametrize("job_api", JOB_APIS)
async def test_logs_and_exit_code_are_the_main_containers(
    kube_env: KubeEnv, job_api: str
) -> None:
    app = make_app("echo from-main; exit 3")
    app.roles[0].metadata["kubernetes"] = {
        "spec": {
            "containers": [
                {
                    "name": "a-sidecar",  # sorts before the main one
                    "image": IMAGE,
                    "command": ["sh", "-c", "echo from-sidecar; exit 0"],
                }
            ]
        }
    }
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(app, cfg_for(kube_env, job_api))
        final = await sched.wait(app_id, timeout=30)
        assert final is not None
        assert final.state == AppState.FAILED
        assert final.roles_statuses[0].replicas[0].exit_code == 3
        lines = [line async for line in sched.log_iter(app_id, "worker")]
    assert lines == ["from-main\n"]
