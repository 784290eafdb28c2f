"""The dry run (container create bodies) -- no daemon needed."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from asyncsched._version import __version__
from asyncsched.errors import AsyncschedWarning, InvalidRunConfigException, SpecError
from asyncsched.schedulers.docker._render import (
    DockerJob,
    container_name,
    render_job,
)
from asyncsched.schedulers.docker._state import LABEL_FAIL_FAST, LABEL_MAX_RETRIES
from asyncsched.schedulers.docker_scheduler import DockerScheduler, create_scheduler
from asyncsched.schedulers.shared.labels import (
    LABEL_APP_ID,
    LABEL_APP_NAME,
    LABEL_REPLICA_ID,
    LABEL_ROLE_INDEX,
    LABEL_ROLE_NAME,
    LABEL_SESSION,
    LABEL_VERSION,
)
from asyncsched.specs import (
    AppDef,
    BindMount,
    DeviceMount,
    Resource,
    Role,
    VolumeMount,
    macros,
)

APP_ID = "app_name_42"


def _app(**role_kwargs: Any) -> AppDef:
    kwargs: dict[str, Any] = {
        "name": "trainer",
        "image": "pytorch/torchx:latest",
        "entrypoint": "main",
        "args": [
            "--output-path",
            macros.img_root,
            "--app-id",
            macros.app_id,
            "--rank0-env",
            macros.rank0_env,
        ],
        "env": {"FOO": "bar"},
        "resource": Resource(cpu=2, memMB=3000, gpu=4),
        "port_map": {"foo": 1234},
        "num_replicas": 1,
        "max_retries": 3,
        "mounts": [
            BindMount(src_path="/tmp", dst_path="/tmp", read_only=True),
            DeviceMount(src_path="/dev/null", dst_path="/dev/null"),
        ],
    }
    kwargs.update(role_kwargs)
    return AppDef("test", roles=[Role(**kwargs)])


def _job(
    app: AppDef | None = None, cfg: dict[str, Any] | None = None, **kw: Any
) -> DockerJob:
    return render_job(
        app or _app(),
        APP_ID,
        cfg or {},
        session="sess",
        version="9.9",
        environ={},
        **kw,
    )


def _env(body: dict[str, Any]) -> dict[str, str]:
    return dict(item.split("=", 1) for item in body["Env"])


def test_one_container_with_image_command_name_hostname() -> None:
    job = _job()
    assert job.app_id == APP_ID
    [c] = job.containers
    assert c.image == c.body["Image"] == "pytorch/torchx:latest"
    assert (
        c.command
        == c.body["Cmd"]
        == [
            "main",
            "--output-path",
            "",
            "--app-id",
            APP_ID,
            "--rank0-env",
            "TORCHX_RANK0_HOST",
        ]
    )
    assert c.name == c.body["Hostname"] == "app_name_42-trainer-0"


def test_environment_and_labels() -> None:
    [c] = _job().containers
    assert _env(c.body) == {
        "FOO": "bar",
        "TORCHX_RANK0_HOST": "app_name_42-trainer-0",
        "TORCHX_IMAGE": "pytorch/torchx:latest",
        "ASYNCSCHED_APP_ID": APP_ID,
        "ASYNCSCHED_ROLE_NAME": "trainer",
        "ASYNCSCHED_REPLICA_ID": "0",
        "ASYNCSCHED_NUM_REPLICAS": "1",
    }
    assert c.body["Labels"] == {
        LABEL_APP_ID: APP_ID,
        LABEL_APP_NAME: "test",
        LABEL_ROLE_NAME: "trainer",
        LABEL_ROLE_INDEX: "0",
        LABEL_REPLICA_ID: "0",
        LABEL_SESSION: "sess",
        LABEL_VERSION: "9.9",
        LABEL_FAIL_FAST: "true",
        LABEL_MAX_RETRIES: "3",
    }
    assert all(key.startswith("asyncsched.io/") for key in c.body["Labels"])


def test_fail_fast_off_is_recorded_in_a_label() -> None:
    job = _job(cfg={"fail_fast": False})
    assert {c.body["Labels"][LABEL_FAIL_FAST] for c in job.containers} == {"false"}


def test_resources_restart_network_mounts_devices() -> None:
    [c] = _job().containers
    host = c.body["HostConfig"]
    assert host["Memory"] == host["ShmSize"] == 3000 * 1024 * 1024 == 3_145_728_000
    assert host["NanoCpus"] == 2_000_000_000
    assert host["DeviceRequests"] == [
        {
            "Driver": "",
            "Count": 4,
            "DeviceIDs": [],
            "Capabilities": [["compute", "utility"]],
            "Options": {},
        }
    ]
    assert host["RestartPolicy"] == {"Name": "on-failure", "MaximumRetryCount": 3}
    assert host["NetworkMode"] == "asyncsched"
    assert host["Privileged"] is False
    assert host["Mounts"] == [
        {"Target": "/tmp", "Source": "/tmp", "Type": "bind", "ReadOnly": True}
    ]
    assert host["Devices"] == [
        {
            "PathOnHost": "/dev/null",
            "PathInContainer": "/dev/null",
            "CgroupPermissions": "rwm",
        }
    ]
    # port_map renders nothing; the key set is exactly this
    assert set(host) == {
        "NetworkMode",
        "Privileged",
        "Mounts",
        "Devices",
        "RestartPolicy",
        "Memory",
        "ShmSize",
        "NanoCpus",
        "DeviceRequests",
    }
    assert set(c.body) == {"Image", "Cmd", "Hostname", "Env", "Labels", "HostConfig"}


def test_null_resource_and_no_retries_render_no_limits() -> None:
    from asyncsched.specs import NULL_RESOURCE

    [c] = _job(_app(resource=NULL_RESOURCE, max_retries=0, mounts=[])).containers
    host = c.body["HostConfig"]
    assert not {
        "Memory",
        "ShmSize",
        "NanoCpus",
        "DeviceRequests",
        "RestartPolicy",
    } & set(host)


def test_zero_memory_still_sets_shm_like_torchx() -> None:
    [c] = _job(_app(resource=Resource(cpu=0, gpu=0, memMB=0))).containers
    assert c.body["HostConfig"]["Memory"] == 0
    assert c.body["HostConfig"]["NanoCpus"] == 0
    assert "DeviceRequests" not in c.body["HostConfig"]


def test_volume_and_device_mounts() -> None:
    app = _app(
        mounts=[
            VolumeMount(src="name", dst_path="/tmp", read_only=True),
            DeviceMount(src_path="/dev/foo", dst_path="/dev/bar", permissions="r"),
        ]
    )
    [c] = _job(app).containers
    assert c.body["HostConfig"]["Mounts"] == [
        {"Target": "/tmp", "Source": "name", "Type": "volume", "ReadOnly": True}
    ]
    assert c.body["HostConfig"]["Devices"] == [
        {
            "PathOnHost": "/dev/foo",
            "PathInContainer": "/dev/bar",
            "CgroupPermissions": "r",
        }
    ]


def test_resource_devices_in_dict_order_and_role_not_mutated() -> None:
    res = Resource(
        cpu=1,
        gpu=0,
        memMB=1,
        devices={
            "vpc.amazonaws.com/efa": 1,
            "aws.amazon.com/neurondevice": 2,
            "x/y": 1,
        },
    )
    app = _app(resource=res, mounts=[])
    for _ in range(2):  # a repeated dry run does not duplicate devices
        with pytest.warns(AsyncschedWarning, match="Could not find named device: x/y"):
            [c] = _job(app).containers
        assert [d["PathOnHost"] for d in c.body["HostConfig"]["Devices"]] == [
            "/dev/infiniband/uverbs0",
            "/dev/neuron0",
            "/dev/neuron1",
        ]
    assert app.roles[0].mounts == []


def test_copy_env_is_anchored_and_env_overrides() -> None:
    environ = {"FOO_1": "f1", "BAR_1": "b1", "FOOBAR_1": "fb1"}
    job = render_job(
        _app(),
        APP_ID,
        {"copy_env": ["FOO_*", "BAR_*"], "env": {"BAR_1": "override", "NEW": "n"}},
        session="s",
        version="v",
        environ=environ,
    )
    env = _env(job.containers[0].body)
    assert env["FOO_1"] == "f1"
    assert env["BAR_1"] == "override"
    assert env["NEW"] == "n"
    assert "FOOBAR_1" not in env
    assert env["FOO"] == "bar"
    assert env["TORCHX_RANK0_HOST"] == "app_name_42-trainer-0"


def test_role_env_wins_over_cfg_env_and_rank0_wins_over_role() -> None:
    app = _app(env={"A": "role", "TORCHX_RANK0_HOST": "mine"})
    env = _env(_job(app, {"env": {"A": "cfg"}}).containers[0].body)
    assert env["A"] == "role"
    assert env["TORCHX_RANK0_HOST"] == "app_name_42-trainer-0"


def test_privileged() -> None:
    assert _job(cfg={"privileged": True}).containers[0].body["HostConfig"]["Privileged"]


def test_replicas_and_roles_get_names_labels_and_rank0() -> None:
    app = _app(num_replicas=2, args=["${replica_id}"], mounts=[])
    app.roles.append(Role("ps", image="img", entrypoint="run", num_replicas=1))
    job = _job(app)
    assert [c.name for c in job.containers] == [
        "app_name_42-trainer-0",
        "app_name_42-trainer-1",
        "app_name_42-ps-0",
    ]
    assert [c.command[-1] for c in job.containers[:2]] == ["0", "1"]
    assert {_env(c.body)["TORCHX_RANK0_HOST"] for c in job.containers} == {
        "app_name_42-trainer-0"
    }
    assert [c.body["Labels"][LABEL_ROLE_INDEX] for c in job.containers] == [
        "0",
        "0",
        "1",
    ]
    assert [(c.role, c.replica_id) for c in job.containers] == [
        ("trainer", 0),
        ("trainer", 1),
        ("ps", 0),
    ]
    assert job.images == ["pytorch/torchx:latest", "img"]


def test_long_and_odd_names_are_valid_docker_names() -> None:
    valid = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]+$")
    role = "a" * 120
    for app_id in ("__.-_" + "x" * 40, "-_.-_-_.-_-_.-_-_.-_-_.-_-_.-_app-bq4f"):
        name = container_name(app_id, role, 0)
        assert len(name) < 65
        assert valid.match(name)
        job = render_job(
            _app(name=role, mounts=[]), app_id, {}, session="s", version="v", environ={}
        )
        # TORCHX_RANK0_HOST is cleaned the same way as the name (TorchX's bug fixed)
        assert (
            _env(job.containers[0].body)["TORCHX_RANK0_HOST"] == job.containers[0].name
        )


def test_bad_mounts_and_policy_are_rejected_before_io() -> None:
    with pytest.raises(SpecError, match=r"mounts\[0\]\.src_path"):
        _job(_app(mounts=[BindMount(src_path="relative", dst_path="/x")]))
    with pytest.raises(SpecError, match="dst_path"):
        _job(_app(mounts=[VolumeMount(src="v", dst_path="x")]))
    with pytest.raises(SpecError, match="permissions"):
        _job(
            _app(
                mounts=[
                    DeviceMount(src_path="/dev/a", dst_path="/dev/a", permissions="x")
                ]
            )
        )
    with pytest.raises(InvalidRunConfigException) as info:
        _job(cfg={"image_pull_policy": "sometimes"})
    assert info.value.cfg_key == "image_pull_policy"


def test_repr_is_yaml_of_the_requests() -> None:
    doc = yaml.safe_load(repr(_job()))
    assert doc["app_id"] == APP_ID
    assert doc["containers"][0]["name"] == "app_name_42-trainer-0"
    assert doc["containers"][0]["body"]["HostConfig"]["NanoCpus"] == 2_000_000_000


async def test_scheduler_dryrun_needs_no_daemon(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    sched = create_scheduler("sess", network="net1", unknown_kwarg=1)
    assert isinstance(sched, DockerScheduler)
    assert sched.docker_host == "unix:///nonexistent/docker.sock"
    info = await sched.submit_dryrun(_app(), {"env": {"X": "1"}})
    job = info.request
    assert isinstance(job, DockerJob)
    assert job.app_id.startswith("test-")
    assert job.network == "net1"
    assert job.image_pull_policy == "if_not_present"
    assert job.containers[0].body["Labels"][LABEL_VERSION] == __version__
    assert job.containers[0].body["Labels"][LABEL_SESSION] == "sess"
    assert "X=1" in job.containers[0].body["Env"]
    assert repr(info).startswith("app_id:")
    await sched.aclose()


def test_run_and_workspace_options() -> None:
    sched = DockerScheduler("s")
    assert {k for k, _ in sched.workspace_opts()} == {"image_repo", "quiet"}
    assert {k for k, _ in sched.run_opts()} == {
        "copy_env",
        "env",
        "privileged",
        "fail_fast",
        "image_pull_policy",
        "image_repo",
        "quiet",
    }
    resolved = sched.resolve_cfg({})
    assert resolved["image_pull_policy"] == "if_not_present"
    assert resolved["quiet"] is False


def test_explicit_host_beats_docker_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://1.2.3.4:2375")
    assert DockerScheduler("s").docker_host == "tcp://1.2.3.4:2375"
    assert (
        DockerScheduler("s", docker_host="unix:///x.sock").docker_host
        == "unix:///x.sock"
    )
    monkeypatch.delenv("DOCKER_HOST")
    assert DockerScheduler("s").docker_host == "unix:///var/run/docker.sock"


def test_an_empty_image_is_rejected_naming_the_field() -> None:
    with pytest.raises(SpecError) as info:
        _job(_app(image=""))
    assert info.value.field == "roles[0].image"
