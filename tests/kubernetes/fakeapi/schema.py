"""Field schemas: unknown fields are pruned, wrong JSON types refused.

A real server decodes built-in objects into typed structs and prunes custom
resources by their structural schema: an unknown field disappears (with a
``Warning`` header, or a 400 under ``fieldValidation=Strict``), and a value
of the wrong JSON type (a string for an int32, ...) is a 400 BadRequest.

Built-in kinds use the field names and types of kubernetes_asyncio's models
(generated from the Kubernetes OpenAPI spec). The Volcano Job uses the
fields of its CRD schema (spec, tasks, policies; the pod template is a
``V1PodTemplateSpec``; the status is kept as is).

Example::

    pruned, unknown = prune(KINDS[("", "v1", "pods")], body)
    unknown  # ['spec.containers[0].imagePullPolicyy']
"""

from __future__ import annotations

import functools
from typing import Any

from kubernetes_asyncio.client import models

from .kinds import Kind, bad_request

Schema = Any  # a model name / type string, or a dict of field -> Schema

_POLICY: Schema = {
    "event": "str",
    "events": "list[str]",
    "action": "str",
    "exitCode": "int",
    "timeout": "str",
}
_TASK: Schema = {
    "name": "str",
    "replicas": "int",
    "minAvailable": "int",
    "template": "V1PodTemplateSpec",
    "policies": ("list", _POLICY),
    "topologyPolicy": "str",
    "maxRetry": "int",
    "dependsOn": "object",
    "partitionPolicy": "object",
}
VOLCANO_JOB: Schema = {
    "apiVersion": "str",
    "kind": "str",
    "metadata": "V1ObjectMeta",
    "spec": {
        "schedulerName": "str",
        "minAvailable": "int",
        "minSuccess": "int",
        "volumes": "list[object]",
        "tasks": ("list", _TASK),
        "policies": ("list", _POLICY),
        "plugins": "dict(str, list[str])",
        "runningEstimate": "str",
        "queue": "str",
        "maxRetry": "int",
        "ttlSecondsAfterFinished": "int",
        "priorityClassName": "str",
        "networkTopology": "object",
    },
    "status": "object",
}
_ROOTS: dict[str, Schema] = {
    "pods": "V1Pod",
    "services": "V1Service",
    "namespaces": "V1Namespace",
    "jobs": "V1Job",
}
_PRIMITIVES = {
    "str": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "datetime": (str,),
    "date": (str,),
}


def _fields(schema: Schema) -> dict[str, Schema] | None:
    if isinstance(schema, dict):
        return schema
    return _model_fields(schema) if isinstance(schema, str) else None


@functools.cache
def _model_fields(name: str) -> dict[str, Schema] | None:
    """JSON field name -> type string of a kubernetes_asyncio model."""
    cls = getattr(models, name, None)
    if cls is None or not hasattr(cls, "attribute_map"):
        return None
    return {cls.attribute_map[py]: t for py, t in cls.openapi_types.items()}


def _walk(value: Any, schema: Schema, path: str, unknown: list[str]) -> Any:
    if value is None:
        return None
    if isinstance(schema, tuple):  # ("list", item schema)
        if not isinstance(value, list):
            raise _type_error(path, value, "array")
        return [
            _walk(v, schema[1], f"{path}[{i}]", unknown) for i, v in enumerate(value)
        ]
    if isinstance(schema, str) and schema.startswith("list["):
        if not isinstance(value, list):
            raise _type_error(path, value, "array")
        inner = schema[5:-1]
        return [_walk(v, inner, f"{path}[{i}]", unknown) for i, v in enumerate(value)]
    if isinstance(schema, str) and schema.startswith("dict("):
        if not isinstance(value, dict):
            raise _type_error(path, value, "object")
        inner = schema[schema.index(",") + 1 : -1].strip()
        return {k: _walk(v, inner, f"{path}[{k}]", unknown) for k, v in value.items()}
    if isinstance(schema, str) and schema in _PRIMITIVES:
        ok = isinstance(value, _PRIMITIVES[schema]) and not (
            schema in ("int", "float") and isinstance(value, bool)
        )
        if not ok:
            raise _type_error(path, value, schema)
        return value
    fields = _fields(schema)
    if fields is None:  # "object" and other free-form values
        return value
    if not isinstance(value, dict):
        raise _type_error(path, value, "object")
    out: dict[str, Any] = {}
    for key, item in value.items():
        sub = f"{path}.{key}" if path else key
        if key not in fields:
            unknown.append(sub)
            continue
        out[key] = _walk(item, fields[key], sub, unknown)
    return out


def _type_error(path: str, value: Any, expected: str) -> Exception:
    got = {str: "string", bool: "bool", int: "number", float: "number", list: "array",
           dict: "object"}.get(type(value), type(value).__name__)  # fmt: skip
    go_type = {"int": "int32", "str": "string", "float": "float64"}.get(
        expected, expected
    )
    return bad_request(
        f"json: cannot unmarshal {got} into Go struct field .{path} of type {go_type}"
    )


def prune(kind: Kind, obj: Any) -> tuple[Any, list[str]]:
    """``obj`` without unknown fields, and the paths of the fields dropped.

    Raises ``ApiError(400)`` for a value of the wrong JSON type.
    """
    schema = VOLCANO_JOB if kind.custom else _ROOTS.get(kind.plural)
    if schema is None or not isinstance(obj, dict):
        return obj, []
    unknown: list[str] = []
    return _walk(obj, schema, "", unknown), unknown
