"""Volcano's admission webhooks for ``batch.volcano.sh`` Jobs, as the fake server runs them.

A cluster with Volcano installed passes every Job create (dry runs too)
through two webhooks before storing it:

* ``mutatejob.volcano.sh`` fills in defaults: ``queue`` ``default``,
  ``schedulerName`` ``volcano``, a job ``maxRetry`` of 0 (or none) becomes
  3, each task gets a name (``default<i>``), ``minAvailable`` = its
  ``replicas`` and a ``maxRetry`` of 0 becomes 3; the job's ``minAvailable``
  (0 or none) becomes the sum of the tasks';
* ``validatejob.volcano.sh`` refuses the Job with ``400`` ("admission
  webhook ... denied the request: ...") when its queue does not exist or is
  not ``Open``, a task name is no DNS-1123 label or is repeated, a task's
  ``minAvailable`` exceeds its ``replicas``, the job's exceeds all tasks'
  replicas, ``maxRetry``/``minAvailable`` are negative, a task repeats a
  policy event, or a pod template is invalid (as a pod would be).

Queues are kept here (name -> state), not as ``scheduling.volcano.sh``
objects: ``default`` is Open, as after Volcano's installation.

Example::

    webhook = server.enable_volcano_admission()
    webhook.queues["closed"] = "Closed"      # jobs in it are refused
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .admission import Causes, _check_pod_spec, check_labels
from .kinds import JSON, ApiError

__all__ = ["DEFAULT_MAX_RETRY", "VolcanoWebhook"]

#: what Volcano's mutating webhook writes for a 0 (or missing) ``maxRetry``
DEFAULT_MAX_RETRY = 3
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _denied(webhook: str, message: str) -> ApiError:
    # the API server turns a webhook's denial without a code into a 400
    return ApiError(
        400, "", f'admission webhook "{webhook}" denied the request: {message}'
    )


@dataclass
class VolcanoWebhook:
    """The mutating and validating Job webhooks; ``queues`` maps name -> state."""

    queues: dict[str, str] = field(default_factory=lambda: {"default": "Open"})
    #: Jobs admitted (after mutation), for tests
    admitted: int = 0

    def admit_job(self, job: JSON) -> JSON:
        """Mutate ``job`` (in place) then validate it; raises ApiError(400)."""
        self.mutate(job)
        self.validate(job)
        self.admitted += 1
        return job

    def mutate(self, job: JSON) -> None:
        spec = job.setdefault("spec", {})
        if not spec.get("queue"):
            spec["queue"] = "default"
        if not spec.get("schedulerName"):
            spec["schedulerName"] = "volcano"
        if not spec.get("maxRetry"):
            spec["maxRetry"] = DEFAULT_MAX_RETRY
        tasks = spec.get("tasks") or []
        for index, task in enumerate(tasks):
            if not isinstance(task, dict):
                continue
            if not task.get("name"):
                task["name"] = f"default{index}"
            if task.get("minAvailable") is None:
                task["minAvailable"] = _int(task.get("replicas"))
            if not task.get("maxRetry"):
                task["maxRetry"] = DEFAULT_MAX_RETRY
        if not spec.get("minAvailable"):
            spec["minAvailable"] = sum(
                _int(t.get("minAvailable")) for t in tasks if isinstance(t, dict)
            )

    def validate(self, job: JSON) -> None:
        spec = job.get("spec") or {}
        name = (job.get("metadata") or {}).get("name", "")
        problems: list[str] = []
        if _int(spec.get("minAvailable")) < 0:
            problems.append("job 'minAvailable' must be >= 0.")
        if _int(spec.get("maxRetry")) < 0:
            problems.append("'maxRetry' cannot be less than zero.")
        tasks = [t for t in spec.get("tasks") or [] if isinstance(t, dict)]
        if not tasks:
            problems.append("No task specified in job spec")
        total = 0
        seen: set[str] = set()
        for index, task in enumerate(tasks):
            task_name = str(task.get("name") or "")
            replicas = _int(task.get("replicas"))
            total += replicas
            if replicas < 0:
                problems.append(f"'replicas' < 0 in task: {task_name};")
            if _int(task.get("minAvailable")) > replicas:
                problems.append(
                    f"'minAvailable' is greater than 'replicas' in task: {task_name},"
                    f" job: {name};"
                )
            if len(task_name) > 63 or not _DNS_LABEL.match(task_name):
                problems.append(
                    f"[a lowercase RFC 1123 label must consist of lower case"
                    f" alphanumeric characters or '-', and must start and end with an"
                    f" alphanumeric character (e.g. 'my-name',  or '123-abc') in task"
                    f" name {task_name!r}];"
                )
            elif task_name in seen:
                problems.append(f"duplicated task name {task_name};")
            seen.add(task_name)
            events = [
                str(p.get("event"))
                for p in task.get("policies") or []
                if isinstance(p, dict) and p.get("event")
            ]
            if len(events) != len(set(events)):
                problems.append(f"duplicate event in the policies of task {task_name};")
            problems.extend(self._template_problems(task, index))
        if _int(spec.get("minAvailable")) > total:
            problems.append(
                "job 'minAvailable' should not be greater than total replicas in tasks;"
            )
        problems.extend(self._queue_problems(str(spec.get("queue") or "")))
        if problems:
            raise _denied("validatejob.volcano.sh", " ".join(problems))

    def _queue_problems(self, queue: str) -> list[str]:
        state = self.queues.get(queue)
        if state is None:
            missing = f'queues.scheduling.volcano.sh "{queue}" not found'
            return [f"unable to find job queue: {missing};"]
        if state != "Open":
            status = f"queue `{queue}` status is `{state}`"
            return [f"can only submit job to queue with state `Open`, {status};"]
        return []

    @staticmethod
    def _template_problems(task: JSON, index: int) -> list[str]:
        template: Any = task.get("template")
        if not isinstance(template, dict):
            return [f"spec.task[{index}].template: Required value;"]
        causes: Causes = []
        _check_pod_spec(
            template.get("spec"), f"spec.task[{index}].template.spec", causes
        )
        check_labels(
            (template.get("metadata") or {}).get("labels"),
            f"spec.task[{index}].template.metadata.labels",
            causes,
        )
        return [f"{path}: {message};" for path, message in causes]


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
