"""Watches on the fake API server behave like a real server's (kubernetes_asyncio Watch)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client, watch

from .fakeapi.env import KubeEnv
from .fakeapi.untyped import CoreV1Api
from .helpers import expired_watch_status

#: checks the fake API server itself: not collected for a real cluster
pytestmark = pytest.mark.fake_api


@pytest.fixture(autouse=True)
def _fake_server_only(kube_env: KubeEnv) -> None:
    """These tests check the fake server itself (skipped on a real cluster)."""
    kube_env.fake_server()


def _pod(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


@pytest.fixture
async def core(kube_env: KubeEnv) -> AsyncIterator[Any]:
    async with await kube_env.api_client() as api:
        yield CoreV1Api(api)


async def _events(
    core: Any,
    ns: str,
    count: int,
    first_seen: asyncio.Event | None = None,
    **kwargs: Any,
) -> list[tuple[str, str]]:
    """The first ``count`` (type, name) events of a pod watch.

    ``first_seen`` is set once the first event arrived (the watch is open).
    """
    got: list[tuple[str, str]] = []
    async with watch.Watch() as w:
        async for event in w.stream(core.list_namespaced_pod, ns, **kwargs):
            obj = event["raw_object"]
            got.append((event["type"], obj["metadata"].get("name", "")))
            if first_seen is not None:
                first_seen.set()
            if len(got) == count:
                break
    return got


async def test_watch_from_a_version_replays_history_then_streams_live(
    kube_env: KubeEnv, core: Any
) -> None:
    ns = kube_env.namespace
    start = (await core.list_namespaced_pod(ns)).metadata.resource_version
    await core.create_namespaced_pod(ns, _pod("a"))
    await core.patch_namespaced_pod("a", ns, {"metadata": {"labels": {"x": "1"}}})
    watching = asyncio.create_task(_events(core, ns, 4, resource_version=start))
    await asyncio.sleep(0)
    await core.create_namespaced_pod(ns, _pod("b"))
    await core.delete_namespaced_pod("a", ns)
    events = await asyncio.wait_for(watching, 5)
    assert events == [
        ("ADDED", "a"),
        ("MODIFIED", "a"),
        ("ADDED", "b"),
        ("DELETED", "a"),
    ]


async def test_watch_without_version_starts_with_synthetic_added_events(
    kube_env: KubeEnv, core: Any
) -> None:
    ns = kube_env.namespace
    await core.create_namespaced_pod(ns, _pod("old"))
    opened = asyncio.Event()
    watching = asyncio.create_task(_events(core, ns, 2, first_seen=opened))
    await asyncio.wait_for(opened.wait(), 5)  # the synthetic ADDED of "old" came
    await core.create_namespaced_pod(ns, _pod("new"))
    assert await asyncio.wait_for(watching, 5) == [("ADDED", "old"), ("ADDED", "new")]


async def test_watch_honours_label_selector_and_namespace(
    kube_env: KubeEnv, core: Any
) -> None:
    ns = kube_env.namespace
    watching = asyncio.create_task(
        _events(core, ns, 3, resource_version="1", label_selector="app=web")
    )
    await core.create_namespaced_pod("default", _pod("elsewhere", {"app": "web"}))
    await core.create_namespaced_pod(ns, _pod("other", {"app": "db"}))
    await core.create_namespaced_pod(ns, _pod("web", {"app": "web"}))
    # Leaving the selector is seen as DELETED; entering it as ADDED.
    await core.patch_namespaced_pod("web", ns, {"metadata": {"labels": {"app": "x"}}})
    await core.patch_namespaced_pod(
        "other", ns, {"metadata": {"labels": {"app": "web"}}}
    )
    assert await asyncio.wait_for(watching, 5) == [
        ("ADDED", "web"), ("DELETED", "web"), ("ADDED", "other"),
    ]  # fmt: skip


async def test_bookmarks_arrive_when_allowed(kube_env: KubeEnv, core: Any) -> None:
    ns = kube_env.namespace
    async with watch.Watch() as w:
        stream = w.stream(
            core.list_namespaced_pod, ns, resource_version="1",
            allow_watch_bookmarks=True, timeout_seconds=5,
        )  # fmt: skip
        event = await asyncio.wait_for(stream.__anext__(), 5)
    assert event["type"] == "BOOKMARK"
    assert event["raw_object"]["kind"] == "Pod"
    assert int(event["raw_object"]["metadata"]["resourceVersion"]) >= 1
    assert w.resource_version == event["raw_object"]["metadata"]["resourceVersion"]


async def _collect(core: Any, ns: str, into: list[str], **kwargs: Any) -> None:
    """Append pod names from a watch to ``into`` until the stream ends."""
    async with watch.Watch() as w:
        async for event in w.stream(core.list_namespaced_pod, ns, **kwargs):
            into.append(event["raw_object"]["metadata"]["name"])  # noqa: PERF401


async def test_timeout_seconds_ends_the_stream_cleanly(
    kube_env: KubeEnv, core: Any
) -> None:
    got: list[str] = []
    await asyncio.wait_for(
        _collect(
            core, kube_env.namespace, got, resource_version="1", timeout_seconds=1
        ),
        5,
    )
    assert got == []


async def test_watch_from_compacted_version_raises_410_after_the_client_retry(
    kube_env: KubeEnv, core: Any
) -> None:
    ns = kube_env.namespace
    server = kube_env.fake_server()
    old = (await core.list_namespaced_pod(ns)).metadata.resource_version
    await core.create_namespaced_pod(ns, _pod("a"))
    server.compact()
    server.requests.reset()
    with pytest.raises(client.ApiException) as info:
        await _events(core, ns, 1, resource_version=old)
    assert info.value.status == 410
    assert "Expired" in str(info.value.reason)
    assert server.requests.count("watch", "pods") == 2  # Watch retries a 410 once


async def test_history_window_expires_old_versions(kube_env: KubeEnv) -> None:
    kube_env.fake_server().store.history_limit = 2
    async with await kube_env.api_client() as api:
        core = CoreV1Api(api)
        ns = kube_env.namespace
        old = (await core.list_namespaced_pod(ns)).metadata.resource_version
        for name in ("a", "b", "c"):
            await core.create_namespaced_pod(ns, _pod(name))
        status = await expired_watch_status(core, ns, old)
    assert status["kind"] == "Status"
    assert status["message"].startswith(f"too old resource version: {old}")


async def test_a_restart_ends_open_watches_and_only_watches_forget_older_versions(
    kube_env: KubeEnv, core: Any
) -> None:
    ns = kube_env.namespace
    old = (await core.list_namespaced_pod(ns)).metadata.resource_version
    await core.create_namespaced_pod(ns, _pod("a"))
    resp = await core.list_namespaced_pod(
        ns, watch=True, resource_version=old, timeout_seconds=30, _preload_content=False
    )
    try:
        # the watch is open: it replayed the pod's creation
        assert json.loads(await resp.content.readline())["type"] == "ADDED"
        kube_env.fake_server().restart()
        assert await asyncio.wait_for(resp.content.read(), 5) == b""  # it ended
    finally:
        resp.release()
    # etcd still has the version: an exact list answers it as it was
    listed = await core.list_namespaced_pod(
        ns, resource_version=old, resource_version_match="Exact"
    )
    assert listed.items == []
    # the new watch cache does not: a watch from it gets an ERROR event
    status = await expired_watch_status(core, ns, old)
    assert status["message"].startswith(f"too old resource version: {old} (")


async def test_expire_fault_answers_one_410_error_event(
    kube_env: KubeEnv, core: Any
) -> None:
    faults = kube_env.fake_server().faults
    faults.expire_next_watch()
    with pytest.raises(client.ApiException) as info:
        await _events(
            core, kube_env.namespace, 1, resource_version="1", timeout_seconds=5
        )
    assert info.value.status == 410
    # Only the next watch: the following one works.
    watching = asyncio.create_task(
        _events(core, kube_env.namespace, 1, timeout_seconds=5)
    )
    await core.create_namespaced_pod(kube_env.namespace, _pod("a"))
    assert await asyncio.wait_for(watching, 5) == [("ADDED", "a")]


async def test_dropped_stream_raises_payload_error_or_ends_cleanly(
    kube_env: KubeEnv, core: Any
) -> None:
    ns = kube_env.namespace
    faults = kube_env.fake_server().faults
    await core.create_namespaced_pod(ns, _pod("a"))
    await core.create_namespaced_pod(ns, _pod("b"))
    faults.drop_next_watch(after_events=1, abrupt=True)
    got: list[str] = []
    with pytest.raises(aiohttp.ClientPayloadError):
        await _collect(core, ns, got, timeout_seconds=5)
    assert got == ["a"]
    faults.drop_next_watch(after_events=1, abrupt=False)
    got.clear()
    await _collect(core, ns, got, timeout_seconds=5)
    assert got == ["a"]
