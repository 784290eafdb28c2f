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

    ``request`` may be edited before it is passed to ``Scheduler.schedule``;
    ``repr(info)`` returns ``fmt(request)``.

    Example:
        >>> info = AppDryRunInfo({"cmd": ["echo", "hi"]}, lambda r: f"run {r['cmd']}")
        >>> info
        run ['echo', 'hi']

    Attributes:
        request: The backend request.
        app: The AppDef the request was made from (the scheduler's copy), set
            by ``Scheduler.submit_dryrun``.
        cfg: The resolved run config, set by ``Scheduler.submit_dryrun``.
        scheduler: The scheduler name, set by the runner.
    """

    def __init__(self, request: T, fmt: Callable[[T], str]) -> None:
        self.request = request
        self._fmt = fmt
        self.app: AppDef | None = None
        self.cfg: Mapping[str, CfgVal] | None = None
        self.scheduler: str | None = None

    # TorchX's names for the three back-references, for code written against it
    @property
    def _app(self) -> AppDef | None:
        return self.app

    @property
    def _cfg(self) -> Mapping[str, CfgVal] | None:
        return self.cfg

    @property
    def _scheduler(self) -> str | None:
        return self.scheduler

    def __repr__(self) -> str:
        return self._fmt(self.request)
