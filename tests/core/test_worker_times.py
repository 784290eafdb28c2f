"""The per-worker time summary of an xdist run (tests/worker_times.py)."""

from __future__ import annotations

import doctest

from tests import worker_times
from tests.worker_times import WorkerTimes


def test_each_worker_gets_its_end_and_its_time_per_engine_group() -> None:
    clock = iter([10.0, 12.0, 40.0]).__next__
    times = WorkerTimes(clock=clock)
    times.add("gw1", "tests/local/test_x.py::test_y", 2.0)
    times.add("gw0", "tests/kubernetes/t.py::test_z[real]", 25.0)
    times.add("gw0", "tests/kubernetes/t.py::test_z[real]", 1.0)  # its teardown
    assert times.lines() == [
        "gw0: last test ended at 30 s; kubernetes 26 s (1 tests)",
        "gw1: last test ended at 0 s; other 2 s (1 tests)",
    ]


def test_the_module_example_holds() -> None:
    assert doctest.testmod(worker_times).failed == 0
