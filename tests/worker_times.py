"""Where the time of a pytest-xdist run went: per worker, per engine group.

Registered by ``tests/conftest.py`` in the xdist controller. At the end of
the run it prints, for each worker, when it ran its last test (seconds from
the first report) and the time of its tests (setup, call and teardown) per
group of :mod:`tests.engine_groups` (``other``: the tests of no engine)::

    =========================== time per xdist worker ===========================
    gw0: last test ended at 512 s; kubernetes 431 s (101 tests), other 64 s (230)
    gw1: last test ended at 498 s; slurm 402 s (590 tests), other 81 s (300)

The worker whose last test ends last bounds the run: what to split or speed
up first.

Example:
    >>> times = WorkerTimes(clock=iter([0.0, 5.0]).__next__)
    >>> times.add("gw0", "tests/slurm/test_logs.py::test_tail[jobcomp]", 3.0)
    >>> times.add("gw0", "tests/local/test_x.py::test_y", 1.5)
    >>> times.lines()
    ['gw0: last test ended at 5 s; slurm 3 s (1 tests), other 2 s (1)']
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest

from .engine_groups import engine_group

__all__ = ("WorkerTimes",)


class WorkerTimes:
    """Test time per worker and engine group, and when each worker last reported."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._start: float | None = None
        self._seconds: dict[str, dict[str, float]] = defaultdict(
            lambda: defaultdict(float)
        )
        self._tests: dict[str, dict[str, set[str]]] = defaultdict(
            lambda: defaultdict(set)
        )
        self._last: dict[str, float] = {}

    def add(self, worker: str, nodeid: str, seconds: float) -> None:
        """Count ``seconds`` of the test ``nodeid`` (one phase) for ``worker``."""
        now = self._clock()
        if self._start is None:
            self._start = now
        group = engine_group(nodeid) or "other"
        self._seconds[worker][group] += seconds
        self._tests[worker][group].add(nodeid)
        self._last[worker] = now - self._start

    def lines(self) -> list[str]:
        """One line per worker, the engine groups first, longest first."""
        out: list[str] = []
        for worker in sorted(self._seconds):
            groups = sorted(
                self._seconds[worker].items(),
                key=lambda item: (item[0] == "other", -item[1]),
            )
            parts: list[str] = []
            for group, seconds in groups:
                count = len(self._tests[worker][group])
                unit = f"({count})" if parts else f"({count} tests)"
                parts.append(f"{group} {seconds:.0f} s {unit}")
            ended = self._last[worker]
            out.append(
                f"{worker}: last test ended at {ended:.0f} s; {', '.join(parts)}"
            )
        return out

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node: Any = getattr(report, "node", None)  # set by xdist's controller
        if node is not None:
            self.add(node.gateway.id, report.nodeid, report.duration)

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self._seconds:
            terminalreporter.section("time per xdist worker")
            for line in self.lines():
                terminalreporter.write_line(line)
