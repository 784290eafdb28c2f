"""Workspaces pushed to a real registry (Debian's docker-registry), run by the engine.

The edit-run loop: a workspace is built over the role's image, pushed to
``image_repo``, and the replica runs the pushed name -- which any other
engine can pull. Authenticated registries take the credentials of
``$DOCKER_CONFIG/config.json``; a registry lost mid-push is a clear error,
nothing is submitted, and the built image stays for the next try.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import aiodocker
import anyio
import pytest

from asyncsched.errors import SchedulerError
from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.specs import AppState, Role

from .conftest import SESSION_LABEL, TEST_IMAGE
from .helpers import lines, sh_app
from .registry import (
    PASSWORD,
    USER,
    CuttingProxy,
    Registry,
    docker_config_auth,
    free_port,
)

pytestmark = pytest.mark.docker


def _repo_name(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


def _workspace(tmp_path: Path, text: str) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "ws.txt").write_text(text)
    return ws


async def _session_containers(docker: aiodocker.Docker) -> list[str]:
    found = await docker.containers.list(
        all=True, filters=json.dumps({"label": [SESSION_LABEL]})
    )
    return [c.id for c in found]


async def _session_images(docker: aiodocker.Docker) -> set[str]:
    found = await docker.images.list(filters={"label": [SESSION_LABEL]})
    return {str(image["Id"]) for image in found}


async def test_workspace_is_pushed_and_runs_by_the_pushed_name_anywhere(
    sched: DockerScheduler,
    registry: Registry,
    raw_docker: aiodocker.Docker,
    tmp_path: Path,
) -> None:
    name = _repo_name("ws")
    repo = f"{registry.address}/{name}"
    ws = _workspace(tmp_path, "edited-in-the-workspace\n")
    app_id = await sched.submit(
        sh_app("cat ws.txt"), {"image_repo": repo, "quiet": True}, workspace=str(ws)
    )
    desc = await sched.wait(app_id, timeout=60)
    assert desc is not None
    assert desc.state == AppState.SUCCEEDED, desc.msg
    assert await lines(sched, app_id) == ["edited-in-the-workspace\n"]

    pushed = desc.roles[0].image
    assert pushed.startswith(f"{repo}:")
    tag = pushed.rpartition(":")[2]
    assert name in await registry.catalog()
    assert await registry.tags(name) == [tag]
    [container] = await raw_docker.containers.list(
        all=True, filters=json.dumps({"label": [f"asyncsched.io/app-id={app_id}"]})
    )
    info = await container.show()
    assert info["Config"]["Image"] == pushed

    # another engine only has the registry: drop the local image, pull, run
    await sched.delete(app_id)
    await raw_docker.images.delete(f"sha256:{tag}", force=True)
    with pytest.raises(aiodocker.DockerError) as gone:
        await raw_docker.images.inspect(pushed)
    assert gone.value.status == 404
    await raw_docker.images.pull(pushed)
    assert (await raw_docker.images.inspect(pushed))["Id"] == f"sha256:{tag}"
    again = await sched.submit(
        sh_app("cat ws.txt", image=pushed), {"image_pull_policy": "never"}
    )
    desc = await sched.wait(again, timeout=60)
    assert desc is not None
    assert desc.state == AppState.SUCCEEDED, desc.msg
    assert await lines(sched, again) == ["edited-in-the-workspace\n"]


async def test_separate_push_step_pushes_exactly_what_the_dry_run_named(
    sched: DockerScheduler,
    registry: Registry,
    tmp_path: Path,
) -> None:
    name = _repo_name("step")
    repo = f"{registry.address}/{name}"
    app = sh_app("cat ws.txt")
    app.roles.append(
        Role(
            "plain", image=TEST_IMAGE, entrypoint="true", resource=app.roles[0].resource
        )
    )
    ws = _workspace(tmp_path, "pushed-separately\n")
    await sched.build_workspace_and_update_role(app.roles[0], str(ws), {"quiet": True})
    image_id = app.roles[0].image
    assert image_id.startswith("sha256:")
    before = await registry.catalog()

    to_push = sched.dryrun_push_images(app, {"image_repo": repo})
    digest = image_id.removeprefix("sha256:")
    assert to_push == {image_id: (repo, digest)}
    assert [r.image for r in app.roles] == [f"{repo}:{digest}", TEST_IMAGE]
    assert await registry.catalog() == before  # the dry run pushes nothing

    await sched.push_images(to_push)
    assert sorted(await registry.catalog()) == sorted([*before, name])
    assert await registry.tags(name) == [digest]

    app_id = await sched.submit(app, {})
    desc = await sched.wait(app_id, timeout=60)
    assert desc is not None
    assert desc.state == AppState.SUCCEEDED, desc.msg
    assert await lines(sched, app_id) == ["pushed-separately\n"]


async def test_auth_registry_needs_the_credentials_of_the_docker_config(
    sched: DockerScheduler,
    auth_registry: Registry,
    raw_docker: aiodocker.Docker,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = _repo_name("auth")
    repo = f"{auth_registry.address}/{name}"
    config_dir = tmp_path / "docker-config"
    config_dir.mkdir()
    monkeypatch.setenv("DOCKER_CONFIG", str(config_dir))
    ws = _workspace(tmp_path, "behind-a-login\n")

    with pytest.raises(SchedulerError) as info:
        await sched.submit(
            sh_app("cat ws.txt"), {"image_repo": repo, "quiet": True}, workspace=str(ws)
        )
    message = str(info.value)
    assert auth_registry.address in message
    assert "credentials" in message
    assert "docker login" in message
    assert await _session_containers(raw_docker) == []
    assert name not in await auth_registry.catalog()

    (config_dir / "config.json").write_text(
        json.dumps(docker_config_auth(auth_registry.address, USER, PASSWORD))
    )
    app_id = await sched.submit(
        sh_app("cat ws.txt"), {"image_repo": repo, "quiet": True}, workspace=str(ws)
    )
    desc = await sched.wait(app_id, timeout=60)
    assert desc is not None
    assert desc.state == AppState.SUCCEEDED, desc.msg
    tag = desc.roles[0].image.rpartition(":")[2]
    assert await auth_registry.tags(name) == [tag]


async def test_wrong_credentials_are_named_as_refused(
    sched: DockerScheduler,
    auth_registry: Registry,
    raw_docker: aiodocker.Docker,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo = f"{auth_registry.address}/{_repo_name('badauth')}"
    config_dir = tmp_path / "docker-config"
    config_dir.mkdir()
    (config_dir / "config.json").write_text(
        json.dumps(docker_config_auth(auth_registry.address, USER, "wrong"))
    )
    monkeypatch.setenv("DOCKER_CONFIG", str(config_dir))
    with pytest.raises(SchedulerError) as info:
        await sched.submit(
            sh_app("true"),
            {"image_repo": repo, "quiet": True},
            workspace=str(_workspace(tmp_path, "x\n")),
        )
    assert auth_registry.address in str(info.value)
    assert "credentials" in str(info.value)
    assert await _session_containers(raw_docker) == []


async def test_registry_lost_mid_push_submits_nothing_and_keeps_the_image(
    sched: DockerScheduler,
    registry: Registry,
    raw_docker: aiodocker.Docker,
    tmp_path: Path,
) -> None:
    name = _repo_name("down")
    ws = _workspace(tmp_path, "second-try\n")
    async with anyio.create_task_group() as tg:
        proxy = CuttingProxy(registry.address)
        await proxy.serve(tg)
        with pytest.raises(SchedulerError) as info:
            await sched.submit(
                sh_app("cat ws.txt"),
                {"image_repo": f"{proxy.address}/{name}", "quiet": True},
                workspace=str(ws),
            )
        tg.cancel_scope.cancel()
    assert proxy.cut.is_set()  # the layers went up, the manifest did not
    assert proxy.address in str(info.value)
    assert "push" in str(info.value)
    assert await _session_containers(raw_docker) == []
    assert await registry.tags(name) == []
    [built] = await _session_images(raw_docker)

    # the next try (registry back) reuses the built image: same id, pushed
    app_id = await sched.submit(
        sh_app("cat ws.txt"),
        {"image_repo": f"{registry.address}/{name}", "quiet": True},
        workspace=str(ws),
    )
    desc = await sched.wait(app_id, timeout=60)
    assert desc is not None
    assert desc.state == AppState.SUCCEEDED, desc.msg
    assert await registry.tags(name) == [built.removeprefix("sha256:")]
    assert await lines(sched, app_id) == ["second-try\n"]


async def test_unreachable_image_repo_submits_nothing_and_keeps_the_image(
    sched: DockerScheduler,
    raw_docker: aiodocker.Docker,
    tmp_path: Path,
) -> None:
    address = f"127.0.0.1:{free_port()}"
    with pytest.raises(SchedulerError) as info:
        await sched.submit(
            sh_app("true"),
            {"image_repo": f"{address}/nowhere", "quiet": True},
            workspace=str(_workspace(tmp_path, "kept\n")),
        )
    assert address in str(info.value)
    assert "push" in str(info.value)
    assert await _session_containers(raw_docker) == []
    [built] = await _session_images(raw_docker)
    kept = f"{address}/nowhere:{built.removeprefix('sha256:')}"
    assert f"stays in the local engine as {kept!r}" in str(info.value)
    assert (await raw_docker.images.inspect(kept))["Id"] == built
