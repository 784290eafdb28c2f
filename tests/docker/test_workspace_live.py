"""Workspace images built on the test image, run, and cleaned up."""

from __future__ import annotations

from pathlib import Path

import pytest

from asyncsched.errors import SchedulerError
from asyncsched.schedulers.docker_scheduler import DockerScheduler

from .helpers import lines, sh_app

pytestmark = pytest.mark.docker


async def test_workspace_overlays_the_role_image(
    sched: DockerScheduler, tmp_path: Path
) -> None:
    (tmp_path / "bar").mkdir()
    (tmp_path / "bar" / "foo.sh").write_text("echo from-workspace\n")
    (tmp_path / "secret.txt").write_text("nope")
    (tmp_path / ".dockerignore").write_text("secret*\n")
    app = sh_app("sh bar/foo.sh; ls")
    app_id = await sched.submit(app, {}, workspace=str(tmp_path))
    assert app.roles[0].image.startswith("asyncsched-test-busybox")  # not mutated
    desc = await sched.wait(app_id, timeout=60)
    assert desc is not None
    assert desc.state.name == "SUCCEEDED"
    assert desc.roles[0].image != app.roles[0].image
    out = await lines(sched, app_id)
    assert out[0] == "from-workspace\n"
    assert "bar\n" in out
    assert "secret.txt\n" not in out


async def test_user_dockerfile_is_used(sched: DockerScheduler, tmp_path: Path) -> None:
    (tmp_path / "Dockerfile.asyncsched").write_text(
        "ARG IMAGE\nFROM $IMAGE\nENV MARK=custom\nCOPY . /opt/ws/\n"
    )
    (tmp_path / "f.txt").write_text("payload\n")
    app_id = await sched.submit(
        sh_app("echo $MARK; cat /opt/ws/f.txt"),
        {"quiet": True},
        workspace=str(tmp_path),
    )
    await sched.wait(app_id, timeout=60)
    assert await lines(sched, app_id) == ["custom\n", "payload\n"]


async def test_failing_build_and_push_are_clear_errors(
    sched: DockerScheduler, tmp_path: Path
) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "Dockerfile.asyncsched").write_text("ARG IMAGE\nFROM $IMAGE\nRUN exit 7\n")
    with pytest.raises(SchedulerError, match="build failed"):
        await sched.submit(sh_app("true"), {}, workspace=str(bad))
    good = tmp_path / "good"
    good.mkdir()
    (good / "x").write_text("x")
    with pytest.raises(SchedulerError, match="push the workspace image") as info:
        await sched.submit(
            sh_app("true"),
            {"image_repo": "localhost:1/asyncsched-test"},
            workspace=str(good),
        )
    assert "localhost:1" in str(info.value)
    with pytest.raises(SchedulerError, match="not a directory"):
        await sched.submit(sh_app("true"), {}, workspace=str(tmp_path / "missing"))
