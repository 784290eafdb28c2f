"""aiodocker's private calls used by the Docker backend, against a real engine.

The backend calls ``Docker._query`` (events and logs streams) and
``Docker._query_json`` (restart-policy update), which aiodocker does not
promise to keep. aiodocker is therefore pinned exactly, and each call path is
exercised here: a bump of the pin that breaks one of them fails this file.
"""

from __future__ import annotations

import json
import tomllib
from importlib.metadata import version
from pathlib import Path

import aiodocker
import anyio
import pytest

from asyncsched.schedulers.docker._client import (
    open_events,
    open_logs,
    update_restart_policy,
)

from .conftest import SESSION_LABEL, TEST_IMAGE, Engine

ROOT = Path(__file__).parents[2]


def test_aiodocker_is_pinned_to_the_installed_version() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for extra in ("docker", "all"):
        pins = [d for d in project["optional-dependencies"][extra] if "aiodocker" in d]
        assert pins == [f"aiodocker=={version('aiodocker')}"]


async def _container(docker: aiodocker.Docker, script: str) -> str:
    key, _, value = SESSION_LABEL.partition("=")
    created = await docker.containers.create(
        {
            "Image": TEST_IMAGE,
            "Cmd": ["sh", "-c", script],
            "Labels": {key: value, "asyncsched.io/app-id": "private-calls"},
        }
    )
    return str(created.id)


@pytest.mark.docker
async def test_events_logs_and_restart_policy_calls(
    raw_docker: aiodocker.Docker, swept: Engine
) -> None:
    filters = {"type": ["container"], "label": ["asyncsched.io/app-id"]}
    async with open_events(raw_docker, filters) as events:
        cid = await _container(raw_docker, "echo out; echo err >&2")
        with anyio.fail_after(30):
            event = json.loads(await events.content.readline())
        events.close()
    assert event["Actor"]["ID"] == cid
    assert event["Action"] == "create"

    await update_restart_policy(
        raw_docker, cid, {"Name": "on-failure", "MaximumRetryCount": 2}
    )
    info = await raw_docker.containers.container(cid).show()
    assert info["HostConfig"]["RestartPolicy"] == {
        "Name": "on-failure",
        "MaximumRetryCount": 2,
    }

    container = raw_docker.containers.container(cid)
    await container.start()
    with anyio.fail_after(30):
        await container.wait()
    params = {"stdout": True, "stderr": True, "follow": False}
    async with open_logs(raw_docker, cid, params) as response:
        raw = await response.read()
    # multiplexed: 8-byte headers, stream 1 = stdout, 2 = stderr
    frames = []
    while raw:
        size = int.from_bytes(raw[4:8], "big")
        frames.append((raw[0], raw[8 : 8 + size]))
        raw = raw[8 + size :]
    assert sorted(frames) == [(1, b"out\n"), (2, b"err\n")]
