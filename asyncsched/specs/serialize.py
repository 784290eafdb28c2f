"""AppDefs as plain data: the schema of AppDef files, records and ``describe``.

``app_to_dict``/``app_from_dict`` (and ``role_to_dict``/``role_from_dict``)
convert between AppDefs and this schema; ``load_app_file`` reads a YAML or
JSON file of it (``asyncsched run -f app.yaml``). ``asyncsched describe``
prints the same shape, so its output can be fed back to ``run -f``. The local
backend stores roles in its app records the same way::

    name: trainer                 # required
    metadata: {team: ml}          # optional, str -> str
    roles:                        # required, at least one
      - name: worker              # required: letters, digits, _ . -
        entrypoint: python        # required
        args: [-m, train, --lr, 0.1]   # scalars become strings
        image: /path/or/image     # default: the current directory
        env: {SEED: 1}            # values become strings
        num_replicas: 2           # default 1
        min_replicas: 1
        max_retries: 0
        retry_policy: APPLICATION # or REPLICA, ROLE
        resource: {cpu: 2, gpu: 0, memMB: 2048}   # or a named resource: "cpu.small"
        port_map: {http: 8080}
        metadata: {}
        mounts:
          - type=bind,src=/data,dst=/data,readonly   # or a mapping:
          - {type: volume, src: cache, dst: /cache}

An unknown field, a wrong type or an invalid value raises :class:`AppFileError`
naming the file and the field (``app.yaml: roles[0].num_replicas: ...``).

Example:
    >>> app = app_from_dict({"name": "a", "roles": [{"name": "r", "entrypoint": "echo"}]})
    >>> app_to_dict(app)["roles"][0]["num_replicas"]
    1
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from asyncsched.errors import AppFileError, SpecError
from asyncsched.specs.app import AppDef, RetryPolicy, Role, validate_app
from asyncsched.specs.mounts import BindMount, DeviceMount, VolumeMount, parse_mounts
from asyncsched.specs.resources import NULL_RESOURCE, Resource, named_resources

__all__ = [
    "AppFileError",
    "MAX_METADATA_BYTES",
    "app_from_dict",
    "app_to_dict",
    "load_app_file",
    "role_from_dict",
    "role_to_dict",
]

#: the most bytes (as JSON) the app's ``metadata``, or one role's, may hold in
#: an app file
MAX_METADATA_BYTES = 64 * 1024

_APP_FIELDS = ("name", "roles", "metadata")
_ROLE_FIELDS = (
    "name",
    "image",
    "entrypoint",
    "args",
    "env",
    "num_replicas",
    "min_replicas",
    "max_retries",
    "retry_policy",
    "resource",
    "port_map",
    "metadata",
    "mounts",
)
_RESOURCE_FIELDS = ("cpu", "gpu", "memMB", "capabilities", "devices", "tags")


def load_app_file(path: str) -> AppDef:
    """Read and check an AppDef file (YAML or JSON).

    YAML aliases (``*name``) are refused: they let a few hundred bytes expand
    into millions of values.

    Raises:
        AppFileError: unreadable file, bad syntax, a YAML alias, or an
            invalid field.
    """
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise AppFileError(path, "", exc.strerror or str(exc)) from None
    # PyYAML is imported here, not with this module: loading it compiles a
    # hundred regular expressions, a cost every CLI command would pay
    import yaml

    from asyncsched.specs._yaml import YamlAliasError, load_yaml

    try:
        data = json.loads(text) if path.endswith(".json") else load_yaml(text)
    except YamlAliasError as exc:
        raise AppFileError(path, "", str(exc)) from None
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        first = str(exc).strip().splitlines()
        raise AppFileError(
            path, "", f"not valid YAML/JSON: {' '.join(first)}"
        ) from None
    return app_from_dict(data, path)


def app_from_dict(data: object, path: str = "<app>") -> AppDef:
    """Build and validate an AppDef from the file schema.

    The app's ``metadata`` and each role's are at most
    :data:`MAX_METADATA_BYTES` as JSON.

    Raises:
        AppFileError: a missing, unknown or invalid field, or metadata over
            :data:`MAX_METADATA_BYTES`.
    """
    top = _mapping(
        data, path, "", "the file must contain a mapping with `name` and `roles`"
    )
    _check_fields(top, _APP_FIELDS, path, "")
    name = _required_str(top, "name", path, "")
    roles_raw = top.get("roles")
    if not isinstance(roles_raw, list) or not roles_raw:
        raise AppFileError(path, "roles", "must be a non-empty list of roles")
    roles = [role_from_dict(r, path, f"roles[{i}]") for i, r in enumerate(roles_raw)]
    metadata = _str_map(top.get("metadata", {}), path, "metadata")
    _check_metadata_size(metadata, path, "metadata")
    for index, role in enumerate(roles):
        _check_metadata_size(role.metadata, path, f"roles[{index}].metadata")
    app = AppDef(name=name, roles=roles, metadata=metadata)
    try:
        validate_app(app)
    except SpecError as exc:
        raise AppFileError(path, exc.field, exc.message) from None
    return app


def role_from_dict(data: object, path: str = "<role>", where: str = "role") -> Role:
    """Build a Role from the schema (``image`` defaults to the current directory).

    Raises:
        AppFileError: a missing, unknown or invalid field.
    """
    raw = _mapping(data, path, where, "must be a mapping")
    _check_fields(raw, _ROLE_FIELDS, path, where)
    role = Role(
        name=_required_str(raw, "name", path, where),
        image=_str(raw.get("image", os.getcwd()), path, f"{where}.image"),
        entrypoint=_required_str(raw, "entrypoint", path, where),
        args=_str_list(raw.get("args", []), path, f"{where}.args"),
        env=_str_map(raw.get("env", {}), path, f"{where}.env"),
        num_replicas=_int(raw.get("num_replicas", 1), path, f"{where}.num_replicas"),
        max_retries=_int(raw.get("max_retries", 0), path, f"{where}.max_retries"),
        port_map=_int_map(raw.get("port_map", {}), path, f"{where}.port_map"),
        metadata=_any_map(raw.get("metadata", {}), path, f"{where}.metadata"),
    )
    if raw.get("min_replicas") is not None:
        role.min_replicas = _int(raw["min_replicas"], path, f"{where}.min_replicas")
    if "retry_policy" in raw:
        try:
            role.retry_policy = RetryPolicy(str(raw["retry_policy"]).upper())
        except ValueError:
            raise AppFileError(
                path,
                f"{where}.retry_policy",
                f"must be one of {[p.value for p in RetryPolicy]}, got {raw['retry_policy']!r}",
            ) from None
    if "resource" in raw:
        role.resource = _resource(raw["resource"], path, f"{where}.resource")
    if "mounts" in raw:
        role.mounts = _mounts(raw["mounts"], path, f"{where}.mounts")
    return role


def _resource(data: object, path: str, where: str) -> Resource:
    if isinstance(data, str):
        try:
            return named_resources[data]
        except KeyError as exc:
            raise AppFileError(path, where, str(exc.args[0])) from None
    raw = _mapping(data, path, where, "must be a mapping or a named resource")
    _check_fields(raw, _RESOURCE_FIELDS, path, where)
    return Resource(
        cpu=_int(raw.get("cpu", 1), path, f"{where}.cpu"),
        gpu=_int(raw.get("gpu", 0), path, f"{where}.gpu"),
        memMB=_int(raw.get("memMB", 1024), path, f"{where}.memMB"),
        capabilities=_any_map(
            raw.get("capabilities", {}), path, f"{where}.capabilities"
        ),
        devices=_int_map(raw.get("devices", {}), path, f"{where}.devices"),
        tags=_any_map(raw.get("tags", {}), path, f"{where}.tags"),
    )


def _mounts(
    data: object, path: str, where: str
) -> list[BindMount | VolumeMount | DeviceMount]:
    if not isinstance(data, list):
        raise AppFileError(path, where, "must be a list of mounts")
    mounts: list[BindMount | VolumeMount | DeviceMount] = []
    for i, item in enumerate(data):
        if isinstance(item, str):
            tokens = [t for t in item.split(",") if t]
        elif isinstance(item, Mapping):
            tokens = [f"type={item.get('type', '')}"]
            for key, value in item.items():
                if key == "type":
                    continue
                if key in ("readonly", "read_only"):
                    if value:
                        tokens.append("readonly")
                else:
                    tokens.append(f"{key}={value}")
        else:
            raise AppFileError(path, f"{where}[{i}]", "must be a string or a mapping")
        try:
            mounts.extend(parse_mounts(tokens))
        except (KeyError, ValueError) as exc:
            message = exc.args[0] if exc.args else str(exc)
            if isinstance(exc, KeyError) and message in ("src", "dst"):
                message = f"missing `{message}`"
            raise AppFileError(path, f"{where}[{i}]", str(message)) from None
    return mounts


# -- small typed readers --------------------------------------------------------


def _check_metadata_size(metadata: Mapping[str, Any], path: str, field: str) -> None:
    size = len(json.dumps(metadata, default=str, ensure_ascii=False).encode())
    if size > MAX_METADATA_BYTES:
        raise AppFileError(
            path,
            field,
            f"is {size} bytes as JSON, more than the {MAX_METADATA_BYTES} an app"
            " file may give (keep large data in files the app reads)",
        )


def _mapping(data: object, path: str, where: str, message: str) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise AppFileError(path, where, f"{message}, got {type(data).__name__}")
    return {str(k): v for k, v in data.items()}


def _check_fields(
    raw: Mapping[str, Any], known: tuple[str, ...], path: str, where: str
) -> None:
    for key in raw:
        if key not in known:
            field = f"{where}.{key}" if where else key
            import difflib  # only for this error's hint

            close = difflib.get_close_matches(key, known, n=1)
            hint = (
                f" (did you mean `{close[0]}`?)" if close else f"; known: {list(known)}"
            )
            raise AppFileError(path, field, f"unknown field{hint}")


def _required_str(raw: Mapping[str, Any], key: str, path: str, where: str) -> str:
    field = f"{where}.{key}" if where else key
    if key not in raw:
        raise AppFileError(path, field, "is required")
    return _str(raw[key], path, field)


def _str(value: object, path: str, field: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise AppFileError(path, field, f"must be a string, got {value!r}")
    return str(value)


def _scalar(value: object, path: str, field: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise AppFileError(path, field, f"must be a string or a number, got {value!r}")


def _str_list(value: object, path: str, field: str) -> list[str]:
    if not isinstance(value, list):
        raise AppFileError(path, field, f"must be a list, got {value!r}")
    return [_scalar(v, path, f"{field}[{i}]") for i, v in enumerate(value)]


def _str_map(value: object, path: str, field: str) -> dict[str, str]:
    raw = _any_map(value, path, field)
    return {k: _scalar(v, path, f"{field}.{k}") for k, v in raw.items()}


def _any_map(value: object, path: str, field: str) -> dict[str, Any]:
    return _mapping(value, path, field, "must be a mapping")


def _int_map(value: object, path: str, field: str) -> dict[str, int]:
    raw = _any_map(value, path, field)
    return {k: _int(v, path, f"{field}.{k}") for k, v in raw.items()}


def _int(value: object, path: str, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise AppFileError(path, field, f"must be an integer, got {value!r}")
    return value


def app_to_dict(app: AppDef) -> dict[str, Any]:
    """The schema view of ``app`` (what ``describe`` prints)."""
    out: dict[str, Any] = {
        "name": app.name,
        "roles": [role_to_dict(role) for role in app.roles],
    }
    if app.metadata:
        out["metadata"] = dict(app.metadata)
    return out


def role_to_dict(role: Role) -> dict[str, Any]:
    """The schema view of ``role``; optional fields only when set."""
    item: dict[str, Any] = {
        "name": role.name,
        "image": role.image,
        "entrypoint": role.entrypoint,
        "args": list(role.args),
        "env": dict(role.env),
        "num_replicas": role.num_replicas,
        "max_retries": role.max_retries,
        "retry_policy": RetryPolicy(role.retry_policy).value,
    }
    if role.min_replicas is not None:
        item["min_replicas"] = role.min_replicas
    if role.resource is not NULL_RESOURCE and role.resource != NULL_RESOURCE:
        item["resource"] = {
            k: v for k, v in asdict(role.resource).items() if v not in ({}, None)
        }
    if role.port_map:
        item["port_map"] = dict(role.port_map)
    if role.metadata:
        item["metadata"] = dict(role.metadata)
    if role.mounts:
        item["mounts"] = [_mount_to_dict(m) for m in role.mounts]
    return item


def _mount_to_dict(mount: BindMount | VolumeMount | DeviceMount) -> dict[str, Any]:
    access: tuple[str, object]
    if isinstance(mount, BindMount):
        kind, src, access = "bind", mount.src_path, ("readonly", mount.read_only)
    elif isinstance(mount, VolumeMount):
        kind, src, access = "volume", mount.src, ("readonly", mount.read_only)
    else:
        kind, src, access = "device", mount.src_path, ("perm", mount.permissions)
    return {"type": kind, "src": src, "dst": mount.dst_path, access[0]: access[1]}
