"""TorchX dry-run habits on the Docker backend, without an engine.

* ``DockerContainer.kwargs``: TorchX 0.7's docker-py keyword view of the
  Engine-API body (the body stays what is sent; the view is read-only).
* Patching ``make_unique`` on the TorchX-path modules pins the app ids, as
  TorchX's tests do with ``mock.patch``.
"""

from __future__ import annotations

import pytest

from asyncsched.schedulers import docker_scheduler, local_scheduler
from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import (
    AppDef,
    BindMount,
    DeviceMount,
    Resource,
    Role,
    VolumeMount,
    macros,
)

NO_DAEMON = "unix:///nonexistent-asyncsched.sock"


def _torchx_test_app() -> AppDef:
    role = Role(
        "trainer",
        image="pytorch/torchx:latest",
        entrypoint="main",
        args=[
            "--output-path",
            macros.img_root,
            "--app-id",
            macros.app_id,
            "--rank0-env",
            macros.rank0_env,
        ],
        env={"FOO": "bar"},
        resource=Resource(cpu=2, memMB=3000, gpu=4),
        port_map={"foo": 1234},
        num_replicas=1,
        max_retries=3,
        mounts=[
            BindMount(src_path="/tmp", dst_path="/tmp", read_only=True),
            DeviceMount(src_path="/dev/null", dst_path="/dev/null"),
        ],
    )
    return AppDef("test", roles=[role])


@pytest.fixture
def pinned_docker_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(docker_scheduler, "make_unique", lambda name: "app_name_42")


async def test_patched_make_unique_pins_the_docker_app_id(
    pinned_docker_ids: None,
) -> None:
    sched = DockerScheduler("s", docker_host=NO_DAEMON)
    info = await sched.submit_dryrun(_torchx_test_app(), {})
    assert info.request.app_id == "app_name_42"
    [container] = info.request.containers
    assert container.name == "app_name_42-trainer-0"
    assert container.command == [
        "main",
        "--output-path",
        "",
        "--app-id",
        "app_name_42",
        "--rank0-env",
        "TORCHX_RANK0_HOST",
    ]


async def test_patched_make_unique_pins_the_local_app_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(local_scheduler, "make_unique", lambda name: f"{name}-pinned")
    sched = LocalScheduler("s")
    app = AppDef("echo", roles=[Role("r", image="/tmp", entrypoint="echo")])
    info = await sched.submit_dryrun(app, {})
    assert info.request.app_id == "echo-pinned"
    monkeypatch.undo()
    assert (await sched.submit_dryrun(app, {})).request.app_id != "echo-pinned"


async def test_kwargs_view_has_torchx_keys_and_values(pinned_docker_ids: None) -> None:
    sched = DockerScheduler("s", docker_host=NO_DAEMON)
    [container] = (await sched.submit_dryrun(_torchx_test_app(), {})).request.containers
    kwargs = container.kwargs
    assert set(kwargs) == {
        "name",
        "environment",
        "labels",
        "hostname",
        "privileged",
        "network",
        "mounts",
        "devices",
        "restart_policy",
        "mem_limit",
        "shm_size",
        "nano_cpus",
        "device_requests",
    }
    assert kwargs["name"] == kwargs["hostname"] == "app_name_42-trainer-0"
    env = kwargs["environment"]
    assert env["FOO"] == "bar"
    assert env["TORCHX_RANK0_HOST"] == "app_name_42-trainer-0"
    assert env["TORCHX_IMAGE"] == "pytorch/torchx:latest"
    assert kwargs["labels"]["asyncsched.io/app-id"] == "app_name_42"
    assert kwargs["labels"]["asyncsched.io/replica-id"] == "0"
    assert kwargs["mem_limit"] == kwargs["shm_size"] == "3000m"
    assert kwargs["nano_cpus"] == 2_000_000_000
    # docker-py's DeviceRequest(count=4, capabilities=[["compute", "utility"]])
    assert kwargs["device_requests"] == [
        {
            "Driver": "",
            "Count": 4,
            "DeviceIDs": [],
            "Capabilities": [["compute", "utility"]],
            "Options": {},
        }
    ]
    assert kwargs["restart_policy"] == {"Name": "on-failure", "MaximumRetryCount": 3}
    assert kwargs["network"] == "asyncsched"
    assert kwargs["privileged"] is False
    # docker-py's Mount(target="/tmp", source="/tmp", read_only=True, type="bind")
    assert kwargs["mounts"] == [
        {"Target": "/tmp", "Source": "/tmp", "Type": "bind", "ReadOnly": True}
    ]
    assert kwargs["devices"] == ["/dev/null:/dev/null:rwm"]


async def test_kwargs_keys_follow_what_the_role_sets() -> None:
    sched = DockerScheduler("s", docker_host=NO_DAEMON)
    role = Role(
        "r",
        image="busybox",
        entrypoint="true",
        mounts=[
            VolumeMount(src="name", dst_path="/tmp", read_only=True),
            DeviceMount(src_path="/dev/foo", dst_path="/dev/bar"),
        ],
    )
    info = await sched.submit_dryrun(AppDef("a", roles=[role]), {"privileged": True})
    kwargs = info.request.containers[0].kwargs
    assert "restart_policy" not in kwargs
    assert "mem_limit" not in kwargs
    assert "nano_cpus" not in kwargs
    assert "device_requests" not in kwargs
    assert kwargs["privileged"] is True
    assert kwargs["mounts"] == [
        {"Target": "/tmp", "Source": "name", "Type": "volume", "ReadOnly": True}
    ]
    assert kwargs["devices"] == ["/dev/foo:/dev/bar:rwm"]


async def test_kwargs_is_a_read_only_view_of_the_body(pinned_docker_ids: None) -> None:
    sched = DockerScheduler("s", docker_host=NO_DAEMON)
    [container] = (await sched.submit_dryrun(_torchx_test_app(), {})).request.containers
    kwargs = container.kwargs
    with pytest.raises(TypeError):
        kwargs["privileged"] = True
    kwargs["mounts"].clear()
    kwargs["environment"]["FOO"] = "changed"
    assert container.body["HostConfig"]["Mounts"] != []
    assert "FOO=bar" in container.body["Env"]
    # the body is the source of truth: edits show in the view
    container.body["HostConfig"]["Memory"] = 512 * 1024 * 1024
    container.body["HostConfig"]["Privileged"] = True
    container.body["Env"].append("EXTRA=a=b")
    assert container.kwargs["mem_limit"] == "512m"
    assert container.kwargs["privileged"] is True
    assert container.kwargs["environment"]["EXTRA"] == "a=b"
    container.body["HostConfig"]["Memory"] = 1000
    assert container.kwargs["mem_limit"] == 1000
