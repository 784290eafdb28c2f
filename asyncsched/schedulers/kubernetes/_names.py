"""Namespaces, object names and request paths, checked before any request.

An app id is ``namespace:name`` (a bare ``name`` means the scheduler's
namespace). Both parts become segments of request URLs, and the name a label
selector value, so an id like ``..:x``, ``default:x?dryRun=All`` or
``default:%2e%2e`` would otherwise send the user's token to another API path
(the HTTP client folds ``..`` and ``%2e%2e``; ``?`` starts a query). Only
what a Kubernetes object can be called passes: a namespace is a DNS-1123
label, a name a DNS-1123 subdomain (what the API server itself requires).
:func:`check_path` is the last guard, at the one place requests are sent.

Example:
    >>> split_app_id("team-a:trainer-x1")
    ('team-a', 'trainer-x1')
    >>> split_app_id("trainer-x1")
    (None, 'trainer-x1')
    >>> split_app_id("..:x")
    Traceback (most recent call last):
    ...
    asyncsched.errors.InvalidArgumentError: app id '..:x': namespace '..' is not a DNS-1123 label (at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit); Kubernetes app ids are 'namespace:name'
"""

from __future__ import annotations

import re

from asyncsched.errors import ArgumentTypeError, InvalidArgumentError

__all__ = [
    "MAX_LABEL",
    "MAX_SUBDOMAIN",
    "check_namespace",
    "check_path",
    "is_dns_label",
    "is_dns_subdomain",
    "namespace_problem",
    "split_app_id",
]

#: longest DNS-1123 label (a namespace, a Service name)
MAX_LABEL = 63
#: longest DNS-1123 subdomain (most object names: Jobs, pods)
MAX_SUBDOMAIN = 253

_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(
    r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*"
)
#: a request path segment: what API groups, versions, resources and names use
_SEGMENT = re.compile(r"[A-Za-z0-9._-]+")
_LABEL_RULE = (
    "a DNS-1123 label (at most 63 lowercase letters, digits and '-',"
    " starting and ending with a letter or digit)"
)
_SUBDOMAIN_RULE = (
    "a Kubernetes object name (a DNS-1123 subdomain: at most 253 lowercase"
    " letters, digits, '-' and '.', starting and ending with a letter or digit)"
)


def is_dns_label(value: str) -> bool:
    """A DNS-1123 label: what a namespace may be called.

    Example:
        >>> is_dns_label("team-a"), is_dns_label("Team_A"), is_dns_label("a" * 64)
        (True, False, False)
    """
    return len(value) <= MAX_LABEL and _LABEL.fullmatch(value) is not None


def is_dns_subdomain(value: str) -> bool:
    """A DNS-1123 subdomain: what a Job or a pod may be called.

    Example:
        >>> is_dns_subdomain("trainer.v2-x1"), is_dns_subdomain("a/b")
        (True, False)
    """
    return len(value) <= MAX_SUBDOMAIN and _SUBDOMAIN.fullmatch(value) is not None


def _shown(value: str) -> str:
    """``repr(value)``, cut short for an over-long value."""
    if len(value) <= 80:
        return repr(value)
    return f"{value[:60]!r}... ({len(value)} characters)"


def namespace_problem(namespace: object) -> str | None:
    """What is wrong with ``namespace`` as a namespace, or None.

    Example:
        >>> namespace_problem("default") is None
        True
    """
    if not isinstance(namespace, str):
        return f"namespace must be a str, got {type(namespace).__name__}"
    if not is_dns_label(namespace):
        return f"namespace {_shown(namespace)} is not {_LABEL_RULE}"
    return None


def check_namespace(namespace: object) -> str:
    """``namespace`` when it is a valid namespace name.

    Raises:
        InvalidArgumentError: it is not a DNS-1123 label.

    Example:
        >>> check_namespace("team-a")
        'team-a'
    """
    problem = namespace_problem(namespace)
    if problem is not None:
        raise InvalidArgumentError(problem)
    assert isinstance(namespace, str)
    return namespace


def split_app_id(app_id: object) -> tuple[str | None, str]:
    """``(namespace, name)`` of an app id; namespace None for a bare name.

    Raises:
        ArgumentTypeError: ``app_id`` is not a str.
        InvalidArgumentError: the namespace is not a DNS-1123 label, the name
            not a DNS-1123 subdomain (empty, upper case, ``/``, ``?``, ``%``,
            ``..``, non-ASCII, too long...).
    """
    if not isinstance(app_id, str):
        raise ArgumentTypeError(f"app id must be a str, got {type(app_id).__name__}")
    namespace, colon, name = app_id.rpartition(":")
    problem = namespace_problem(namespace) if colon else None
    if problem is None and not name:
        problem = "the name after ':' is empty" if colon else "the app id is empty"
    elif problem is None and not is_dns_subdomain(name):
        problem = f"name {_shown(name)} is not {_SUBDOMAIN_RULE}"
    if problem is not None:
        raise InvalidArgumentError(
            f"app id {_shown(app_id)}: {problem};"
            " Kubernetes app ids are 'namespace:name'"
        )
    return (namespace if colon else None), name


def check_path(method: str, path: str) -> None:
    """Refuse to send a request whose path is not plain segments.

    Every segment must be letters, digits, ``.``, ``_`` or ``-`` and not
    ``.`` or ``..``: nothing a client or proxy would fold, decode or read as
    a query.

    Raises:
        InvalidArgumentError: the path has another segment.

    Example:
        >>> check_path("GET", "/api/v1/namespaces/default/pods/p-0/log")
        >>> check_path("DELETE", "/api/v1/namespaces/default/services/..")
        Traceback (most recent call last):
        ...
        asyncsched.errors.InvalidArgumentError: refusing to send DELETE '/api/v1/namespaces/default/services/..': segment '..' is not a plain name
    """
    segments = path.split("/")
    if segments[0] or len(segments) < 2:
        problem = "it does not start with '/'"
    else:
        bad = [s for s in segments[1:] if s in (".", "..") or not _SEGMENT.fullmatch(s)]
        problem = f"segment {_shown(bad[0])} is not a plain name" if bad else ""
    if problem:
        raise InvalidArgumentError(
            f"refusing to send {method} {_shown(path)}: {problem}"
        )
