"""Test helpers for code built on schedulers, and for scheduler backends.

* :class:`InMemoryScheduler`: a backend whose replicas are tasks that
  interpret tiny ``echo``/``sleep``/``exit`` scripts (no processes).
* :func:`wait_for_state`: wait until an app reaches a state, woken by the
  scheduler's change signal (no fixed-interval polling).
* :func:`check_scheduler` and :class:`ContractTarget`: the behaviour every
  backend must show, run from any runner (``anyio.run``, no pytest needed);
  :class:`SchedulerContract` runs the same cases as a pytest suite. It needs
  pytest (``pip install 'asyncsched[test]'``) and is imported on first use.

Example:
    >>> from asyncsched.testing import ContractTarget, check_scheduler
    >>> @asynccontextmanager
    ... async def make_target():
    ...     async with MyScheduler("contract") as sched:
    ...         yield ContractTarget(sched)
    >>> anyio.run(check_scheduler, make_target)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .check import ContractFailure, ContractReport, check_scheduler
from .inmemory import InMemoryRequest, InMemoryScheduler, create_scheduler, parse_script
from .target import ContractTarget
from .waiting import StateTimeoutError, wait_for_state

if TYPE_CHECKING:
    from .contract import SchedulerContract

__all__ = (
    "ContractFailure",
    "ContractReport",
    "ContractTarget",
    "InMemoryRequest",
    "InMemoryScheduler",
    "SchedulerContract",
    "StateTimeoutError",
    "check_scheduler",
    "create_scheduler",
    "parse_script",
    "wait_for_state",
)


def __getattr__(name: str) -> Any:
    """The pytest suite, imported (with pytest) on first use."""
    if name == "SchedulerContract":
        from .contract import SchedulerContract

        return SchedulerContract
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
