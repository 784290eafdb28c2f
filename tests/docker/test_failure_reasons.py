"""Every non-success on the real Docker engine carries a typed reason."""

from __future__ import annotations

import aiodocker
import pytest

from asyncsched.errors import SpecError
from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.specs import AppDef, AppState, Resource, Role, StatusReason
from asyncsched.testing import wait_for_state

from .conftest import TEST_IMAGE
from .helpers import sh_app, submit_all


def _app(script: str, mem_mb: int = 64) -> AppDef:
    role = Role(
        name="worker",
        image=TEST_IMAGE,
        entrypoint="sh",
        args=["-c", script],
        resource=Resource(cpu=1, gpu=0, memMB=mem_mb),
    )
    return AppDef(name="reasons", roles=[role])


async def test_an_out_of_memory_kill_reads_oom_killed(sched: DockerScheduler) -> None:
    # dd allocates its 64 MiB block at once: over a 20 MiB limit the kernel kills it
    app_id = await sched.submit(
        _app("dd if=/dev/zero of=/dev/null bs=64M count=1", mem_mb=20), {}
    )
    desc = await sched.wait(app_id, timeout=60)
    assert desc is not None
    assert desc.state == AppState.FAILED
    [replica] = desc.roles_statuses[0].replicas
    assert replica.reason == StatusReason.OOM_KILLED
    assert replica.exit_code == 137
    assert "out of memory" in replica.message
    assert desc.reason == StatusReason.OOM_KILLED
    assert "out of memory" in desc.msg


async def test_exit_codes_and_a_kill_from_outside(
    sched: DockerScheduler, raw_docker: aiodocker.Docker
) -> None:
    failed, killed = await submit_all(
        sched, [sh_app("exit 3"), sh_app("echo ready; exec sleep 300")]
    )
    desc = await sched.wait(failed, timeout=60)
    assert desc is not None
    [replica] = desc.roles_statuses[0].replicas
    assert (replica.reason, replica.exit_code) == (StatusReason.EXIT_CODE, 3)
    assert desc.reason == StatusReason.EXIT_CODE

    await wait_for_state(sched, killed, AppState.RUNNING, timeout=30)
    [container] = await raw_docker.containers.list(
        filters={"label": [f"asyncsched.io/app-id={killed}"]}
    )
    await container.kill(signal="SIGKILL")
    desc = await sched.wait(killed, timeout=60)
    assert desc is not None
    [replica] = desc.roles_statuses[0].replicas
    assert replica.state == AppState.FAILED
    assert (replica.reason, replica.exit_code) == (StatusReason.SIGNAL, 137)
    assert "SIGKILL" in replica.message


async def test_a_cancelled_app_reads_cancelled(sched: DockerScheduler) -> None:
    app_id = await sched.submit(sh_app("exec sleep 300"), {})
    await sched.cancel(app_id)
    desc = await sched.wait(app_id, timeout=60)
    assert desc is not None
    assert desc.state == AppState.CANCELLED
    assert desc.roles_statuses[0].replicas[0].reason == StatusReason.CANCELLED
    assert desc.reason == StatusReason.CANCELLED


async def test_an_entrypoint_that_cannot_run_fails_the_submit_with_the_engines_words(
    sched: DockerScheduler, raw_docker: aiodocker.Docker
) -> None:
    role = Role(name="worker", image=TEST_IMAGE, entrypoint="/no/such/program")
    # a command the engine cannot find is bad input, as on every backend that
    # can tell before launch (the engine's own words kept)
    with pytest.raises(SpecError, match="no such file or directory"):
        await sched.submit(AppDef(name="nolaunch", roles=[role]), {})
    left = await raw_docker.containers.list(
        all=True, filters={"label": [f"asyncsched.io/session={sched.session_name}"]}
    )
    assert [c["Names"] for c in left if "nolaunch" in str(c["Names"])] == []
