"""Unknown fields are refused, not silently dropped; server warnings are shown.

An API server drops the fields of a manifest it does not know. From
Kubernetes 1.25 (server-side field validation, beta and on by default) a
create can ask for ``fieldValidation=Strict``: the server then refuses the
object with a 400 naming the unknown fields (a typo in a pod overlay, a field
of a newer Kubernetes). :func:`create_query` adds it when the server's
``/version`` (read once per connection) is 1.25 or newer; an older server
(1.20 has neither strict validation nor unknown-field warnings) is sent no
such parameter.

Whatever the version, the ``Warning`` headers a server attaches to an answer
(RFC 7234 ``299 - "text"``: unknown fields under the default ``Warn`` mode,
deprecated APIs, Pod Security) become Python warnings of class
:class:`~asyncsched.errors.ServerWarning` (:func:`report_warnings`), as
kubectl prints them.

Example:
    >>> parse_warnings(['299 - "unknown field \\\\"spec.foo\\\\""'])
    ['unknown field "spec.foo"']
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING

from asyncsched.errors import ServerWarning

if TYPE_CHECKING:
    from asyncsched.schedulers.kubernetes._client import KubeApi

__all__ = [
    "STRICT_SINCE",
    "create_query",
    "parse_warnings",
    "report_warnings",
    "strict_validation",
]

#: the first Kubernetes version with server-side field validation on by default
STRICT_SINCE = (1, 25)

_WARNING = re.compile(r'\s*(\d{3})\s+(\S+)\s+"((?:[^"\\]|\\.)*)"')


async def strict_validation(api: KubeApi) -> bool:
    """Whether the server honours ``fieldValidation=Strict`` (>= 1.25).

    A server whose version cannot be read is sent no such parameter.
    """
    # (imported here: _features imports the client, which imports this module)
    from asyncsched.schedulers.kubernetes._features import job_api_version

    version = await job_api_version(api)
    return version is not None and version >= STRICT_SINCE


async def create_query(api: KubeApi) -> dict[str, object]:
    """The query parameters of a create: ``fieldValidation=Strict`` if supported."""
    return {"fieldValidation": "Strict"} if await strict_validation(api) else {}


def parse_warnings(headers: Iterable[str]) -> list[str]:
    """The texts of ``Warning`` header values (``299 - "text"``; several per value)."""
    texts: list[str] = []
    for value in headers:
        pos = 0
        while (match := _WARNING.match(value, pos)) is not None:
            texts.append(re.sub(r"\\(.)", r"\1", match.group(3)))
            pos = match.end()
            comma = value.find(",", pos)
            if comma < 0:
                break
            pos = comma + 1
        if pos == 0 and value.strip():
            texts.append(value.strip())  # not in the RFC's form: show it as is
    return texts


def report_warnings(headers: Iterable[str], method: str, path: str) -> None:
    """Issue one :class:`ServerWarning` per ``Warning`` header text."""
    for text in parse_warnings(headers):
        warnings.warn(
            ServerWarning(f"the API server warned about {method} {path}: {text}"),
            stacklevel=2,
        )
