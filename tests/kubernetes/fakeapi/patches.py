"""The three PATCH flavours: JSON merge patch, JSON patch, strategic merge patch.

* ``application/merge-patch+json`` (RFC 7386): objects merge, ``null``
  deletes a key, anything else (lists too) replaces.
* ``application/json-patch+json`` (RFC 6902): a list of ``add``, ``remove``,
  ``replace``, ``move``, ``copy`` and ``test`` operations on JSON pointers.
* ``application/strategic-merge-patch+json``: like a merge patch, except that
  lists of objects with a known merge key (``name`` for containers, env,
  volumes, containerStatuses; ``type`` for conditions; ...) merge item by item.
  Built-in kinds only: custom resources answer 415, as a real server does.

Example::

    merge_patch({"a": {"b": 1, "c": 2}}, {"a": {"c": None}})  # {"a": {"b": 1}}
"""

from __future__ import annotations

import copy
from typing import Any

from .kinds import ApiError, bad_request

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"

# Strategic merge keys of the list fields the fake's kinds use.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "conditions": "type",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "tolerations": "key",
}


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 merge patch; returns a new value."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any, field: str = "") -> Any:
    """Apply a (simplified) strategic merge patch; returns a new value."""
    if isinstance(patch, list) and isinstance(target, list) and field in MERGE_KEYS:
        key = MERGE_KEYS[field]
        merged = [copy.deepcopy(x) for x in target]
        for item in patch:
            if not isinstance(item, dict) or key not in item:
                raise bad_request(
                    f"map: {item!r} does not contain declared merge key: {key}"
                )
            for i, old in enumerate(merged):
                if isinstance(old, dict) and old.get(key) == item[key]:
                    if item.get("$patch") == "delete":
                        del merged[i]
                    else:
                        merged[i] = strategic_merge_patch(old, item)
                    break
            else:
                if item.get("$patch") != "delete":
                    merged.append(strategic_merge_patch({}, item))
        return merged
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        else:
            result[key] = strategic_merge_patch(result.get(key), value, key)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, "Invalid", f"invalid JSON pointer: {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> Any:
    cur = doc
    for part in parts[:-1]:
        if isinstance(cur, list):
            cur = cur[int(part)]
        elif isinstance(cur, dict) and part in cur:
            cur = cur[part]
        else:
            raise ApiError(422, "Invalid", f"doc is missing path: /{'/'.join(parts)}")
    return cur


def _get(doc: Any, parts: list[str]) -> Any:
    if not parts:
        return doc
    parent, last = _parent(doc, parts), parts[-1]
    try:
        return parent[int(last)] if isinstance(parent, list) else parent[last]
    except (KeyError, IndexError, ValueError) as exc:
        raise ApiError(
            422, "Invalid", f"doc is missing key: /{'/'.join(parts)}"
        ) from exc


def _remove(doc: Any, parts: list[str]) -> Any:
    value = _get(doc, parts)
    parent, last = _parent(doc, parts), parts[-1]
    if isinstance(parent, list):
        del parent[int(last)]
    else:
        del parent[last]
    return value


def _add(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    parent, last = _parent(doc, parts), parts[-1]
    if isinstance(parent, list):
        parent.insert(len(parent) if last == "-" else int(last), value)
    elif isinstance(parent, dict):
        parent[last] = value
    else:
        raise ApiError(422, "Invalid", f"cannot add at /{'/'.join(parts)}")
    return doc


def json_patch(target: Any, ops: Any) -> Any:
    """Apply an RFC 6902 JSON patch; returns a new value."""
    if not isinstance(ops, list):
        raise bad_request(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
        )
    doc = copy.deepcopy(target)
    for op in ops:
        name, parts = op.get("op"), _pointer(op.get("path", ""))
        if name == "add":
            doc = _add(doc, parts, copy.deepcopy(op["value"]))
        elif name == "remove":
            _remove(doc, parts)
        elif name == "replace":
            _get(doc, parts)
            if parts:
                _remove(doc, parts)
            doc = _add(doc, parts, copy.deepcopy(op["value"]))
        elif name in ("move", "copy"):
            source = _pointer(op["from"])
            value = _remove(doc, source) if name == "move" else _get(doc, source)
            doc = _add(doc, parts, copy.deepcopy(value))
        elif name == "test":
            if _get(doc, parts) != op.get("value"):
                raise ApiError(
                    422, "Invalid", f"testing value /{'/'.join(parts)} failed"
                )
        else:
            raise ApiError(422, "Invalid", f"Unexpected kind: {name}")
    return doc


def apply_patch(content_type: str, target: Any, body: Any, *, custom: bool) -> Any:
    """Dispatch on the request's Content-Type (415 for unsupported ones)."""
    media = content_type.split(";")[0].strip().lower()
    if media == MERGE:
        return merge_patch(target, body)
    if media == JSON_PATCH:
        return json_patch(target, body)
    if media == STRATEGIC and not custom:
        return strategic_merge_patch(target, body)
    accepted = [JSON_PATCH, MERGE, APPLY] + ([] if custom else [STRATEGIC])
    raise ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media "
        f"types include: {', '.join(accepted)}",
    )
