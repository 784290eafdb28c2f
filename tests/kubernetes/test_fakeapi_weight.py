"""The fake API server is as heavy and as forgetful as a real one.

Objects carry ``metadata.managedFields`` (often as large as the rest), and
the watch cache keeps a short window: a watch resumed from a version older
than the window gets 410 Expired, as on a real server.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from .fakeapi.env import KubeEnv
from .fakeapi.fieldsets import fields_v1
from .fakeapi.untyped import CoreV1Api
from .helpers import expired_watch_status

#: checks the fake API server itself: not collected for a real cluster
pytestmark = pytest.mark.fake_api


@pytest.fixture(autouse=True)
def _fake_server_only(kube_env: KubeEnv) -> None:
    if kube_env.server is None:
        pytest.skip("tests the fake server itself")


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "x"}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


async def test_objects_carry_managed_fields_as_the_api_server_writes(
    kube_env: KubeEnv,
) -> None:
    async with await kube_env.api_client() as api:
        core = CoreV1Api(api)
        ns = kube_env.namespace
        await core.create_namespaced_pod(ns, _pod("a"))
        resp = await core.read_namespaced_pod("a", ns, _preload_content=False)
        pod = json.loads(await resp.read())
    entries = pod["metadata"]["managedFields"]
    assert [e["fieldsType"] for e in entries] == ["FieldsV1"] * len(entries)
    tree = entries[0]["fieldsV1"]
    assert tree["f:spec"]["f:containers"]['k:{"name":"main"}']["f:image"] == {}
    assert tree["f:metadata"]["f:labels"] == {"f:app": {}}


def test_fields_v1_mirrors_the_object() -> None:
    assert fields_v1({"a": {"b": 1}, "l": ["x"]}) == {
        "f:a": {"f:b": {}},
        "f:l": {'v:"x"': {}},
    }


async def test_a_watch_from_outside_the_window_gets_410(kube_env: KubeEnv) -> None:
    store = kube_env.fake_server().store
    async with await kube_env.api_client() as api:
        core = CoreV1Api(api)
        ns = kube_env.namespace
        await core.create_namespaced_pod(ns, _pod("a"))
        old = (await core.list_namespaced_pod(ns)).metadata.resource_version
        await core.create_namespaced_pod(ns, _pod("b"))
        store.watch_window = 0.0  # the next write ages out what came before
        await core.create_namespaced_pod(ns, _pod("c"))
        await expired_watch_status(core, ns, old)  # 410 Expired
