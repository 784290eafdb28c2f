"""A pod's status -> :class:`~asyncsched.specs.StatusReason`, message and exit code.

Pure: reads the pod as the API server returns it (a dict). The kubelet writes
the facts used here: the main container's ``state.terminated`` (``reason``
``OOMKilled``, ``Error``, ``Completed``, ``ContainerCannotRun``,
``DeadlineExceeded``; ``exitCode``; ``message``) and ``state.waiting``
(``ErrImagePull``, ``ImagePullBackOff``, ``ErrImageNeverPull``,
``InvalidImageName``, ``CreateContainerConfigError``...); the pod's
``status.reason`` (``Evicted``, ``DeadlineExceeded``, ``NodeLost``...); the
scheduler writes the ``PodScheduled`` condition (``Unschedulable``).

Example:
    >>> pod = {"status": {"phase": "Failed", "containerStatuses": [
    ...     {"name": "main", "state": {"terminated": {
    ...         "reason": "OOMKilled", "exitCode": 137}}}]}}
    >>> pod_reason(pod, "main").reason
    <StatusReason.OOM_KILLED: 'OOM_KILLED'>
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from asyncsched.schedulers.kubernetes._json import JSON
from asyncsched.specs import StatusReason, explain_exit_code

__all__ = ["PodReason", "main_container_status", "pod_reason"]


_WAITING: Mapping[str, StatusReason] = {
    "ErrImagePull": StatusReason.IMAGE_PULL,
    "ImagePullBackOff": StatusReason.IMAGE_PULL,
    "ErrImageNeverPull": StatusReason.IMAGE_PULL,
    "InvalidImageName": StatusReason.IMAGE_PULL,
    "RegistryUnavailable": StatusReason.IMAGE_PULL,
    "CreateContainerConfigError": StatusReason.LAUNCH_FAILED,
    "CreateContainerError": StatusReason.LAUNCH_FAILED,
    "RunContainerError": StatusReason.LAUNCH_FAILED,
    "PreCreateHookError": StatusReason.LAUNCH_FAILED,
    "PreStartHookError": StatusReason.LAUNCH_FAILED,
}
_TERMINATED: Mapping[str, StatusReason] = {
    "OOMKilled": StatusReason.OOM_KILLED,
    "ContainerCannotRun": StatusReason.LAUNCH_FAILED,
    "StartError": StatusReason.LAUNCH_FAILED,
    "DeadlineExceeded": StatusReason.TIME_LIMIT,
}
#: how runc (containerd or Docker) says that a container's command does not exist
_NOT_FOUND = re.compile(
    r"executable file not found|exec: .*no such file or directory", re.IGNORECASE
)

_POD: Mapping[str, StatusReason] = {
    "Evicted": StatusReason.EVICTED,
    "DeadlineExceeded": StatusReason.TIME_LIMIT,
    "Preempting": StatusReason.PREEMPTED,
    "NodeLost": StatusReason.NODE_FAILURE,
    "NodeShutdown": StatusReason.NODE_FAILURE,
    "Terminated": StatusReason.NODE_FAILURE,
    "UnexpectedAdmissionError": StatusReason.LAUNCH_FAILED,
    "OutOfcpu": StatusReason.UNSCHEDULABLE,
    "OutOfmemory": StatusReason.UNSCHEDULABLE,
}


@dataclass(frozen=True)
class PodReason:
    """What a pod says about why it is not running or did not succeed."""

    reason: StatusReason | None = None
    message: str = ""
    exit_code: int | None = None


def main_container_status(pod: JSON, container: str | None) -> dict[str, Any]:
    """The status of the container named ``container`` (the first if None).

    The kubelet sorts ``containerStatuses`` by name, so with a sidecar the
    first entry is not necessarily the app's own container.
    """
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    for status in statuses:
        if container is None or status.get("name") == container:
            return dict(status)
    return {}


def pod_reason(pod: JSON, container: str | None = None) -> PodReason:
    """The reason, message and exit code of one pod's main container."""
    status = pod.get("status") or {}
    main = main_container_status(pod, container)
    cstate = main.get("state") or {}
    terminated = cstate.get("terminated") or {}
    waiting = cstate.get("waiting") or {}
    exit_code = terminated.get("exitCode")
    code = int(exit_code) if exit_code is not None else None
    pod_why = str(status.get("reason") or "")
    if pod_why in _POD:
        return PodReason(_POD[pod_why], _words(pod_why, status.get("message")), code)
    if terminated:
        why = str(terminated.get("reason") or "")
        if why in _TERMINATED and _NOT_FOUND.search(str(terminated.get("message"))):
            # the runtime could not find the command: the same words and
            # code as a shell's "not found" on every backend (runc says 128)
            text = f"{explain_exit_code(127)[1]}: {terminated['message']}"
            return PodReason(StatusReason.LAUNCH_FAILED, text, 127)
        if why in _TERMINATED:
            text = _words(why, terminated.get("message"))
            if code is not None:
                text += f" (exit code {code})"
            return PodReason(_TERMINATED[why], text, code)
        if code:
            reason, text = explain_exit_code(code)
            if terminated.get("message"):
                text += f": {terminated['message']}"
            return PodReason(reason, text, code)
        return PodReason(None, "", code)
    why = str(waiting.get("reason") or "")
    if why in _WAITING:
        return PodReason(_WAITING[why], _words(why, waiting.get("message")))
    for cond in status.get("conditions") or []:
        if (
            cond.get("type") == "PodScheduled"
            and cond.get("status") == "False"
            and cond.get("reason") == "Unschedulable"
        ):
            text = _words("Unschedulable", cond.get("message"))
            return PodReason(StatusReason.UNSCHEDULABLE, text)
    return PodReason(None, "", code)


def _words(reason: str, message: object) -> str:
    return f"{reason}: {message}" if message else reason
