"""What every contract case is built from: :class:`Case`, the registry
:data:`CASES` and the helpers cases share (the cases themselves are in the
``_cases_*`` modules, registered by importing :mod:`asyncsched.testing.cases`)."""

from __future__ import annotations

import builtins
import re
from collections.abc import Awaitable, Callable, Iterator
from contextlib import aclosing, contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel

from asyncsched.errors import (
    AsyncschedError,
)
from asyncsched.schedulers.api import Capabilities, DescribeAppResponse, Stream
from asyncsched.specs import (
    AppState,
    is_terminal,
)

from .target import ContractTarget
from .waiting import wait_for_state

__all__ = ("CASES", "CLOSED_WAIT_ENDS_WITHIN", "Case", "CaseFn", "ContractViolation")

CaseFn = Callable[[ContractTarget], Awaitable[None]]

#: seconds a ``wait`` pending when its scheduler closes may take to end
#: once ``aclose`` returned
CLOSED_WAIT_ENDS_WITHIN = 5.0


class ContractViolation(AsyncschedError, AssertionError):
    """A case found behaviour the contract rules out."""


@dataclass(frozen=True)
class Case:
    """One behaviour of the contract.

    ``needs`` are the :class:`Capabilities` fields that must be declared
    (true, or non-empty) for the case to apply; ``needs_stderr`` asks for
    ``Stream.STDERR`` among ``log_streams``; ``posix_shell`` for replicas
    that run a POSIX shell (a :class:`ContractTarget` attribute).
    """

    name: str
    check: CaseFn
    needs: tuple[str, ...] = ()
    needs_stderr: bool = False
    posix_shell: bool = False
    doc: str = field(default="", compare=False)

    def applies_to(self, caps: Capabilities) -> bool:
        """Whether the declared capabilities ``caps`` make this case apply."""
        return self.missing(caps) == ""

    def missing(self, caps: Capabilities) -> str:
        """What the case needs that ``caps`` does not declare ("" if nothing)."""
        lacking = [need for need in self.needs if not getattr(caps, need)]
        if self.needs_stderr and Stream.STDERR not in caps.log_streams:
            lacking.append("log_streams with stderr")
        return ", ".join(lacking)

    def not_applicable(self, target: ContractTarget) -> str:
        """Why the case does not apply to ``target`` ("" when it does)."""
        lacking = self.missing(target.scheduler.capabilities)
        if lacking:
            return f"the scheduler does not declare {lacking}"
        if self.posix_shell and not target.posix_shell:
            return "replicas do not run a POSIX shell"
        return ""


CASES: builtins.list[Case] = []


def _case(
    *needs: str, needs_stderr: bool = False, posix_shell: bool = False
) -> Callable[[CaseFn], CaseFn]:
    def register(fn: CaseFn) -> CaseFn:
        doc = (fn.__doc__ or "").strip()
        name = fn.__name__.lstrip("_")
        CASES.append(Case(name, fn, needs, needs_stderr, posix_shell, doc))
        return fn

    return register


@contextmanager
def _raises(kind: type[BaseException], match: str = "") -> Iterator[list[Any]]:
    """Assert the block raises ``kind`` (its text matching ``match``); the
    exception is left in the yielded list."""
    caught: list[Any] = []
    try:
        yield caught
    except kind as exc:
        if match and not re.search(match, str(exc)):
            raise ContractViolation(f"{exc!r} does not match {match!r}") from exc
        caught.append(exc)
    else:
        raise ContractViolation(f"{kind.__name__} not raised")


async def _lines(
    target: ContractTarget, app_id: str, role: str = "worker", **kwargs: Any
) -> builtins.list[str]:
    lines = target.scheduler.log_iter(app_id, role, **kwargs)
    async with aclosing(lines):
        return [line async for line in lines]


async def _final(target: ContractTarget, app_id: str) -> DescribeAppResponse:
    desc = await target.scheduler.wait(app_id, timeout=target.quick_timeout)
    assert desc is not None, f"wait({app_id!r}) returned None for a submitted app"
    return desc


async def _wait_running(target: ContractTarget, app_id: str, replicas: int) -> None:
    """Wait until each replica of the app's one role runs and, where the
    backend can tail logs, has printed ``started``."""
    sched = target.scheduler
    caps = sched.capabilities
    for k in range(replicas):

        def running(desc: DescribeAppResponse, k: int = k) -> bool:
            assert not is_terminal(desc.state), desc
            if not caps.per_replica_status:
                return desc.state == AppState.RUNNING
            states = {r.id: r.state for r in desc.roles_statuses[0].replicas}
            return states.get(k) == AppState.RUNNING

        await wait_for_state(sched, app_id, running, target.quick_timeout)
        if caps.logs and caps.log_tail:
            with anyio.fail_after(target.quick_timeout):
                lines = sched.log_iter(app_id, "worker", k=k, should_tail=True)
                async with aclosing(lines):
                    async for line in lines:
                        if line == "started\n":
                            break
                    else:
                        raise ContractViolation(f"replica {k} ended before it started")


async def _cancel_if_declared(target: ContractTarget, app_id: str) -> None:
    if target.scheduler.capabilities.cancel:
        await target.scheduler.cancel(app_id)
