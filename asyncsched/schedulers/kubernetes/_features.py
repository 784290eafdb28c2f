"""What the API server can do, checked before an app relies on it.

A Kubernetes API server drops the fields it does not know without an error
(no strict field validation before 1.25): a 1.20 server accepts an
``Indexed`` Job and creates a plain one, whose pods carry no completion
index -- an ``indexed`` app would run every replica as rank 0 and show no
logs. Indexed Jobs came with Kubernetes 1.21 (behind the ``IndexedJob``
feature gate until 1.22), so:

* :func:`check_indexed_jobs` refuses them before anything is created when
  the server's ``/version`` is older than 1.21 (asked once per connection);
* :func:`dropped_completion_mode` catches a newer server with the gate off,
  from the answer to the create (the caller then deletes what it made);
* :func:`job_api_version` (the same cached answer) decides which optional
  Job fields (``podFailurePolicy``, ``backoffLimitPerIndex``) are sent, and
  whether creates ask for strict field validation (``_field_validation``).

Example:
    >>> dropped_completion_mode(
    ...     {"apiVersion": "batch/v1", "kind": "Job", "spec": {"completionMode": "Indexed"}},
    ...     {"apiVersion": "batch/v1", "kind": "Job", "spec": {}},
    ... )
    True
"""

from __future__ import annotations

import re
import weakref

from asyncsched.errors import InvalidRunConfigException
from asyncsched.schedulers.kubernetes._client import KubeApi
from asyncsched.schedulers.kubernetes._gate import KubernetesApiError
from asyncsched.schedulers.kubernetes._json import JSON

__all__ = [
    "check_indexed_jobs",
    "dropped_completion_mode",
    "is_indexed_job",
    "no_indexed_jobs",
    "job_api_version",
    "server_version",
]


#: what each connection's server answered on /version (asked once)
_VERSIONS: weakref.WeakKeyDictionary[KubeApi, tuple[str, tuple[int, int] | None]] = (
    weakref.WeakKeyDictionary()
)


def is_indexed_job(manifest: JSON) -> bool:
    """A batch/v1 Job asking for ``completionMode: Indexed``."""
    return (
        manifest.get("apiVersion") == "batch/v1"
        and manifest.get("kind") == "Job"
        and (manifest.get("spec") or {}).get("completionMode") == "Indexed"
    )


def dropped_completion_mode(manifest: JSON, created: JSON) -> bool:
    """The server stored an Indexed Job without its ``completionMode``."""
    return is_indexed_job(manifest) and not is_indexed_job(created)


def no_indexed_jobs(version: str) -> InvalidRunConfigException:
    """The error for a server (``version``) without Indexed Jobs.

    A run option the server cannot honour (the CLI exits 2 on it).
    """
    return InvalidRunConfigException(
        f"job_api=indexed needs Indexed Jobs (Kubernetes >= 1.21 with the IndexedJob"
        f" feature gate, on by default from 1.22): this API server ({version}) drops"
        " spec.completionMode, so the pods would get no completion index."
        " Use job_api=volcano (with Volcano installed) or a newer cluster",
        "job_api",
        "indexed",
    )


async def server_version(api: KubeApi) -> tuple[str, tuple[int, int] | None]:
    """The server's ``gitVersion`` and (major, minor), None when unknown."""
    try:
        # (map_denied=False: a 401/403 here is left to the request that follows)
        info = await api.request("GET", "/version", map_denied=False)
    except KubernetesApiError:
        return "unknown version", None
    info = info or {}
    major = re.match(r"\d+", str(info.get("major") or ""))
    minor = re.match(r"\d+", str(info.get("minor") or ""))
    git = str(info.get("gitVersion") or "unknown version")
    if major is None or minor is None:
        return git, None
    return git, (int(major.group()), int(minor.group()))


async def check_indexed_jobs(api: KubeApi) -> None:
    """Refuse Indexed Jobs on a server older than Kubernetes 1.21.

    A server whose version cannot be read is given the benefit of the doubt
    (:func:`dropped_completion_mode` still catches it after the create).

    Raises:
        InvalidRunConfigException: the server is older than 1.21; the message
            names its version.
    """
    git, version = await _cached_version(api)
    if version is not None and version < (1, 21):
        raise no_indexed_jobs(git)


async def job_api_version(api: KubeApi) -> tuple[int, int] | None:
    """The server's (major, minor), asked once per connection; None when unknown.

    Decides which optional batch/v1 Job fields an Indexed Job may carry
    (see ``_render.fit_to_server``).
    """
    return (await _cached_version(api))[1]


async def _cached_version(api: KubeApi) -> tuple[str, tuple[int, int] | None]:
    """``server_version``, kept once known (an unreadable answer is asked again)."""
    known = _VERSIONS.get(api)
    if known is not None:
        return known
    answer = await server_version(api)
    if answer[1] is not None:
        _VERSIONS[api] = answer
    return answer
