"""Bad input: a clear error naming the cause, and never a half-submitted app."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import aiodocker
import pytest

from asyncsched.errors import SchedulerUnavailableError, SpecError, SubmitError
from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.specs import AppDef, BindMount, DeviceMount, Role

from .conftest import NETWORK, SESSION, TEST_IMAGE, Engine

SESSION_LABEL_KEY = "asyncsched.io/session"
from .helpers import sh_app

pytestmark = pytest.mark.docker


async def _containers_of(docker: aiodocker.Docker, app_name: str) -> list[str]:
    items = await docker.containers.list(
        all=True, filters=json.dumps({"label": [f"asyncsched.io/app-name={app_name}"]})
    )
    return [c.id for c in items]


async def test_daemon_not_running(tmp_path: Path) -> None:
    host = f"unix://{tmp_path}/no-daemon.sock"
    async with DockerScheduler("s", docker_host=host) as sched:
        with pytest.raises(SchedulerUnavailableError) as info:
            await sched.submit(sh_app("echo x"), {})
        assert host in str(info.value)
        assert "DOCKER_HOST" in info.value.hint
        with pytest.raises(SchedulerUnavailableError):
            await sched.describe("whatever")
    # a dry run needs no daemon
    async with DockerScheduler("s", docker_host=host) as sched:
        assert (await sched.submit_dryrun(sh_app("echo x"), {})).request.containers


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
def test_socket_permission_denied(tmp_path: Path) -> None:
    sock_path = tmp_path / "root-only.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(sock_path))
    server.listen(1)
    os.chmod(sock_path, 0o600)
    # the interpreter lives under /root: import as root, then drop to nobody
    code = (
        "import asyncio, os, anyio._backends._asyncio\n"
        "from asyncsched.errors import SchedulerUnavailableError\n"
        "from asyncsched.schedulers.docker_scheduler import DockerScheduler\n"
        "os.setgroups([]); os.setgid(65534); os.setuid(65534)\n"
        "async def main():\n"
        f"    async with DockerScheduler('s', docker_host='unix://{sock_path}') as s:\n"
        "        try:\n"
        "            await s.list()\n"
        "        except SchedulerUnavailableError as exc:\n"
        "            print(exc)\n"
        "asyncio.run(main())\n"
    )
    try:
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=str(Path(__file__).parents[2]),
            check=False,
        )
    finally:
        server.close()
    assert "permission denied" in out.stdout, out.stderr
    assert "docker' group" in out.stdout


async def test_image_absent_with_pull_policy_never(
    sched: DockerScheduler, raw_docker: aiodocker.Docker
) -> None:
    app = sh_app("echo x", name="never-app", image="asyncsched-test-absent:1")
    with pytest.raises(SubmitError, match=r"asyncsched-test-absent:1.*'never'"):
        await sched.submit(app, {"image_pull_policy": "never"})
    assert await _containers_of(raw_docker, "never-app") == []


async def test_local_image_is_used_without_pulling(sched: DockerScheduler) -> None:
    # if_not_present (the default) must not reach a registry for a local image:
    # there is no registry here, so a pull would fail the submission
    app_id = await sched.submit(sh_app("true"), {})
    desc = await sched.wait(app_id, timeout=30)
    assert desc is not None
    assert desc.state.name == "SUCCEEDED"


async def test_image_that_cannot_be_pulled(
    sched: DockerScheduler, raw_docker: aiodocker.Docker
) -> None:
    app = sh_app(
        "echo x", name="pull-app", image="localhost:1/asyncsched-test/absent:1"
    )
    with pytest.raises(SubmitError, match="could not be pulled") as info:
        await sched.submit(app, {})
    assert "localhost:1" in str(info.value)
    with pytest.raises(SubmitError, match="'always'"):
        await sched.submit(
            sh_app("true", name="pull-app"), {"image_pull_policy": "always"}
        )
    assert await _containers_of(raw_docker, "pull-app") == []


async def test_invalid_mount_rolls_back_the_whole_app(
    sched: DockerScheduler, raw_docker: aiodocker.Docker, tmp_path: Path
) -> None:
    good = Role("good", image=TEST_IMAGE, entrypoint="true", num_replicas=2)
    bad = Role(
        "bad",
        image=TEST_IMAGE,
        entrypoint="true",
        mounts=[BindMount(str(tmp_path / "does-not-exist"), "/data")],
    )
    app = AppDef("mount-app", roles=[good, bad])
    with pytest.raises(SubmitError, match="mount") as info:
        await sched.submit(app, {})
    assert "does-not-exist" in str(info.value)
    assert await _containers_of(raw_docker, "mount-app") == []


async def test_missing_device_rolls_back(
    sched: DockerScheduler, raw_docker: aiodocker.Docker
) -> None:
    role = Role(
        "dev",
        image=TEST_IMAGE,
        entrypoint="true",
        num_replicas=3,
        mounts=[DeviceMount("/dev/asyncsched-missing", "/dev/x")],
    )
    with pytest.raises(SubmitError, match="asyncsched-missing"):
        await sched.submit(AppDef("dev-app", roles=[role]), {})
    assert await _containers_of(raw_docker, "dev-app") == []


async def test_name_collision_keeps_the_first_app(
    sched: DockerScheduler, raw_docker: aiodocker.Docker
) -> None:
    info = await sched.submit_dryrun(
        sh_app("echo first", name="dup-app", replicas=2), {}
    )
    app_id = await sched.schedule(info)
    with pytest.raises(SubmitError, match="already in use"):
        await sched.schedule(info)
    desc = await sched.wait(app_id, timeout=30)
    assert desc is not None
    assert desc.state.name == "SUCCEEDED"
    assert len(await _containers_of(raw_docker, "dup-app")) == 2


async def test_name_taken_by_a_foreign_container(
    sched: DockerScheduler, raw_docker: aiodocker.Docker
) -> None:
    info = await sched.submit_dryrun(sh_app("true", name="clash-app", replicas=2), {})
    taken = info.request.containers[1].name
    foreign = await raw_docker.containers.create(
        {"Image": TEST_IMAGE, "Cmd": ["true"], "Labels": {SESSION_LABEL_KEY: SESSION}},
        name=taken,
    )
    try:
        with pytest.raises(SubmitError, match=f"{taken}.*already in use"):
            await sched.schedule(info)
        assert await _containers_of(raw_docker, "clash-app") == []  # rolled back
        assert (await foreign.show())["Name"] == f"/{taken}"  # not ours: untouched
    finally:
        await foreign.delete(force=True)


async def test_unknown_app_logs_and_replica(sched: DockerScheduler) -> None:
    from asyncsched.errors import UnknownAppException

    with pytest.raises(UnknownAppException):
        [line async for line in sched.log_iter("no-such-app-bcdfg", "worker")]
    app_id = await sched.submit(sh_app("true"), {})
    with pytest.raises(ValueError, match="no replica 5"):
        [line async for line in sched.log_iter(app_id, "worker", 5)]


async def test_delete_unknown_and_network_recreated(docker_ready: Engine) -> None:
    async with DockerScheduler("s", network=NETWORK) as sched:
        await sched.delete("no-such-app-bcdfg")  # ignored
        await sched.cancel("no-such-app-bcdfg")  # ignored


async def test_too_many_replicas_are_refused_before_anything_is_created(
    sched: DockerScheduler, raw_docker: aiodocker.Docker
) -> None:
    app = sh_app("true", name="huge-app", replicas=1_000_000)
    with pytest.raises(SpecError, match=r"1000000 replicas.*at most 1023 per role"):
        await sched.submit(app, {})
    assert await _containers_of(raw_docker, "huge-app") == []
    assert [row for row in await sched.list() if row.name == "huge-app"] == []
