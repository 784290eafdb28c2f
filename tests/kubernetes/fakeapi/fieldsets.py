"""``metadata.managedFields`` as a real API server writes them.

Server-side field management records, per manager, which fields it set (a
``FieldsV1`` tree mirroring the object: ``f:name`` for map keys,
``k:{"name":...}`` for items of keyed lists, ``v:value`` for set members).
On real objects it is often as large as the rest of the object, which is why
a client cache that keeps it pays twice: the fake server writes it too, so
what the client holds here is as large as on a real cluster.

Example:
    >>> fields_v1({"spec": {"containers": [{"name": "main", "image": "x"}]}})
    {'f:spec': {'f:containers': {'k:{"name":"main"}': {'.': {}, 'f:name': {}, 'f:image': {}}}}}
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["fields_v1", "with_managed_fields"]

JSON = dict[str, Any]

#: who creates the objects (the client's User-Agent prefix, as the server takes it)
CLIENT_MANAGER = "OpenAPI-Generator"
#: who writes the status (the fake controllers)
STATUS_MANAGER = "fake-controller"
#: metadata the server sets itself (not managed by anyone)
_SERVER_META = frozenset(
    {
        "managedFields",
        "resourceVersion",
        "uid",
        "creationTimestamp",
        "generation",
        "namespace",
        "name",
        "selfLink",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    }
)


def fields_v1(value: Any) -> JSON:
    """The ``FieldsV1`` tree of ``value``."""
    if isinstance(value, dict):
        return {f"f:{k}": fields_v1(v) for k, v in value.items()}
    if isinstance(value, list):
        out: JSON = {}
        for i, item in enumerate(value):
            if isinstance(item, dict):
                ident = {k: item[k] for k in ("name", "containerPort") if k in item}
                key = json.dumps(ident or {"index": i}, separators=(",", ":"))
                out[f"k:{key}"] = {".": {}, **fields_v1(item)}
            else:
                out[f"v:{json.dumps(item)}"] = {}
        return out
    return {}


def with_managed_fields(obj: JSON, old: JSON | None, now: str) -> None:
    """Set ``obj``'s managedFields (in place) after a create or an update.

    The client's entry covers what it wrote (spec, labels, annotations, ...);
    the status, when there is one, is the controller's entry.
    """
    meta = obj.setdefault("metadata", {})
    body = {
        k: v
        for k, v in obj.items()
        if k not in ("apiVersion", "kind", "status", "metadata")
    }
    body["metadata"] = {k: v for k, v in meta.items() if k not in _SERVER_META}
    previous = {
        (e.get("manager"), e.get("subresource")): e
        for e in ((old or {}).get("metadata") or {}).get("managedFields") or []
    }
    version = str(obj.get("apiVersion", ""))
    entries = [
        _entry(CLIENT_MANAGER, version, now, fields_v1(body), previous, None),
    ]
    if obj.get("status"):
        tree = {"f:status": fields_v1(obj["status"])}
        entries.append(_entry(STATUS_MANAGER, version, now, tree, previous, "status"))
    meta["managedFields"] = entries


def _entry(
    manager: str,
    version: str,
    now: str,
    tree: JSON,
    previous: dict[tuple[Any, Any], JSON],
    subresource: str | None,
) -> JSON:
    old = previous.get((manager, subresource))
    if old is not None and old.get("fieldsV1") == tree:
        return old  # unchanged: keeps its time, as the server does
    entry: JSON = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": version,
        "time": now,
        "fieldsType": "FieldsV1",
        "fieldsV1": tree,
    }
    if subresource:
        entry["subresource"] = subresource
    return entry
