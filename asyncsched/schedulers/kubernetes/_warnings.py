"""The API server's ``Warning`` headers, shown as Python warnings.

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

from asyncsched.errors import ServerWarning

__all__ = ("parse_warnings", "report_warnings")

_WARNING = re.compile(r'\s*(\d{3})\s+(\S+)\s+"((?:[^"\\]|\\.)*)"')


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
