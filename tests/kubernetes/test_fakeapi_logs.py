"""Pod logs on the fake API server: the kubelet's options, follow, and errors."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes_asyncio import client, watch

from .fakeapi import FakeKubeServer, wait_until
from .fakeapi.env import KubeEnv
from .fakeapi.untyped import CoreV1Api

#: checks the fake API server itself: not collected for a real cluster
pytestmark = pytest.mark.fake_api

TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z ")


@pytest.fixture(autouse=True)
def _fake_server_only(kube_env: KubeEnv) -> None:
    """These tests check the fake server itself (skipped on a real cluster)."""
    kube_env.fake_server()


@pytest.fixture
async def core(kube_env: KubeEnv) -> AsyncIterator[Any]:
    async with await kube_env.api_client() as api:
        yield CoreV1Api(api)


async def _pod(core: Any, ns: str, name: str, state: dict[str, Any]) -> None:
    body = {"metadata": {"name": name},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]}}  # fmt: skip
    await core.create_namespaced_pod(ns, body)
    await _set_state(core, ns, name, state)


async def _set_state(
    core: Any,
    ns: str,
    name: str,
    state: dict[str, Any],
    phase: str = "Running",
) -> None:
    status = {"name": "main", "image": "busybox", "imageID": "", "ready": True,
              "restartCount": 0, "state": state}  # fmt: skip
    await core.patch_namespaced_pod_status(
        name, ns, {"status": {"phase": phase, "containerStatuses": [status]}},
        _content_type="application/merge-patch+json",
    )  # fmt: skip


def _server(env: KubeEnv) -> FakeKubeServer:
    return env.fake_server()


async def test_log_read_options_tail_since_timestamps_limit(
    kube_env: KubeEnv, core: Any
) -> None:
    ns = kube_env.namespace
    await _pod(core, ns, "p", {"running": {"startedAt": "2024-01-01T00:00:00Z"}})
    logs = _server(kube_env).logs
    logs.append(ns, "p", "main", "one\ntwo\n")
    mark = datetime.now(UTC)
    await wait_until(lambda: datetime.now(UTC) > mark + timedelta(milliseconds=5))
    logs.append(ns, "p", "main", "three\n")
    assert await core.read_namespaced_pod_log("p", ns) == "one\ntwo\nthree\n"
    assert await core.read_namespaced_pod_log("p", ns, tail_lines=2) == "two\nthree\n"
    assert await core.read_namespaced_pod_log("p", ns, limit_bytes=5) == "one\nt"
    since = (mark + timedelta(milliseconds=1)).isoformat().replace("+00:00", "Z")
    # The generated client has no since_time argument; the raw request does.
    answer = await core.api_client.call_api(
        f"/api/v1/namespaces/{ns}/pods/p/log", "GET",
        query_params=[("sinceTime", since)], auth_settings=["BearerToken"],
        response_types_map={200: "str"}, _return_http_data_only=True,
    )  # fmt: skip
    assert answer == "three\n"
    assert (
        await core.read_namespaced_pod_log("p", ns, since_seconds=60)
        == "one\ntwo\nthree\n"
    )
    stamped = (
        await core.read_namespaced_pod_log("p", ns, timestamps=True)
    ).splitlines()
    assert all(TS.match(line) for line in stamped)
    assert [line.split(" ", 1)[1] for line in stamped] == ["one", "two", "three"]


async def test_log_follow_streams_new_lines_and_ends_when_container_terminates(
    kube_env: KubeEnv, core: Any
) -> None:
    ns = kube_env.namespace
    await _pod(core, ns, "p", {"running": {"startedAt": "2024-01-01T00:00:00Z"}})
    logs = _server(kube_env).logs
    logs.append(ns, "p", "main", "first\n")
    lines: list[str] = []

    async def follow() -> None:
        async with watch.Watch() as w:
            async for line in w.stream(core.read_namespaced_pod_log, "p", ns):
                lines.append(line)  # noqa: PERF401 -- observed while streaming

    task = asyncio.create_task(follow())
    await wait_until(lambda: lines == ["first\n"], timeout=5)
    logs.append(ns, "p", "main", "second\nlast")
    await wait_until(lambda: len(lines) == 2, timeout=5)
    logs.flush(ns, "p", "main")
    await _set_state(
        core,
        ns,
        "p",
        {"terminated": {"exitCode": 0, "reason": "Completed"}},
        "Succeeded",
    )
    await asyncio.wait_for(task, 5)
    assert lines == ["first\n", "second\n", "last"]


async def test_log_of_waiting_container_is_400_and_unknown_pod_404(
    kube_env: KubeEnv, core: Any
) -> None:
    ns = kube_env.namespace
    await _pod(core, ns, "p", {"waiting": {"reason": "ContainerCreating"}})
    with pytest.raises(client.ApiException) as info:
        await core.read_namespaced_pod_log("p", ns)
    assert info.value.status == 400
    message = json.loads(info.value.body or "{}")["message"]
    assert (
        message == 'container "main" in pod "p" is waiting to start: ContainerCreating'
    )
    with pytest.raises(client.ApiException) as info:
        await core.read_namespaced_pod_log("nope", ns)
    assert info.value.status == 404
    with pytest.raises(client.ApiException) as info:
        await core.read_namespaced_pod_log("p", ns, container="other")
    assert info.value.status == 400


async def test_fake_log_endpoint_appends_through_http(
    kube_env: KubeEnv, core: Any
) -> None:
    kube_env.fake_server()
    ns = kube_env.namespace
    await _pod(core, ns, "p", {"running": {"startedAt": "2024-01-01T00:00:00Z"}})
    api = core.api_client
    await api.call_api(
        f"/fake/v1/namespaces/{ns}/pods/p/log", "POST",
        query_params=[("container", "main")], header_params={"Content-Type": "text/plain"},
        body=b"hello\n", auth_settings=["BearerToken"], response_types_map={200: "object"},
    )  # fmt: skip
    assert await core.read_namespaced_pod_log("p", ns) == "hello\n"
