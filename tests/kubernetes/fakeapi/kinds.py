"""The resource kinds the fake API server serves, and the Status errors it answers.

A :class:`Kind` carries what differs between built-in resources and custom
resources on a real server: the URL segments, the default deletion
propagation, whether DELETE answers the object or a ``Status``, whether
strategic merge patch and unconditional updates are accepted.

Example::

    kind = KINDS[("batch.volcano.sh", "v1alpha1", "jobs")]
    kind.resource  # "jobs.batch.volcano.sh", as in the server's messages
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]


@dataclass(frozen=True)
class Kind:
    """One served resource type (group/version/plural)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    custom: bool = False
    delete_returns_object: bool = False
    default_propagation: str = "Background"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def resource(self) -> str:
        """``plural.group`` as the real server spells it in messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.group, self.version, self.plural)

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"


_ALL = [
    Kind("", "v1", "namespaces", "Namespace", namespaced=False),
    Kind("", "v1", "pods", "Pod", delete_returns_object=True),
    Kind("", "v1", "services", "Service", delete_returns_object=True),
    # batch/v1 Jobs: a DELETE without propagationPolicy orphans the pods.
    Kind("batch", "v1", "jobs", "Job", default_propagation="Orphan"),
    Kind(
        "batch.volcano.sh",
        "v1alpha1",
        "jobs",
        "Job",
        custom=True,
        delete_returns_object=True,
    ),
]
KINDS: dict[tuple[str, str, str], Kind] = {k.key: k for k in _ALL}


@dataclass
class ApiError(Exception):
    """An error answered as a ``kind: Status`` body with the given HTTP code."""

    code: int
    reason: str
    message: str
    details: JSON = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"

    def status(self) -> JSON:
        body: JSON = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def _details(kind: Kind, name: str) -> JSON:
    details: JSON = {"name": name}
    if kind.group:
        details["group"] = kind.group
    details["kind"] = kind.plural
    return details


def not_found(kind: Kind, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'{kind.resource} "{name}" not found', _details(kind, name)
    )


def already_exists(kind: Kind, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{kind.resource} "{name}" already exists',
        _details(kind, name),
    )


def conflict(kind: Kind, name: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {kind.resource} "{name}": the object '
        "has been modified; please apply your changes to the latest version "
        "and try again",
        _details(kind, name),
    )


_CAUSE_REASONS = {
    "Required value": "FieldValueRequired",
    "Unsupported value": "FieldValueNotSupported",
    "Forbidden": "FieldValueForbidden",
    "Duplicate value": "FieldValueDuplicate",
}


def invalid(kind: Kind, name: str, causes: list[tuple[str, str]]) -> ApiError:
    """422 Invalid; ``causes`` are ``(field, message)`` pairs.

    The message reads like the real one: ``Job.batch "x" is invalid:
    spec.completions: Required value`` (several causes in brackets).
    """
    parts = [f"{f}: {m}" for f, m in causes]
    text = parts[0] if len(parts) == 1 else f"[{', '.join(parts)}]"
    details = _details(kind, name)
    details["kind"] = kind.kind
    details["causes"] = [
        {
            "reason": next(
                (r for p, r in _CAUSE_REASONS.items() if m.startswith(p)),
                "FieldValueInvalid",
            ),
            "message": m,
            "field": f,
        }
        for f, m in causes
    ]
    qualified = f"{kind.kind}.{kind.group}" if kind.group else kind.kind
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {text}', details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)
