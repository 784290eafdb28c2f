"""The names and labels of what the manifests create, without I/O.

A job (app) name, its pods' hostnames and its role parts must be DNS labels
(at most 63 characters, ``[a-z0-9-]``); label values have their own
alphabet. Long names are cut with a hash of the whole (two long names stay
different); the labels below select and describe an app's objects.

Example:
    >>> job_name("Trainer_App", "bq4fz7dkm2pwhs")
    'trainerapp-bq4fz7dkm2pwhs'
    >>> sanitize_label_value("+foo+bar/")
    'foo.bar'
"""

from __future__ import annotations

import hashlib
import re

from asyncsched.errors import SpecError
from asyncsched.schedulers.shared.labels import (
    LABEL_APP_ID,
    LABEL_APP_NAME,
    LABEL_PREFIX,
    LABEL_REPLICA_ID,
    LABEL_ROLE_INDEX,
    LABEL_ROLE_NAME,
    LABEL_SESSION,
    LABEL_VERSION,
)
from asyncsched.specs import AppDef

__all__ = (
    "ANNOTATION_CANCELLED",
    "COMPLETION_INDEX",
    "LABEL_APP_ID",
    "LABEL_APP_NAME",
    "LABEL_INSTANCE",
    "LABEL_MANAGED_BY",
    "LABEL_NAME",
    "LABEL_REPLICA_ID",
    "LABEL_ROLE_INDEX",
    "LABEL_ROLE_NAME",
    "LABEL_SESSION",
    "LABEL_VERSION",
    "MANAGED_BY",
    "MAX_NAME",
    "MAX_TASK",
    "job_name",
    "normalize_str",
    "role_parts",
    "sanitize_label_value",
    "shorten",
)

LABEL_NAME = "app.kubernetes.io/name"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "asyncsched"
#: set (with ``spec.suspend``) on the Jobs of a cancelled ``indexed`` app
ANNOTATION_CANCELLED = LABEL_PREFIX + "cancelled"
#: the annotation/label the Job controller puts the completion index in
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
#: a DNS label (pod hostname, Service name, label value) is at most 63 characters
MAX_NAME = 63
#: a task (role-replica) name is capped at this, leaving room for the job
MAX_TASK = 30
_SUFFIX_HASH = 8
_NOT_NAME = re.compile(r"[^a-z0-9-]")
_NOT_LABEL = re.compile(r"[^A-Za-z0-9._-]")
_EDGE_JUNK = re.compile(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$")


def normalize_str(text: str) -> str:
    """TorchX's name rule: drop one leading ``-``, lower-case, keep ``[a-z0-9-]``.

    Example:
        >>> normalize_str("Trainer_Foo")
        'trainerfoo'
    """
    return _NOT_NAME.sub("", text.removeprefix("-").lower())


def shorten(name: str, limit: int) -> str:
    """``name`` if it fits in ``limit``, else a prefix plus a hash of all of it.

    Deterministic, and two different long names stay different.

    Example:
        >>> shorten("a" * 40, 20)
        'aaaaaaaaaaa-e33cdf9c'
    """
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:_SUFFIX_HASH]
    head = name[: max(limit - _SUFFIX_HASH - 1, 0)].rstrip("-")
    return f"{head}-{digest}" if head else digest[:limit]


def sanitize_label_value(value: str) -> str:
    """A valid label value: ``[A-Za-z0-9._-]``, alphanumeric ends, <= 63 chars.

    Example:
        >>> sanitize_label_value("+foo+bar/")
        'foo.bar'
    """
    cleaned = _EDGE_JUNK.sub("", _NOT_LABEL.sub(".", value))
    return _EDGE_JUNK.sub("", cleaned[:MAX_NAME])


def job_name(app_name: str, suffix: str, longest_task: int = MAX_TASK) -> str:
    """The job (app) name: ``normalize(app_name)-suffix`` fitting pod names.

    The name starts with a letter (it also names a Service) and leaves room
    for ``-{task}-0`` within 63 characters.

    Example:
        >>> job_name("Trainer_App", "bq4fz7dkm2pwhs")
        'trainerapp-bq4fz7dkm2pwhs'
    """
    base = normalize_str(app_name).strip("-")
    if not base or not base[0].isalpha():
        base = f"app-{base}".rstrip("-")
    budget = MAX_NAME - len("--0") - longest_task - len(suffix) - 1
    return f"{shorten(base, max(budget, 1)).rstrip('-')}-{suffix}"


def role_parts(app: AppDef, limit: int, suffix_width: int = 0) -> list[str]:
    """Normalised role names, unique, each at most ``limit - suffix_width`` long."""
    seen: dict[str, str] = {}
    parts = []
    for index, role in enumerate(app.roles):
        base = normalize_str(role.name).strip("-")
        if not base:
            raise SpecError(
                f"roles[{index}].name",
                f"{role.name!r} has no character Kubernetes allows in a name"
                " (a-z, 0-9, -)",
            )
        if base in seen:
            raise SpecError(
                f"roles[{index}].name",
                f"{role.name!r} and {seen[base]!r} give the same Kubernetes name"
                f" {base!r}; rename one",
            )
        seen[base] = role.name
        width = suffix_width or len(str(role.num_replicas - 1)) + 1
        parts.append(shorten(base, max(limit - width, 1)))
    return parts
