"""A refused create, explained from the server's ``Status`` (without I/O).

The API server answers a refused ``POST`` with a ``Status`` object: its
``reason`` (``NotFound``, ``Forbidden``, ``AlreadyExists``, ``Invalid``),
``message`` and ``details`` (``kind``/``name`` of what it means, and
``causes``). This module turns it into a :class:`~asyncsched.errors.SubmitError`
that names the real cause: a missing namespace is not a missing CRD, and a
403 may be a quota, a namespace being deleted, RBAC or an admission policy.

Example:
    >>> from asyncsched.schedulers.kubernetes._gate import KubernetesApiError
    >>> exc = KubernetesApiError("POST", "/x", 404, "NotFound", 'namespaces "t" not found')
    >>> exc.details = {"name": "t", "kind": "namespaces"}
    >>> str(create_error(exc, {"kind": "Job", "metadata": {"name": "a"}}, "t"))
    "namespace 't' does not exist (create it, or submit with -cfg namespace=<another>): namespaces \\"t\\" not found"
"""

from __future__ import annotations

from typing import Any

from asyncsched.errors import SchedulerUnavailableError, SubmitError
from asyncsched.schedulers.kubernetes._gate import BACKEND, KubernetesApiError

__all__ = ["create_error"]

RBAC_HINT = "grant the RBAC Role in docs/backends/kubernetes.md"


def create_error(
    exc: KubernetesApiError, manifest: dict[str, Any], namespace: str
) -> SubmitError | SchedulerUnavailableError:
    """The error to raise for a create the server refused with ``exc``."""
    kind = str(manifest.get("kind", "object"))
    name = str((manifest.get("metadata") or {}).get("name", ""))
    what = f"{kind} {name!r}"
    details = exc.details or {}
    causes = [c for c in details.get("causes") or [] if isinstance(c, dict)]
    if exc.status == 401:
        return SchedulerUnavailableError(
            BACKEND,
            f"the API server did not accept the credentials: {exc.message}",
            "check the kubeconfig's user (token or certificate)",
        )
    if exc.status == 404 and details.get("kind") == "namespaces":
        missing = details.get("name") or namespace
        return SubmitError(
            f"namespace {missing!r} does not exist (create it, or submit with"
            f" -cfg namespace=<another>): {exc.message}"
        )
    if exc.status == 404 and _is_volcano(manifest):
        return SubmitError(
            "the server does not serve batch.volcano.sh/v1alpha1 Jobs:"
            f" install Volcano, or use -cfg job_api=indexed ({exc.message})"
        )
    if exc.status == 403:
        return SubmitError(_forbidden(exc, what, namespace, causes))
    if exc.status == 409:  # AlreadyExists (a create cannot conflict otherwise)
        return SubmitError(
            f"{what} already exists in namespace {namespace!r}"
            f" (the name is taken; dry-run again for a new one): {exc.message}"
        )
    if exc.status == 422:
        fields = "; ".join(
            f"{c.get('field')}: {c.get('message')}" for c in causes if c.get("field")
        )
        return SubmitError(
            f"the server found {what} invalid"
            + (f" ({fields})" if fields else "")
            + f": {exc.message}"
        )
    return SubmitError(
        f"the server rejected {what} ({exc.status} {exc.reason}): {exc.message}"
    )


def _forbidden(
    exc: KubernetesApiError, what: str, namespace: str, causes: list[dict[str, Any]]
) -> str:
    message = exc.message
    if "exceeded quota" in message:
        return f"{what} exceeds a ResourceQuota of namespace {namespace!r}: {message}"
    if any(c.get("reason") == "NamespaceTerminating" for c in causes) or (
        "being terminated" in message
    ):
        return f"namespace {namespace!r} is being deleted: {message}"
    if "cannot create resource" in message:
        return (
            f"RBAC does not allow creating {what} in namespace {namespace!r}"
            f" ({RBAC_HINT}): {message}"
        )
    return f"{what} is forbidden by the server's policy (admission): {message}"


def _is_volcano(manifest: dict[str, Any]) -> bool:
    return str(manifest.get("apiVersion", "")).startswith("batch.volcano.sh/")
