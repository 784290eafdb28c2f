"""What the real API server does to an object before storing it.

Defaulting and validation for the served kinds, mirroring the parts of the
real registry strategies a client can observe: names and label syntax
(422 Invalid), ``generateName``, the Job selector and generated template
labels, pod/service/job defaults, status dropped on create (status is a
subresource), spec changes bumping ``metadata.generation``, immutable Job
templates, and the "custom resources need apiVersion and kind" rule.

Example::

    obj = admit_create(kind, "ns", body)   # raises ApiError(422) when invalid
"""

from __future__ import annotations

import random
import re
import uuid
from typing import Any

from .jsoncopy import copy_json
from .kinds import JSON, ApiError, Kind, bad_request, invalid

_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_LABEL_1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[kMGTPE]i?|Ki|m)?$")
_GEN_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

Causes = list[tuple[str, str]]


def random_suffix(n: int = 5) -> str:
    """The random part of a generated name (same alphabet as the real server)."""
    return "".join(random.choice(_GEN_ALPHABET) for _ in range(n))


def _check_name(kind: Kind, name: str, causes: Causes) -> None:
    if kind.plural == "services":
        if len(name) > 63 or not _LABEL_1035.match(name):
            causes.append(
                (
                    "metadata.name",
                    (
                        f'Invalid value: "{name}": a DNS-1035 label must consist of '
                        "lower case alphanumeric characters or '-', start with an "
                        "alphabetic character, and end with an alphanumeric character"
                    ),
                )
            )
    elif kind.plural == "namespaces":
        if len(name) > 63 or not _LABEL_1123.match(name):
            causes.append(
                (
                    "metadata.name",
                    (
                        f'Invalid value: "{name}": a lowercase RFC 1123 label must '
                        "consist of lower case alphanumeric characters or '-', and "
                        "must start and end with an alphanumeric character"
                    ),
                )
            )
    elif len(name) > 253 or not _SUBDOMAIN.match(name):
        causes.append(
            (
                "metadata.name",
                (
                    f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must '
                    "consist of lower case alphanumeric characters, '-' or '.', and "
                    "must start and end with an alphanumeric character"
                ),
            )
        )


def check_labels(labels: Any, path: str, causes: Causes) -> None:
    """Label keys (optional DNS prefix + name) and values, as the server checks them."""
    if labels is None:
        return
    if not isinstance(labels, dict):
        causes.append((path, "Invalid value: must be a map of strings"))
        return
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        if (
            (prefix and (len(prefix) > 253 or not _SUBDOMAIN.match(prefix)))
            or len(name) > 63
            or not _QUALIFIED.match(name)
        ):
            causes.append(
                (
                    path,
                    (
                        f'Invalid value: "{key}": name part must consist of '
                        "alphanumeric characters, '-', '_' or '.', and must start and "
                        "end with an alphanumeric character"
                    ),
                )
            )
        if not isinstance(value, str):
            causes.append((path, f"Invalid value: {value!r}: must be a string"))
        elif len(value) > 63:
            causes.append(
                (path, f'Invalid value: "{value}": must be no more than 63 characters')
            )
        elif value and not _QUALIFIED.match(value):
            causes.append(
                (
                    path,
                    (
                        f'Invalid value: "{value}": a valid label must be an empty '
                        "string or consist of alphanumeric characters, '-', '_' or '.', "
                        "and must start and end with an alphanumeric character"
                    ),
                )
            )


def _default_pod_spec(spec: JSON) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    for c in spec.get("containers") or []:
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
        image = str(c.get("image", ""))
        tagged = ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest")
        c.setdefault("imagePullPolicy", "IfNotPresent" if tagged else "Always")
        c.setdefault("resources", {})


def _check_pod_spec(spec: Any, path: str, causes: Causes) -> None:
    if not isinstance(spec, dict):
        causes.append((path, "Required value"))
        return
    containers = spec.get("containers")
    if not containers:
        causes.append((f"{path}.containers", "Required value"))
        return
    seen: set[str] = set()
    for i, c in enumerate(containers):
        name = c.get("name") or ""
        if not name:
            causes.append((f"{path}.containers[{i}].name", "Required value"))
        elif len(name) > 63 or not _LABEL_1123.match(name):
            causes.append(
                (
                    f"{path}.containers[{i}].name",
                    (
                        f'Invalid value: "{name}": a '
                        "lowercase RFC 1123 label must consist of lower case "
                        "alphanumeric characters or '-'"
                    ),
                )
            )
        elif name in seen:
            causes.append(
                (f"{path}.containers[{i}].name", f'Duplicate value: "{name}"')
            )
        seen.add(name)
        resources = c.get("resources") or {}
        for section in ("limits", "requests"):
            for res_name, value in (resources.get(section) or {}).items():
                if not _QUANTITY.match(str(value)):
                    raise bad_request(
                        f"quantities must match the regular expression "
                        f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' "
                        f"({path}.containers[{i}].resources.{section}[{res_name}])"
                    )
        if not c.get("image"):
            causes.append((f"{path}.containers[{i}].image", "Required value"))
    for field in ("hostname", "subdomain"):
        value = spec.get(field)
        if value and (len(value) > 63 or not _LABEL_1123.match(value)):
            causes.append(
                (
                    f"{path}.{field}",
                    f'Invalid value: "{value}": a lowercase RFC 1123 label must '
                    "consist of lower case alphanumeric characters or '-', and must "
                    "start and end with an alphanumeric character (e.g. 'my-name',  "
                    "or '123-abc', regex used for validation is "
                    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
                    if len(value) <= 63
                    else f'Invalid value: "{value}": must be no more than 63 characters',
                )
            )
    policy = spec.get("restartPolicy", "Always")
    if policy not in ("Always", "OnFailure", "Never"):
        causes.append(
            (
                f"{path}.restartPolicy",
                (
                    f'Unsupported value: "{policy}": supported '
                    'values: "Always", "OnFailure", "Never"'
                ),
            )
        )


