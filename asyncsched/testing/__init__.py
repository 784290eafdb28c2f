"""Test helpers for code built on schedulers, and for scheduler backends.

* :class:`InMemoryScheduler`: a backend whose replicas are tasks that
  interpret tiny ``echo``/``sleep``/``exit`` scripts (no processes).
* :class:`SchedulerContract` and :class:`ContractTarget`: the behaviour every
  backend must show, as a pytest suite a backend (a plugin too) runs against
  itself. They need pytest (``pip install 'asyncsched[test]'``) and are
  imported on first use, so the in-memory scheduler does not.

Example:
    >>> from asyncsched.testing import ContractTarget, SchedulerContract
    >>> class TestMyContract(SchedulerContract):
    ...     @pytest.fixture
    ...     async def target(self):
    ...         async with MyScheduler("contract") as sched:
    ...             yield ContractTarget(sched)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .inmemory import InMemoryRequest, InMemoryScheduler, create_scheduler, parse_script

if TYPE_CHECKING:
    from .contract import ContractTarget, SchedulerContract

__all__ = [
    "ContractTarget",
    "InMemoryRequest",
    "InMemoryScheduler",
    "SchedulerContract",
    "create_scheduler",
    "parse_script",
]

_CONTRACT = frozenset({"ContractTarget", "SchedulerContract"})


def __getattr__(name: str) -> Any:
    """The contract suite, imported (with pytest) on first use."""
    if name in _CONTRACT:
        from . import contract

        return getattr(contract, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
