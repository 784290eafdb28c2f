"""The arguments of a log read, as a caller gives them, declared once.

``Scheduler.log_iter(app_id, ...)`` and ``Runner.log_lines(app_handle, ...)``
take the same arguments after the app (TorchX's names and order):
:class:`LogRequest` holds them, and :func:`takes_log_request` gives a method
written against a ``LogRequest`` that public signature.

Example:
    >>> class Logs:
    ...     @takes_log_request
    ...     def read(self, app: str, request: LogRequest) -> str:
    ...         return f"{app}/{request.role_name}/{request.k} tail={request.should_tail}"
    >>> Logs().read("demo", "trainer", 1, should_tail=True)
    'demo/trainer/1 tail=True'
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Concatenate, ParamSpec, TypeVar

from asyncsched.schedulers.capabilities import Stream

__all__ = ("LogRequest", "takes_log_request")

_P = ParamSpec("_P")
_S = TypeVar("_S")
_R = TypeVar("_R")


@dataclass(frozen=True)
class LogRequest:
    """Which log lines to read, as given (checked by ``Scheduler.log_iter``).

    Args:
        role_name: The role whose replica to read.
        k: The replica's index within the role.
        regex: Only lines matching this regular expression.
        since: Only lines at or after this time: a datetime (naive is UTC)
            or epoch seconds.
        until: Only lines before this time (same forms as ``since``).
        should_tail: Follow the log until the app is terminal and its log
            drained, instead of stopping at what exists now.
        streams: ``stdout``, ``stderr`` or ``combined``; None: the
            combined stream where the backend serves it.
    """

    role_name: str
    k: int = 0
    regex: str | None = None
    since: datetime | float | None = None
    until: datetime | float | None = None
    should_tail: bool = False
    streams: Stream | str | None = None

    def keywords(self) -> dict[str, Any]:
        """The request as keyword arguments (for another method taking it)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _with_arguments_of(
    spec: Callable[_P, LogRequest],
) -> Callable[
    [Callable[[_S, str, LogRequest], _R]], Callable[Concatenate[_S, str, _P], _R]
]:
    def decorate(
        method: Callable[[_S, str, LogRequest], _R],
    ) -> Callable[Concatenate[_S, str, _P], _R]:
        own = list(inspect.signature(method).parameters.values())[:2]
        given = inspect.signature(spec).parameters.values()
        signature = inspect.signature(method).replace(parameters=[*own, *given])
        app = own[1].name
        make: Callable[..., LogRequest] = spec

        @functools.wraps(method)
        def call(*args: Any, **kwargs: Any) -> _R:
            bound = signature.bind(*args, **kwargs).arguments
            self, where = bound.pop(own[0].name), bound.pop(app)
            return method(self, where, make(**bound))

        call.__signature__ = signature  # type: ignore[attr-defined]
        return call

    return decorate


takes_log_request = _with_arguments_of(LogRequest)
"""Decorate ``method(self, app, request: LogRequest)``: it is called as
``method(self, app, role_name, k=0, regex=None, since=None, until=None,
should_tail=False, streams=None)``."""
