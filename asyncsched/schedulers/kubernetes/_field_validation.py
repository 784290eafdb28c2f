"""Unknown fields are refused, not silently dropped.

An API server drops the fields of a manifest it does not know. From
Kubernetes 1.25 (server-side field validation, beta and on by default) a
create can ask for ``fieldValidation=Strict``: the server then refuses the
object with a 400 naming the unknown fields (a typo in a pod overlay, a field
of a newer Kubernetes). :func:`create_query` adds it when the server's
``/version`` (read once per connection) is 1.25 or newer; an older server
(1.20 has neither strict validation nor unknown-field warnings) is sent no
such parameter. The fields a server dropped anyway come back as ``Warning``
headers (:mod:`._warnings`).

Example:
    >>> STRICT_SINCE
    (1, 25)
"""

from __future__ import annotations

from asyncsched.schedulers.kubernetes._client import KubeApi
from asyncsched.schedulers.kubernetes._features import job_api_version

__all__ = ("STRICT_SINCE", "create_query", "strict_validation")

#: the first Kubernetes version with server-side field validation on by default
STRICT_SINCE = (1, 25)


async def strict_validation(api: KubeApi) -> bool:
    """Whether the server honours ``fieldValidation=Strict`` (>= 1.25).

    A server whose version cannot be read is sent no such parameter.
    """
    version = await job_api_version(api)
    return version is not None and version >= STRICT_SINCE


async def create_query(api: KubeApi) -> dict[str, object]:
    """The query parameters of a create: ``fieldValidation=Strict`` if supported."""
    return {"fieldValidation": "Strict"} if await strict_validation(api) else {}