def _qos(spec: JSON) -> str:
    res = [c.get("resources") or {} for c in spec.get("containers") or []]
    if not any(r.get("requests") or r.get("limits") for r in res):
        return "BestEffort"
    guaranteed = all(
        r.get("limits")
        and set(r["limits"]) >= {"cpu", "memory"}
        and all(r.get("requests", {}).get(k, v) == v for k, v in r["limits"].items())
        for r in res
    )
    return "Guaranteed" if guaranteed else "Burstable"


def _prepare_job(obj: JSON, causes: Causes) -> None:
    meta, spec = obj["metadata"], obj.setdefault("spec", {})
    template = spec.setdefault("template", {})
    tmeta = template.setdefault("metadata", {})
    if not meta.get("labels") and tmeta.get("labels"):
        meta["labels"] = dict(tmeta["labels"])
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    if "podFailurePolicy" not in spec:
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    if not spec.get("manualSelector"):
        uid, name = meta["uid"], meta["name"]
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        tmeta["labels"] = {
            **(tmeta.get("labels") or {}),
            "batch.kubernetes.io/controller-uid": uid,
            "batch.kubernetes.io/job-name": name,
            "controller-uid": uid,
            "job-name": name,
        }
    pod_spec = template.get("spec")
    _check_pod_spec(pod_spec, "spec.template.spec", causes)
    if isinstance(pod_spec, dict):
        _default_pod_spec(pod_spec)
        policy = pod_spec.get("restartPolicy")
        if policy not in ("Never", "OnFailure"):
            causes.append(
                (
                    "spec.template.spec.restartPolicy",
                    (
                        f'Unsupported value: "{policy}": '
                        'supported values: "OnFailure", "Never"'
                    ),
                )
            )
    check_labels(tmeta.get("labels"), "spec.template.metadata.labels", causes)
    if spec["completionMode"] == "Indexed" and spec.get("completions") is None:
        causes.append(
            ("spec.completions", "Required value: when completion mode is Indexed")
        )
    if spec["completionMode"] not in ("Indexed", "NonIndexed"):
        causes.append(("spec.completionMode", "Unsupported value"))


def _prepare_service(obj: JSON, causes: Causes) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if "clusterIP" not in spec:
        spec["clusterIP"] = f"10.96.{random.randint(0, 255)}.{random.randint(1, 254)}"
    spec.setdefault("clusterIPs", [spec["clusterIP"]])
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    ports = spec.get("ports") or []
    if not ports and spec["clusterIP"] != "None":
        causes.append(("spec.ports", "Required value"))
    for p in ports:
        p.setdefault("protocol", "TCP")
        p.setdefault("targetPort", p.get("port"))
    obj["status"] = {"loadBalancer": {}}


