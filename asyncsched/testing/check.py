"""Run the whole contract on a backend from any runner: :func:`check_scheduler`."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Self

import anyio
import sniffio

from asyncsched.errors import AsyncschedError, InvalidArgumentError

from .cases import CASES
from .target import ContractTarget

__all__ = ("ContractFailure", "ContractReport", "MakeTarget", "check_scheduler")

MakeTarget = Callable[[], AbstractAsyncContextManager[ContractTarget]]


@dataclass
class ContractReport:
    """What :func:`check_scheduler` found, case by case (names in run order)."""

    event_loop: str
    passed: builtins.list[str] = field(default_factory=builtins.list)
    #: case name: why it does not apply (a capability not declared, ...)
    not_applicable: dict[str, str] = field(default_factory=dict)
    #: case name: what it raised
    failed: dict[str, Exception] = field(default_factory=dict)

    def __str__(self) -> str:
        counts = (
            f"{len(self.passed)} passed, {len(self.failed)} failed,"
            f" {len(self.not_applicable)} not applicable"
        )
        lines = [f"contract on {self.event_loop}: {counts}"]
        lines += [f"  FAILED {n}: {e!r}" for n, e in self.failed.items()]
        lines += [f"  not applicable {n}: {w}" for n, w in self.not_applicable.items()]
        return "\n".join(lines)


class ContractFailure(AsyncschedError, ExceptionGroup[Exception]):
    """Cases of the contract failed: one sub-exception per failed case, each
    with a note naming the case; :attr:`report` holds every outcome."""

    report: ContractReport

    def __new__(cls, report: ContractReport) -> Self:
        self = ExceptionGroup.__new__(
            cls, _summary(report), builtins.list(report.failed.values())
        )
        self.report = report
        return self

    def __init__(self, report: ContractReport) -> None:
        ExceptionGroup.__init__(
            self, _summary(report), builtins.list(report.failed.values())
        )

    def derive(self, excs: Sequence[Exception]) -> ExceptionGroup[Exception]:  # type: ignore[override]
        return ExceptionGroup(self.message, excs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.report,))


def _summary(report: ContractReport) -> str:
    return (
        f"{len(report.failed)} contract case(s) failed on {report.event_loop}:"
        f" {', '.join(report.failed)}"
    )


async def check_scheduler(
    make_target: MakeTarget,
    *,
    cases: Collection[str] | None = None,
    raise_on_failure: bool = True,
) -> ContractReport:
    """Run every contract case that applies to a backend, each on a fresh target.

    ``make_target()`` returns an async context manager (e.g. an
    ``@asynccontextmanager`` function) that opens a scheduler and yields its
    :class:`ContractTarget`; it is entered once per case and closes the
    scheduler on exit. A case applies when the scheduler declares the
    capabilities it checks; one that applies and fails, a declared capability
    the backend does not honour included, is a failure. ``cases`` picks cases
    by name. Needs no test runner: call it on each event loop the backend
    declares, e.g. ``anyio.run(check_scheduler, make, backend="trio")``.

    Raises:
        ContractFailure: (an ``ExceptionGroup``, unless ``raise_on_failure``
            is false) cases failed; it names them, each sub-exception
            carries a note naming its case, ``.report`` has every outcome.
        InvalidArgumentError: the current event loop is not among the
            backend's declared ``event_loops``, or ``cases`` names no case.

    Example:
        >>> @asynccontextmanager
        ... async def make_target():
        ...     async with InMemoryScheduler("contract") as sched:
        ...         yield ContractTarget(sched, posix_shell=False)
        >>> report = anyio.run(check_scheduler, make_target)
    """
    loop = sniffio.current_async_library()
    report = ContractReport(event_loop=loop)
    chosen = [c for c in CASES if cases is None or c.name in cases]
    if cases is not None and {c.name for c in chosen} != set(cases):
        unknown = sorted(set(cases) - {c.name for c in CASES})
        raise InvalidArgumentError(
            f"unknown contract cases {unknown}; known: {[c.name for c in CASES]}"
        )
    for case in chosen:
        async with make_target() as target:
            loops = target.scheduler.capabilities.event_loops
            if loop not in loops:
                raise InvalidArgumentError(
                    f"{type(target.scheduler).__name__} declares the event loops"
                    f" {list(loops)}, not {loop!r}: run check_scheduler on those"
                )
            why = case.not_applicable(target)
            if why:
                report.not_applicable[case.name] = why
                continue
            try:
                await case.check(target)
            except Exception as exc:  # noqa: BLE001 -- reported by case name
                exc.add_note(f"contract case: {case.name} ({loop})")
                report.failed[case.name] = exc
            else:
                report.passed.append(case.name)
        await anyio.lowlevel.checkpoint()
    if report.failed and raise_on_failure:
        raise ContractFailure(report)
    return report
