"""What the caches keep of a Job, a Volcano Job or a pod.

A server's objects carry far more than status needs: ``managedFields``
(often as large as the rest), the whole pod spec (image, command, env,
volumes, resources), the Volcano task templates. The caches keep only what
``describe``, ``list``, logs and reasons read:

* metadata: name, namespace, uid, resourceVersion, creationTimestamp,
  deletionTimestamp, labels, annotations, ownerReferences (kind/name/uid);
* status: whole for Jobs; for pods the phase, reason, message, pod and host
  IP, start time, conditions (type, status, reason, message) and container
  statuses (name, state, lastState, restartCount, ready);
* spec: a Volcano Job's task names and template labels; a batch Job's
  completions, parallelism, suspend, completionMode, backoffLimit and
  ``ttlSecondsAfterFinished``; a pod's container names, hostname, subdomain
  and node name.

Keys and short strings are interned: thousands of objects share one copy of
each label key, phase and reason instead of one per object.

Example:
    >>> slim({"kind": "Pod", "metadata": {"name": "p", "managedFields": [{}]},
    ...       "spec": {"containers": [{"name": "main", "image": "busybox"}]}})
    {'kind': 'Pod', 'metadata': {'name': 'p'}, 'spec': {'containers': [{'name': 'main'}]}}
"""

from __future__ import annotations

import sys
from typing import Any

from asyncsched.schedulers.kubernetes._json import JSON

__all__ = ["slim"]


_META = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "labels",
    "annotations",
)
#: an annotation kubectl apply writes: a copy of the whole manifest
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_JOB_SPEC = (
    "completions",
    "parallelism",
    "suspend",
    "completionMode",
    "backoffLimit",
    "ttlSecondsAfterFinished",
)
_VOLCANO_SPEC = (
    "minAvailable",
    "queue",
    "ttlSecondsAfterFinished",
    "maxRetry",
    "policies",
)
_POD_SPEC = ("hostname", "subdomain", "nodeName")
_POD_STATUS = ("phase", "reason", "message", "podIP", "hostIP", "startTime")
_CONDITION = ("type", "status", "reason", "message")
_CONTAINER_STATUS = ("name", "state", "lastState", "restartCount", "ready")
#: longer strings (messages) are rarely shared
_INTERN_MAX = 64


def slim(obj: JSON) -> JSON:
    """A copy of ``obj`` with only the fields the caches read (see above)."""
    out: JSON = {}
    for field in ("apiVersion", "kind"):
        if field in obj:
            out[field] = obj[field]
    out["metadata"] = _metadata(obj.get("metadata") or {})
    spec = obj.get("spec")
    if isinstance(spec, dict):
        out["spec"] = _spec(obj, spec)
    status = obj.get("status")
    # list items carry no kind: a pod is what has containers in its spec
    is_pod = isinstance(spec, dict) and "containers" in spec
    if isinstance(status, dict) and is_pod:
        out["status"] = _pod_status(status)
    elif "status" in obj:
        out["status"] = status
    compact: JSON = _interned(out)
    return compact


def _interned(value: Any) -> Any:
    """``value`` rebuilt with its keys and short strings interned."""
    if isinstance(value, dict):
        return {sys.intern(k): _interned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_interned(v) for v in value]
    if isinstance(value, str) and len(value) <= _INTERN_MAX:
        return sys.intern(value)
    return value


def _pod_status(status: JSON) -> JSON:
    out = {k: status[k] for k in _POD_STATUS if k in status}
    if status.get("conditions"):
        out["conditions"] = [
            {k: c[k] for k in _CONDITION if k in c} for c in status["conditions"]
        ]
    for field in ("initContainerStatuses", "containerStatuses"):
        if status.get(field):
            out[field] = [
                {k: c[k] for k in _CONTAINER_STATUS if k in c} for c in status[field]
            ]
    return out


def _metadata(meta: JSON) -> JSON:
    out = {k: meta[k] for k in _META if k in meta}
    annotations = out.get("annotations")
    if annotations and _LAST_APPLIED in annotations:
        out["annotations"] = {
            k: v for k, v in annotations.items() if k != _LAST_APPLIED
        }
    refs = meta.get("ownerReferences")
    if refs:
        out["ownerReferences"] = [
            {k: r[k] for k in ("kind", "name", "uid") if k in r} for r in refs
        ]
    return out


def _spec(obj: JSON, spec: JSON) -> JSON:
    if "containers" in spec:  # a pod
        out = {k: spec[k] for k in _POD_SPEC if k in spec}
        out["containers"] = [
            {"name": c.get("name")} for c in spec.get("containers") or []
        ]
        return out
    if "tasks" in spec:  # a Volcano Job
        out = {k: spec[k] for k in _VOLCANO_SPEC if k in spec}
        out["tasks"] = [_task(t) for t in spec.get("tasks") or []]
        return out
    return {k: spec[k] for k in _JOB_SPEC if k in spec}


def _task(task: JSON) -> JSON:
    template = task.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    out: JSON = {"name": task.get("name"), "template": {"metadata": {"labels": labels}}}
    for field in ("replicas", "policies", "maxRetry"):  # policies: _retry_pending
        if field in task:
            out[field] = task[field]
    return out
