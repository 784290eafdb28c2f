"""The pieces every pod template is made of, whichever Job API runs it.

Containers (command, env, ports, resources), mounts and volumes, the pod
template with its node selector, tolerations and pull secrets, and the
role's ``metadata["kubernetes"]`` overlay merged over it (:func:`deep_merge`).

Example:
    >>> deep_merge({"a": {"b": 1}, "l": [1]}, {"a": {"c": 2}, "l": [2]})
    {'a': {'b': 1, 'c': 2}, 'l': [1, 2]}
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from asyncsched.errors import InvalidRunConfigException, SpecError
from asyncsched.schedulers.kubernetes._job_names import (
    LABEL_APP_ID,
    LABEL_APP_NAME,
    LABEL_INSTANCE,
    LABEL_MANAGED_BY,
    LABEL_NAME,
    LABEL_ROLE_INDEX,
    LABEL_ROLE_NAME,
    LABEL_SESSION,
    LABEL_VERSION,
    MANAGED_BY,
    sanitize_label_value,
)
from asyncsched.schedulers.shared.mounts import checked_mounts
from asyncsched.specs import AppDef, CfgVal, MountType, Role

__all__ = (
    "ENV_IMAGE",
    "FIELD_PATH",
    "RenderContext",
    "check_env_names",
    "deep_merge",
    "env_list",
    "replica_pod",
    "set_ttl",
)

ENV_IMAGE = "TORCHX_IMAGE"
FIELD_PATH = "[FIELD_PATH]"
_PORT_NAME = re.compile(r"^(?=.*[a-z])[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_TOLERATION = re.compile(r"^([^=:]+)(?:=([^:]*))?(?::(\w+))?$")
_INSTANCE_TYPE = "node.kubernetes.io/instance-type"


@dataclass
class RenderContext:
    """What every manifest of one app is rendered from."""

    app: AppDef
    cfg: Mapping[str, CfgVal]
    name: str
    namespace: str
    session: str
    version: str
    images: dict[str, str] = field(default_factory=dict)

    def image(self, role: Role) -> str:
        return self.images.get(role.image, role.image)

    @property
    def app_id(self) -> str:
        return f"{self.namespace}:{self.name}"

    def job_labels(self) -> dict[str, str]:
        return {
            LABEL_APP_ID: self.name,
            LABEL_APP_NAME: sanitize_label_value(self.app.name),
            LABEL_SESSION: sanitize_label_value(self.session),
            LABEL_VERSION: sanitize_label_value(self.version),
            LABEL_MANAGED_BY: MANAGED_BY,
        }

    def pod_labels(self, role: Role, role_index: int) -> dict[str, str]:
        return {
            **self.job_labels(),
            LABEL_ROLE_NAME: sanitize_label_value(role.name),
            LABEL_ROLE_INDEX: str(role_index),
            LABEL_NAME: sanitize_label_value(self.app.name),
            LABEL_INSTANCE: self.name,
        }


# What the API server's validation of a container's env accepts (a Volcano
# job's pod template is not validated at create: a bad name leaves a job
# that never gets a pod, so it is checked here, before submit).
_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")


def check_env_names(app: AppDef) -> None:
    """Raise SpecError naming the first env name Kubernetes would reject.

    Example:
        >>> check_env_names(AppDef("a", roles=[Role("r", "i", env={"OK_1": "x"})]))
    """
    for index, role in enumerate(app.roles):
        for name in role.env:
            if not _ENV_NAME.fullmatch(name):
                raise SpecError(
                    f"roles[{index}].env.{name}",
                    f"{name!r} is not a valid Kubernetes env name: letters,"
                    " digits, '_', '-' and '.', not starting with a digit",
                )


def set_ttl(spec: dict[str, Any], cfg: Mapping[str, CfgVal]) -> None:
    """``ttlSecondsAfterFinished`` from the ``ttl_seconds_after_finished`` option."""
    ttl = cfg.get("ttl_seconds_after_finished")
    if ttl is None:
        return
    if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 0:
        raise InvalidRunConfigException(
            f"ttl_seconds_after_finished must be a whole number of seconds >= 0,"
            f" got {ttl!r}",
            "ttl_seconds_after_finished",
            dict(cfg),
        )
    spec["ttlSecondsAfterFinished"] = ttl


def env_list(env: Mapping[str, str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for key, value in env.items():
        if value.startswith(FIELD_PATH):
            path = value.removeprefix(FIELD_PATH)
            out.append({"name": key, "valueFrom": {"fieldRef": {"fieldPath": path}}})
        else:
            out.append({"name": key, "value": value})
    return out


def _make_container(
    name: str,
    image: str,
    role: Role,
    cfg: Mapping[str, CfgVal],
    env: list[dict[str, Any]],
    mounts: list[dict[str, Any]],
    privileged: bool,
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": name,
        "image": image,
        "command": [role.entrypoint, *role.args],
        "env": env,
        "ports": [],
        "resources": _resources(role, cfg),
        "securityContext": {"privileged": True} if privileged else {},
        "volumeMounts": mounts,
    }
    policy = cfg.get("image_pull_policy")
    if policy:  # else the cluster's default (Always for :latest or no tag)
        container["imagePullPolicy"] = str(policy)
    return container


def _port_list(role: Role, role_index: int) -> list[dict[str, Any]]:
    ports = []
    for port_name, port in role.port_map.items():
        if len(port_name) > 15 or not _PORT_NAME.match(port_name):
            raise SpecError(
                f"roles[{role_index}].port_map",
                f"port name {port_name!r} is not a valid Kubernetes port name"
                " (at most 15 lower-case letters, digits and '-', with a letter)",
            )
        ports.append({"name": port_name, "containerPort": port})
    return ports


def _resources(role: Role, cfg: Mapping[str, CfgVal]) -> dict[str, dict[str, str]]:
    res = role.resource
    reserved_mcpu = _int(cfg.get("reserved_millicpu"), 100)
    reserved_mem = _int(cfg.get("reserved_memmb"), 1024)
    limits: dict[str, str] = {}
    requests: dict[str, str] = {}
    if res.cpu > 0:
        mcpu = int(res.cpu * 1000)
        limits["cpu"] = f"{mcpu}m"
        requests["cpu"] = f"{max(mcpu - reserved_mcpu, 0)}m"
    if res.memMB > 0:
        limits["memory"] = f"{int(res.memMB)}M"
        requests["memory"] = f"{max(int(res.memMB) - reserved_mem, 0)}M"
    if res.gpu > 0:
        limits["nvidia.com/gpu"] = requests["nvidia.com/gpu"] = str(res.gpu)
    for device, count in res.devices.items():
        limits[device] = str(count)
    efa = cfg.get("efa_device_count")
    if isinstance(efa, int):
        limits.pop("vpc.amazonaws.com/efa", None)
        if efa > 0:
            limits["vpc.amazonaws.com/efa"] = str(efa)
    return {"limits": limits, "requests": requests}


def _role_mounts(
    role: Role, where: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool]:
    mounts: list[dict[str, Any]] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    checked = checked_mounts(role.mounts, where, volume="a PVC name")
    for i, mount in enumerate(checked):
        name = f"mount-{i}"
        if mount.kind == MountType.VOLUME:
            volumes.append(
                {"name": name, "persistentVolumeClaim": {"claimName": mount.src}}
            )
        else:  # a bind mount or a device: a host path
            volumes.append({"name": name, "hostPath": {"path": mount.src}})
        mounts.append(
            {"name": name, "mountPath": mount.dst, "readOnly": mount.read_only}
        )
    privileged = any(m.kind == MountType.DEVICE for m in checked)
    return mounts, volumes, privileged


def _pod_template(
    main: dict[str, Any],
    volumes: list[dict[str, Any]],
    labels: dict[str, str],
    role: Role,
    cfg: Mapping[str, CfgVal],
    role_index: int,
) -> dict[str, Any]:
    node_selector: dict[str, str] = {}
    instance_type = role.resource.capabilities.get(_INSTANCE_TYPE)
    if instance_type is not None:
        node_selector[_INSTANCE_TYPE] = str(instance_type)
    selector_cfg = cfg.get("node_selector")
    if isinstance(selector_cfg, dict):
        node_selector.update({str(k): str(v) for k, v in selector_cfg.items()})
    spec: dict[str, Any] = {
        "containers": [main],
        "restartPolicy": "Never",
        "nodeSelector": node_selector,
        "volumes": volumes,
    }
    account = cfg.get("service_account")
    if account:
        spec["serviceAccountName"] = str(account)
    tolerations = _tolerations(cfg.get("tolerations"), cfg)
    if tolerations:
        spec["tolerations"] = tolerations
    secrets = cfg.get("image_pull_secrets")
    if isinstance(secrets, list) and secrets:
        spec["imagePullSecrets"] = [{"name": str(s)} for s in secrets]
    pod: dict[str, Any] = {
        "metadata": {
            "annotations": {"sidecar.istio.io/inject": "false"},
            "labels": labels,
        },
        "spec": spec,
    }
    overlay = role.metadata.get("kubernetes")
    if overlay is not None:
        if not isinstance(overlay, dict):
            raise SpecError(
                f"roles[{role_index}].metadata['kubernetes']",
                f"must be a dict overlaid on the pod, got {type(overlay).__name__}",
            )
        pod = deep_merge(pod, overlay)
    return pod


def replica_pod(
    ctx: RenderContext,
    role_index: int,
    replica: Role,
    *,
    name: str,
    env: list[dict[str, Any]],
    labels: dict[str, str],
) -> dict[str, Any]:
    """The pod template of one replica of ``ctx.app.roles[role_index]``.

    ``replica`` is the role with the replica's macros filled in, ``name`` its
    container's name and ``env`` that container's environment, in order. The
    mounts, ports and image come from the role; resources, node selector,
    tolerations and the role's overlay as in every pod of the app.

    Example:
        >>> app = AppDef("a", roles=[Role("r", "img", entrypoint="echo")])
        >>> ctx = RenderContext(app, {}, "a-x", "default", "s", "1")
        >>> pod = replica_pod(ctx, 0, app.roles[0], name="r-0", env=[], labels={})
        >>> pod["spec"]["containers"][0]["image"]
        'img'
    """
    role = ctx.app.roles[role_index]
    mounts, volumes, privileged = _role_mounts(role, f"roles[{role_index}]")
    container = _make_container(
        name, ctx.image(role), replica, ctx.cfg, env, mounts, privileged
    )
    container["ports"] = _port_list(role, role_index)
    return _pod_template(container, volumes, labels, replica, ctx.cfg, role_index)


def deep_merge(base: dict[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``overlay`` merged in: dicts merge, lists append, rest replace.

    Example:
        >>> deep_merge({"a": {"b": 1}, "l": [1]}, {"a": {"c": 2}, "l": [2]})
        {'a': {'b': 1, 'c': 2}, 'l': [1, 2]}
    """
    out = copy.deepcopy(base)
    for key, value in overlay.items():
        current = out.get(key)
        if isinstance(current, dict) and isinstance(value, Mapping):
            out[key] = deep_merge(current, value)
        elif isinstance(current, list) and isinstance(value, list):
            out[key] = current + copy.deepcopy(value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _tolerations(value: CfgVal, cfg: Mapping[str, CfgVal]) -> list[dict[str, str]]:
    if not isinstance(value, list):
        return []
    out = []
    for item in value:
        match = _TOLERATION.match(str(item).strip())
        if match is None:
            raise InvalidRunConfigException(
                f"toleration {item!r} is not KEY[=VALUE][:EFFECT]",
                "tolerations",
                dict(cfg),
            )
        key, val, effect = match.groups()
        tol = {"key": key, "operator": "Exists" if val is None else "Equal"}
        if val is not None:
            tol["value"] = val
        if effect:
            tol["effect"] = effect
        out.append(tol)
    return out


def _int(value: CfgVal, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
