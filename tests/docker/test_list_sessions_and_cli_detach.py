"""``list`` shows one session's apps; ``run --detach`` leaves Docker apps at once."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.specs import AppState

from .conftest import NETWORK, SESSION, TEST_IMAGE, Engine
from .helpers import sh_app

pytestmark = pytest.mark.docker


async def test_list_shows_only_the_apps_of_its_own_session(
    sched: DockerScheduler, docker_ready: Engine
) -> None:
    mine = await sched.submit(sh_app("echo mine", name="mine"), {})
    async with DockerScheduler(
        f"{SESSION}-other", network=NETWORK, stop_timeout=1
    ) as other:
        theirs = await other.submit(sh_app("echo theirs", name="theirs"), {})
        try:
            await sched.wait(mine, timeout=30)
            await other.wait(theirs, timeout=30)
            assert [a.app_id for a in await sched.list()] == [mine]
            assert [a.app_id for a in await other.list()] == [theirs]
            # an app of another session is still found by its id
            desc = await sched.wait(theirs, timeout=30)
            assert desc is not None
            assert desc.state == AppState.SUCCEEDED
        finally:
            await other.delete(theirs)


def test_run_detach_returns_right_after_submit_and_list_is_per_session(
    swept: Engine, tmp_path: Path
) -> None:
    """Docker containers are no children of the CLI: ``--detach`` does not stay."""
    env = {**os.environ, "ASYNCSCHED_STATE_DIR": str(tmp_path), "NO_COLOR": "1"}
    env["DOCKER_HOST"] = swept.host

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "asyncsched", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )

    started = time.monotonic()
    run = cli(
        "run",
        "-s",
        "local_docker",
        "--session",
        SESSION,
        "--detach",
        "--image",
        TEST_IMAGE,
        "--name",
        "detached",
        "--",
        "sh",
        "-c",
        "sleep 60",
    )
    took = time.monotonic() - started
    handle = run.stdout.strip()
    assert run.returncode == 0, run.stderr
    assert handle.startswith(f"local_docker://{SESSION}/detached-"), run.stdout
    assert took < 30, took  # the app sleeps 60 s: it was not waited for
    status = cli("status", handle)
    assert "RUNNING" in status.stdout, status.stdout + status.stderr
    # `list --session` shows that session's apps only
    mine = cli("list", "-s", "local_docker", "--session", SESSION)
    theirs = cli("list", "-s", "local_docker", "--session", f"{SESSION}-other")
    assert handle in mine.stdout, mine.stdout + mine.stderr
    assert theirs.returncode == 0, theirs.stderr
    assert handle not in theirs.stdout, theirs.stdout
