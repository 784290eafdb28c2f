"""TorchX's push step on the Docker backend: ``dryrun_push_images`` / ``push_images``.

No engine needed: the dry run only rewrites images, and an empty push does no I/O.
"""

from __future__ import annotations

import pytest

from asyncsched.errors import InvalidRunConfigException
from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.specs import AppDef, Role
from asyncsched.workspace import WorkspaceMixin

HASH = "a" * 64


def _app(*images: str) -> AppDef:
    return AppDef(
        "push",
        roles=[
            Role(f"r{i}", image=img, entrypoint="true") for i, img in enumerate(images)
        ],
    )


def test_docker_scheduler_is_a_real_workspace_mixin() -> None:
    sched = DockerScheduler("s", docker_host="unix:///nonexistent.sock")
    assert isinstance(sched, WorkspaceMixin)
    assert {name for name, _ in sched.workspace_opts()} == {"image_repo", "quiet"}


def test_dryrun_push_rewrites_local_image_ids_of_every_role() -> None:
    sched = DockerScheduler("s", docker_host="unix:///nonexistent.sock")
    app = _app(f"sha256:{HASH}", "busybox", f"sha256:{HASH}")
    to_push = sched.dryrun_push_images(app, {"image_repo": "registry.example/team"})
    assert to_push == {f"sha256:{HASH}": ("registry.example/team", HASH)}
    assert [r.image for r in app.roles] == [
        f"registry.example/team:{HASH}",
        "busybox",
        f"registry.example/team:{HASH}",
    ]


def test_dryrun_push_needs_image_repo_for_local_images_only() -> None:
    sched = DockerScheduler("s", docker_host="unix:///nonexistent.sock")
    assert sched.dryrun_push_images(_app("busybox"), {}) == {}
    app = _app(f"sha256:{HASH}")
    with pytest.raises(InvalidRunConfigException, match="image_repo") as info:
        sched.dryrun_push_images(app, {"image_repo": None})
    assert info.value.cfg_key == "image_repo"
    assert app.roles[0].image == f"sha256:{HASH}"


async def test_pushing_nothing_needs_no_daemon() -> None:
    async with DockerScheduler("s", docker_host="unix:///nonexistent.sock") as sched:
        await sched.push_images({})