def admit_create(kind: Kind, namespace: str, body: Any) -> JSON:
    """Default and validate a new object; raises ApiError (400/422)."""
    if not isinstance(body, dict):
        raise bad_request("the object provided is not a JSON object")
    obj = copy_json(body)
    if kind.custom:
        if not obj.get("kind"):
            raise bad_request(f"Object 'Kind' is missing in '{_short(body)}'")
        if not obj.get("apiVersion"):
            raise bad_request(f"Object 'apiVersion' is missing in '{_short(body)}'")
    if (
        obj.setdefault("kind", kind.kind) != kind.kind
        or obj.setdefault("apiVersion", kind.api_version) != kind.api_version
    ):
        raise bad_request(
            f"the API version in the data ({obj['apiVersion']}) does not match the "
            f"expected API version ({kind.api_version})"
            if obj["apiVersion"] != kind.api_version
            else f"kind {obj['kind']} does not match the expected kind {kind.kind}"
        )
    meta = obj.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise bad_request("metadata must be an object")
    if kind.namespaced and meta.get("namespace") not in (None, "", namespace):
        raise bad_request(
            "the namespace of the provided object does not match the namespace "
            "sent on the request"
        )
    for server_field in (
        "resourceVersion",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
    ):
        meta.pop(server_field, None)
    if not meta.get("name") and meta.get("generateName"):
        # The real name generator keeps at most 58 characters of the prefix.
        meta["name"] = f"{meta['generateName'][:58]}{random_suffix()}"
    name = meta.get("name") or ""
    causes: Causes = []
    if not name:
        causes.append(
            ("metadata.name", "Required value: name or generateName is required")
        )
    else:
        _check_name(kind, name, causes)
    check_labels(meta.get("labels"), "metadata.labels", causes)
    meta["uid"] = str(uuid.uuid4())
    obj.pop("status", None)
    if kind.plural == "pods":
        _check_pod_spec(obj.get("spec"), "spec", causes)
        if isinstance(obj.get("spec"), dict):
            _default_pod_spec(obj["spec"])
            obj["status"] = {"phase": "Pending", "qosClass": _qos(obj["spec"])}
    elif kind.plural == "services":
        _prepare_service(obj, causes)
    elif kind.plural == "namespaces":
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = name
        obj["spec"] = {"finalizers": ["kubernetes"]}
        obj["status"] = {"phase": "Active"}
    elif kind.key == ("batch", "v1", "jobs"):
        _prepare_job(obj, causes)
        obj["status"] = {}
    if causes:
        raise invalid(kind, name, causes)
    return obj


def admit_update(kind: Kind, old: JSON, new: Any, *, status_only: bool) -> JSON:
    """Merge an update onto the stored object as the main or status endpoint does."""
    if not isinstance(new, dict):
        raise bad_request("the object provided is not a JSON object")
    name = old["metadata"]["name"]
    merged = copy_json(old)
    if status_only:
        if "status" in new:
            merged["status"] = copy_json(new["status"])
        else:
            merged.pop("status", None)
        return merged
    new = copy_json(new)
    meta = new.get("metadata") or {}
    if meta.get("name", name) != name:
        raise bad_request(
            f"the name of the object ({meta.get('name')}) does not match the name "
            f"on the URL ({name})"
        )
    for immutable in (
        "uid",
        "creationTimestamp",
        "namespace",
        "name",
        "generation",
        "resourceVersion",
        "deletionTimestamp",
    ):
        if immutable in old["metadata"]:
            meta[immutable] = old["metadata"][immutable]
        else:
            meta.pop(immutable, None)
    new["metadata"] = meta
    new["kind"], new["apiVersion"] = old["kind"], old["apiVersion"]
    if "status" in old:
        new["status"] = old["status"]
    else:
        new.pop("status", None)
    causes: Causes = []
    check_labels(meta.get("labels"), "metadata.labels", causes)
    if kind.key == ("batch", "v1", "jobs"):
        for fixed in ("template", "selector", "completionMode"):
            if (new.get("spec") or {}).get(fixed) != old["spec"].get(fixed):
                causes.append((f"spec.{fixed}", "Invalid value: field is immutable"))
    if kind.plural == "pods" and _fixed_pod_spec(old.get("spec")) != _fixed_pod_spec(
        new.get("spec")
    ):
        causes.append(
            (
                "spec",
                (
                    "Forbidden: pod updates may not change fields other "
                    "than `spec.containers[*].image`, `spec.activeDeadlineSeconds`, "
                    "`spec.tolerations` (only additions to existing tolerations)"
                ),
            )
        )
    if causes:
        raise invalid(kind, name, causes)
    if new.get("spec") != old.get("spec"):
        meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
    result: JSON = new
    return result


def _fixed_pod_spec(spec: Any) -> Any:
    """The part of a pod spec an update may not change (all but images and a few)."""
    if not isinstance(spec, dict):
        return spec
    fixed = {
        k: v
        for k, v in spec.items()
        if k not in ("activeDeadlineSeconds", "tolerations")
    }
    fixed["containers"] = [
        {k: v for k, v in c.items() if k != "image"}
        for c in spec.get("containers") or []
    ]
    return fixed


def _short(body: JSON) -> str:
    import json

    text = json.dumps(body, separators=(",", ":"))
    return text if len(text) < 120 else text[:117] + "..."


def check_update_precondition(kind: Kind, old: JSON, new: JSON, *, put: bool) -> None:
    """resourceVersion preconditions (409), and CRDs' ban on unconditional PUT (422)."""
    rv = (new.get("metadata") or {}).get("resourceVersion")
    if rv is None:
        if put and kind.custom:
            raise invalid(
                kind,
                old["metadata"]["name"],
                [
                    (
                        "metadata.resourceVersion",
                        "Invalid value: 0x0: must be specified for an update",
                    )
                ],
            )
        return
    if str(rv) != old["metadata"]["resourceVersion"]:
        from .kinds import conflict

        raise conflict(kind, old["metadata"]["name"])


__all__ = ["ApiError", "admit_create", "admit_update", "check_labels", "random_suffix"]
