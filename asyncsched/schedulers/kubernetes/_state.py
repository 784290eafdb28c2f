"""Kubernetes objects -> app and replica states, without I/O.

Volcano job phases map as TorchX maps them (reference B.12, with
``Completing`` RUNNING); a phase this module does not know is UNKNOWN, never
an error; a Job without a phase yet (just created) is SUBMITTED. Replicas
take their state, exit code and hostname from their pods; a replica whose
pod is not there yet falls back to Volcano's ``taskStatusCount`` (or
PENDING). An ``indexed`` app is the sum of its role Jobs' conditions.

Example:
    >>> volcano_state({"status": {"state": {"phase": "Completed"}}})
    SUCCEEDED (4)
    >>> volcano_state({"status": {"state": {"phase": "Exploding"}}})
    UNKNOWN (7)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from asyncsched.schedulers.kit import (
    AppSnapshot,
    ReplicaSnapshot,
    app_failure_message,
    replica_exit_message,
)
from asyncsched.schedulers.kubernetes._job_names import (
    ANNOTATION_CANCELLED,
    COMPLETION_INDEX,
    LABEL_APP_NAME,
    LABEL_REPLICA_ID,
    LABEL_ROLE_INDEX,
    LABEL_ROLE_NAME,
)
from asyncsched.schedulers.kubernetes._json import JSON
from asyncsched.schedulers.kubernetes._reasons import (
    main_container_status,
    pod_reason,
)
from asyncsched.schedulers.kubernetes._retry_pending import job_version, restarting
from asyncsched.specs import AppState, Role, StatusReason, is_terminal

__all__ = [
    "JOB_STATE",
    "POD_STATE",
    "TASK_STATE",
    "completion_index",
    "describe_indexed",
    "describe_volcano",
    "indexed_state",
    "volcano_pods_unseen",
    "volcano_state",
]


JOB_STATE: dict[str, AppState] = {
    "Pending": AppState.PENDING,
    "Aborting": AppState.RUNNING,
    "Aborted": AppState.CANCELLED,
    "Running": AppState.RUNNING,
    "Restarting": AppState.RUNNING,
    "Completing": AppState.RUNNING,
    "Completed": AppState.SUCCEEDED,
    "Terminating": AppState.RUNNING,
    "Terminated": AppState.FAILED,
    "Failed": AppState.FAILED,
}

TASK_STATE: dict[str, AppState] = {
    "Pending": AppState.PENDING,
    "Allocated": AppState.PENDING,
    "Pipelined": AppState.PENDING,
    "Binding": AppState.PENDING,
    "Bound": AppState.PENDING,
    "Running": AppState.RUNNING,
    "Releasing": AppState.RUNNING,
    "Succeeded": AppState.SUCCEEDED,
    "Failed": AppState.FAILED,
    "Unknown": AppState.UNKNOWN,
}

POD_STATE: dict[str, AppState] = {
    "Pending": AppState.PENDING,
    "Running": AppState.RUNNING,
    "Succeeded": AppState.SUCCEEDED,
    "Failed": AppState.FAILED,
    "Unknown": AppState.UNKNOWN,
}

_LIVE_JOB = frozenset({AppState.PENDING, AppState.RUNNING})
#: the Volcano task a pod was made for (its key in ``taskStatusCount``)
_TASK_SPEC = "volcano.sh/task-spec"

#: container waiting reasons that will not fix themselves (reported in ``msg``)
_STUCK = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "ErrImageNeverPull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
    }
)


def volcano_state(job: JSON) -> AppState:
    """The app state of a Volcano Job; no status yet is SUBMITTED.

    A Job the server stored but Volcano's controller has not looked at yet
    has no phase: it is submitted (TorchX says UNKNOWN there, which would make
    an app just submitted look lost).
    """
    phase = ((job.get("status") or {}).get("state") or {}).get("phase")
    if not phase:
        return AppState.SUBMITTED
    return JOB_STATE.get(str(phase), AppState.UNKNOWN)


def _labels(obj: JSON) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _newest(pods: Iterable[JSON]) -> JSON | None:
    best = None
    for pod in pods:
        # a later Volcano attempt first (timestamps have 1 s steps)
        stamp = (job_version(pod), str(pod["metadata"].get("creationTimestamp") or ""))
        if best is None or stamp >= (
            job_version(best),
            str(best["metadata"].get("creationTimestamp") or ""),
        ):
            best = pod
    return best


def main_container(pod: JSON) -> str | None:
    """The name of the container asyncsched rendered: the pod spec's first.

    Webhooks (service meshes, secret injectors) append their sidecars.
    """
    containers = (pod.get("spec") or {}).get("containers") or []
    return str(containers[0].get("name")) if containers else None


def _container_status(pod: JSON) -> JSON:
    return main_container_status(pod, main_container(pod))


def pod_hostname(pod: JSON) -> str:
    """The replica's stable DNS name: ``{spec.hostname}.{spec.subdomain}``.

    Volcano's svc plugin and the Job controller (Indexed Jobs) give every pod
    a ``hostname`` and the headless Service's name as ``subdomain``; the name
    resolves from any pod of the namespace, survives a pod's replacement, and
    assumes neither IPv4 nor the cluster domain. A pod without a subdomain
    (someone else's) is named by its ``hostname`` or its pod name.

    Example:
        >>> pod_hostname({"metadata": {"name": "j-t-0-0"},
        ...               "spec": {"hostname": "j-t-0-0", "subdomain": "j"}})
        'j-t-0-0.j'
    """
    spec = pod.get("spec") or {}
    host = str(spec.get("hostname") or pod["metadata"].get("name") or "")
    subdomain = spec.get("subdomain")
    return f"{host}.{subdomain}" if host and subdomain else host


def _replica(
    replica_id: int,
    role: str,
    pod: JSON | None,
    fallback: AppState,
) -> ReplicaSnapshot:
    """The replica, with a message when it failed or is stuck."""
    if pod is None:
        return ReplicaSnapshot(role, replica_id, fallback)
    status = pod.get("status") or {}
    state = POD_STATE.get(str(status.get("phase")), AppState.UNKNOWN)
    hostname = pod_hostname(pod)
    cstatus = _container_status(pod)
    cstate = cstatus.get("state") or {}
    terminated = cstate.get("terminated") or {}
    if not terminated and state in (AppState.FAILED, AppState.SUCCEEDED):
        # a pod deleted while it ran: the kubelet (1.20) may report its end
        # only as the last state, e.g. 137 ContainerStatusUnknown
        terminated = (cstatus.get("lastState") or {}).get("terminated") or {}
    exit_code = terminated.get("exitCode")
    why = pod_reason(pod, main_container(pod))
    if why.reason == StatusReason.LAUNCH_FAILED and why.exit_code == 127:
        exit_code = 127  # a command not found, whatever the runtime said
    # the same words as every backend: how it ended, no pod name in front
    # (the pod is the replica's hostname)
    msg = ""
    if state == AppState.FAILED and not why.message:
        code = int(exit_code) if exit_code is not None else None
        reason = terminated.get("reason") or status.get("reason") or "failed"
        msg = replica_exit_message(code) or str(reason)
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            msg = f"{cond.get('reason') or 'not scheduled'}: "
            msg += str(cond.get("message") or "")
    waiting = cstate.get("waiting") or {}
    if waiting.get("reason") in _STUCK:
        msg = f"{waiting['reason']}: {waiting.get('message', '')}".rstrip(": ")
    return ReplicaSnapshot(
        role,
        replica_id,
        state,
        exit_code=int(exit_code) if exit_code is not None else None,
        hostname=hostname,
        message=(why.message or msg)
        if state == AppState.FAILED
        else (msg or why.message),
        num_restarts=int(cstatus.get("restartCount") or 0),
        reason=None if state in (AppState.RUNNING, AppState.SUCCEEDED) else why.reason,
    )


_POD_LIVE = frozenset({AppState.PENDING, AppState.RUNNING})


#: the message of a replica stopped because another one failed (fail-fast)
STOPPED_BY_FAILURE = "stopped: another replica failed"
#: the message of a replica stopped by ``cancel``
STOPPED_BY_CANCEL = "stopped by the cancel"


def _stopped(
    replica: ReplicaSnapshot,
    pod: JSON | None,
    *,
    deleted: bool,
    why: str = STOPPED_BY_CANCEL,
) -> ReplicaSnapshot:
    """A replica of an app that a cancel (or fail-fast: ``why``) is stopping.

    A pod still live (Pending, Running: in its grace) keeps its state, so
    that ``wait`` waits for it. A pod that ended on the stop (being deleted,
    or already deleted) or no pod at all reads CANCELLED with the exit code
    the kubelet reported; one that ended by itself keeps its state.
    """
    if pod is not None and not deleted and replica.state in _POD_LIVE:
        return replica
    if replica.state == AppState.SUCCEEDED:
        return replica
    killed = pod is None or deleted or bool(pod["metadata"].get("deletionTimestamp"))
    if replica.state == AppState.FAILED and not killed:
        return replica
    return dataclasses.replace(
        replica,
        state=AppState.CANCELLED,
        reason=StatusReason.CANCELLED,
        message=why,
    )


def _snapshot(
    app_id: str,
    jobs: list[JSON],
    decided: AppState,
    roles: dict[int, tuple[str, list[ReplicaSnapshot]]],
    pods: list[JSON],
    num_restarts: int,
) -> AppSnapshot:
    ordered = [
        (name, sorted(reps, key=lambda r: r.id))
        for name, reps in (roles[i] for i in sorted(roles))
    ]
    replicas = [r for _, reps in ordered for r in reps]
    snapshot = AppSnapshot(
        app_id,
        replicas,
        name=next((_labels(j).get(LABEL_APP_NAME, "") for j in jobs), ""),
        decided=decided,
        msg=app_failure_message(replicas)
        or "; ".join(r.message for r in replicas if r.message),
        num_restarts=num_restarts,
        roles=[
            Role(name=name, image="", num_replicas=len(reps)) for name, reps in ordered
        ],
    )
    # the pods' final status travels on another watch: a terminal app whose
    # pods still look live is not settled yet (a cancelled one is at once)
    live = any(
        (p.get("status") or {}).get("phase") in ("Pending", "Running") for p in pods
    )
    snapshot.settled = not live or snapshot.state == AppState.CANCELLED
    return snapshot


def describe_volcano(
    app_id: str, job: JSON, pods: list[JSON], deleted: Iterable[JSON] = ()
) -> AppSnapshot:
    """Describe a Volcano app from its Job and its (cached) pods.

    Roles and replicas come from the Job's task templates (role names as the
    user wrote them, not normalised). The Job's phase is the app-level
    outcome the replicas are rolled up with. ``deleted`` are the app's pods
    deleted since, as last seen: a replica whose pod the abort deleted
    reads its final status from there.
    """
    state = volcano_state(job)
    status = job.get("status") or {}
    phase = (status.get("state") or {}).get("phase")
    # Aborted: a cancel; Terminated: fail-fast (a PodFailed TerminateJob)
    # or a retry budget used up (Failed): Volcano deletes the pods still live
    stopping = phase in ("Aborted", "Terminated", "Failed")
    why = STOPPED_BY_CANCEL if state == AppState.CANCELLED else STOPPED_BY_FAILURE
    counts = status.get("taskStatusCount") or {}
    by_replica = _by_replica(pods)
    deleted_by = _by_replica(deleted)
    roles: dict[int, tuple[str, list[ReplicaSnapshot]]] = {}
    for task in (job.get("spec") or {}).get("tasks") or []:
        labels = _labels(task.get("template") or {})
        role = labels.get(LABEL_ROLE_NAME)
        if role is None:
            continue
        replica_id = labels.get(LABEL_REPLICA_ID, "0")
        phases = (counts.get(task.get("name")) or {}).get("phase") or {}
        fallback = (
            TASK_STATE.get(next(iter(phases)), AppState.UNKNOWN)
            if phases
            # no status yet (SUBMITTED) or over: the job's state
            else (AppState.PENDING if state in _LIVE_JOB else state)
        )
        newest = _newest(by_replica.get((role, replica_id), []))
        gone = newest is None and stopping
        if gone:  # deleted by the abort: its last status, if the cache saw it
            newest = _newest(deleted_by.get((role, replica_id), []))
        replica = restarting(
            _replica(int(replica_id), role, newest, fallback), job, task, newest
        )
        if stopping:
            # the abort (or fail-fast's TerminateJob) deletes the pods still
            # live (those that had failed by themselves are kept): a pod being
            # deleted, or gone with only the task count saying Failed, was
            # stopped by it
            replica = _stopped(replica, newest, deleted=gone, why=why)
        index = int(labels.get(LABEL_ROLE_INDEX, "0"))
        roles.setdefault(index, (role, []))[1].append(replica)
    retries = int(status.get("retryCount") or 0)
    return _snapshot(app_id, [job], state, roles, pods, retries)


def volcano_pods_unseen(job: JSON, pods: list[JSON], deleted: Iterable[JSON]) -> bool:
    """True when the Job's ``taskStatusCount`` counts an ended pod (Failed,
    Succeeded) of a task of which the pods at hand show no ended pod of the
    Job's current version (``status.version``; a deleted pod counts as ended).

    The Job's status and the pods travel on two watches: under load the
    Job's last status (e.g. Terminated, written once a replica failed; Failed
    once a retry failed too) can arrive before the client has seen the pod
    it counts: none yet, one still running, or only the pod of an attempt
    before the restart. Until that pod's end shows up, the replica's outcome
    and exit code are not known yet.

    Example:
        >>> job = {"status": {"taskStatusCount": {"w-1": {"phase": {"Failed": 1}}}}}
        >>> volcano_pods_unseen(job, [], [])
        True
        >>> pod = {"metadata": {"annotations": {"volcano.sh/task-spec": "w-1"}},
        ...        "status": {"phase": "Running"}}
        >>> volcano_pods_unseen(job, [pod], []), volcano_pods_unseen(job, [], [pod])
        (True, False)
    """
    status = job.get("status") or {}
    counts = status.get("taskStatusCount") or {}
    version = int(status.get("version") or 0)
    ended = {
        _task_of(pod)
        for pod in pods
        if (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded")
        and job_version(pod) >= version
    }
    ended |= {_task_of(pod) for pod in deleted if job_version(pod) >= version}
    return any(
        phase in ("Failed", "Succeeded") and int(n or 0) > 0 and str(task) not in ended
        for task, count in counts.items()
        for phase, n in ((count or {}).get("phase") or {}).items()
    )


def _task_of(pod: JSON) -> str:
    """The Volcano task ``pod`` was made for."""
    return str(((pod.get("metadata") or {}).get("annotations") or {}).get(_TASK_SPEC))


def _by_replica(pods: Iterable[JSON]) -> dict[tuple[str, str], list[JSON]]:
    found: dict[tuple[str, str], list[JSON]] = {}
    for pod in pods:
        labels = _labels(pod)
        key = (labels.get(LABEL_ROLE_NAME, ""), labels.get(LABEL_REPLICA_ID, ""))
        found.setdefault(key, []).append(pod)
    return found


def _condition(job: JSON, kind: str) -> bool:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return True
    return False


def _job_state(job: JSON, pods: list[JSON]) -> AppState:
    if (job["metadata"].get("annotations") or {}).get(ANNOTATION_CANCELLED):
        return AppState.CANCELLED
    if _condition(job, "Failed"):
        return AppState.FAILED
    if _condition(job, "Complete"):
        return AppState.SUCCEEDED
    status = job.get("status") or {}
    if any((p.get("status") or {}).get("phase") == "Running" for p in pods):
        return AppState.RUNNING
    if int(status.get("succeeded") or 0) > 0 or int(status.get("failed") or 0) > 0:
        return AppState.RUNNING
    return AppState.PENDING


def indexed_state(jobs: list[JSON], pods: Iterable[JSON] = ()) -> AppState:
    """The app state of an ``indexed`` app: cancelled, failed, done, or the least."""
    if not jobs:
        return AppState.UNKNOWN
    states = [_job_state(j, _role_pods(j, pods)) for j in jobs]
    for terminal in (AppState.CANCELLED, AppState.FAILED):
        if terminal in states:
            return terminal
    if all(s == AppState.SUCCEEDED for s in states):
        return AppState.SUCCEEDED
    if any(s in (AppState.RUNNING, AppState.SUCCEEDED) for s in states):
        return AppState.RUNNING
    return AppState.PENDING


def _role_pods(job: JSON, pods: Iterable[JSON]) -> list[JSON]:
    role = _labels(job).get(LABEL_ROLE_NAME)
    return [p for p in pods if _labels(p).get(LABEL_ROLE_NAME) == role]


def completion_index(pod: JSON) -> int | None:
    """The Indexed Job completion index of ``pod`` (annotation, then label)."""
    meta = pod.get("metadata") or {}
    value = (meta.get("annotations") or {}).get(COMPLETION_INDEX)
    if value is None:
        value = (meta.get("labels") or {}).get(COMPLETION_INDEX)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _by_index(pods: Iterable[JSON]) -> dict[int, list[JSON]]:
    found: dict[int, list[JSON]] = {}
    for pod in pods:
        index = completion_index(pod)
        if index is not None:
            found.setdefault(index, []).append(pod)
    return found


def _index_set(spec: object) -> set[int]:
    """``"0-2,4"`` (a Job's ``completedIndexes``) -> ``{0, 1, 2, 4}``."""
    out: set[int] = set()
    for part in str(spec or "").split(","):
        first, _, last = part.partition("-")
        if first.strip().isdigit():
            end = last if last.strip().isdigit() else first
            out.update(range(int(first), int(end) + 1))
    return out


def describe_indexed(
    app_id: str, jobs: list[JSON], pods: list[JSON], deleted: Iterable[JSON] = ()
) -> AppSnapshot:
    """Describe an ``indexed`` app from its role Jobs and their pods.

    ``deleted`` are the app's pods deleted since, as last seen: the final
    status of a replica whose pod a cancel (or fail-fast) deleted.
    """
    state = indexed_state(jobs, pods)
    deleted = list(deleted)
    roles: dict[int, tuple[str, list[ReplicaSnapshot]]] = {}
    restarts = 0
    for job in jobs:
        labels = _labels(job)
        role = labels.get(LABEL_ROLE_NAME, job["metadata"]["name"])
        job_state = _job_state(job, _role_pods(job, pods))
        by_index = _by_index(_role_pods(job, pods))
        deleted_by = _by_index(_role_pods(job, deleted))
        # a cancel, or fail-fast (another role's Job failed: this one is
        # suspended), stops the replicas of this Job
        # (the Job controller deletes the live pods of a Job that failed: a
        # replica killed so reads CANCELLED, the one that failed FAILED)
        stopping = job_state == AppState.CANCELLED or state == AppState.FAILED
        restarts += int((job.get("status") or {}).get("failed") or 0)
        replicas = []
        done = _index_set((job.get("status") or {}).get("completedIndexes"))
        for i in range(int((job.get("spec") or {}).get("completions") or 0)):
            if i in done:
                fallback = AppState.SUCCEEDED
            else:
                fallback = job_state if is_terminal(job_state) else AppState.PENDING
            pod = _newest(by_index.get(i, []))
            gone = pod is None and stopping
            if gone:
                pod = _newest(deleted_by.get(i, []))
            replica = _replica(i, role, pod, fallback)
            # (a Job that failed by itself with no pod left for an index:
            # the index failed, as the Job says)
            if stopping and not (pod is None and job_state == AppState.FAILED):
                why = (
                    STOPPED_BY_CANCEL
                    if job_state == AppState.CANCELLED
                    else STOPPED_BY_FAILURE
                )
                replica = _stopped(replica, pod, deleted=gone, why=why)
            replicas.append(replica)
        index = int(labels.get(LABEL_ROLE_INDEX, "0"))
        roles[index] = (role, replicas)
    return _snapshot(app_id, jobs, state, roles, pods, restarts)
