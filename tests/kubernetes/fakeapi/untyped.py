"""kubernetes_asyncio API classes typed as ``Any``, for tests.

The client's bundled type hints reject what it accepts at run time and what
tests need: plain ``dict`` bodies (camelCase, as on the wire) and the
``_content_type``/``_preload_content`` keyword arguments. Tests build their
API objects from these aliases instead of casting every call.

Example::

    core = CoreV1Api(api_client)
    await core.patch_namespaced_pod_status(
        "p", "ns", {"status": {...}}, _content_type="application/merge-patch+json"
    )
"""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client

CoreV1Api: Any = client.CoreV1Api
BatchV1Api: Any = client.BatchV1Api
CustomObjectsApi: Any = client.CustomObjectsApi
VersionApi: Any = client.VersionApi
ApisApi: Any = client.ApisApi
CoreApi: Any = client.CoreApi

__all__ = [
    "ApisApi",
    "BatchV1Api",
    "CoreApi",
    "CoreV1Api",
    "CustomObjectsApi",
    "VersionApi",
]
