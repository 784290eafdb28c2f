"""The request a scheduler *would* submit, returned by ``submit_dryrun``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Generic, TypeVar

from .runopts import CfgVal

if TYPE_CHECKING:
    from .app import AppDef

__all__ = ["AppDryRunInfo"]

T = TypeVar("T")


class AppDryRunInfo(Generic[T]):
    """A scheduler request plus a formatter that renders it for humans.

    ``request`` is public and may be edited before it is passed to
    ``Scheduler.schedule``; ``repr(info)`` returns ``fmt(request)``.

    Example:
        >>> info = AppDryRunInfo({"cmd": ["echo", "hi"]}, lambda r: f"run {r['cmd']}")
        >>> info
        run ['echo', 'hi']
    """

    def __init__(self, request: T, fmt: Callable[[T], str]) -> None:
        self.request = request
        self._fmt = fmt
        # Back-references filled in by Scheduler.submit_dryrun (app, resolved cfg)
        # and by the runner (scheduler name); not part of the public API.
        self._app: AppDef | None = None
        self._cfg: Mapping[str, CfgVal] | None = None
        self._scheduler: str | None = None

    def __repr__(self) -> str:
        return self._fmt(self.request)
