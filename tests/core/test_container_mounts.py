"""Docker and Kubernetes refuse a bad mount the same way, before any I/O."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from asyncsched.errors import SpecError
from asyncsched.schedulers.docker._render import render_job as docker_render
from asyncsched.schedulers.kubernetes._render import render_job as kubernetes_render
from asyncsched.specs import AppDef, BindMount, DeviceMount, Role, VolumeMount


def _docker(app: AppDef) -> object:
    return docker_render(app, "app-1", {}, session="s", version="v", environ={})


def _kubernetes(app: AppDef) -> object:
    return kubernetes_render(
        app, {"queue": "q"}, name="app-1", session="s", version="v"
    )


RENDERS: list[Callable[[AppDef], object]] = [_docker, _kubernetes]


@pytest.mark.parametrize("render", RENDERS, ids=["docker", "kubernetes"])
@pytest.mark.parametrize(
    ("mount", "field", "words"),
    [
        (BindMount("data", "/in"), "src_path", "must be an absolute path, got 'data'"),
        (BindMount("/data", "in"), "dst_path", "must be an absolute path, got 'in'"),
        (VolumeMount("", "/in"), "src", "a volume mount needs a"),
        (VolumeMount("v", "in"), "dst_path", "must be an absolute path, got 'in'"),
        (DeviceMount("fuse", "/dev/fuse"), "src_path", "must be an absolute path"),
        (DeviceMount("/dev/fuse", "fuse"), "dst_path", "must be an absolute path"),
        ("type=bind", "", "unknown mount type str"),
    ],
    ids=[
        "bind-src",
        "bind-dst",
        "volume-name",
        "volume-dst",
        "device-src",
        "device-dst",
        "no-mount",
    ],
)
def test_a_bad_mount_is_refused_naming_its_field(
    render: Callable[[AppDef], object], mount: Any, field: str, words: str
) -> None:
    good = BindMount("/data", "/in")
    role = Role("r", image="img", entrypoint="true", mounts=[good, mount])
    with pytest.raises(SpecError) as info:
        render(AppDef("app", roles=[role]))
    assert info.value.field == "roles[0].mounts[1]" + (f".{field}" if field else "")
    assert words in str(info.value)
