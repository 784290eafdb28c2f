"""SchedulerContract subclasses are collected on the event loops they name only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

MODULE = """
import pytest
from asyncsched.testing import SchedulerContract

@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request):
    return request.param

class TestAsyncioOnly(SchedulerContract):
    event_loops = ("asyncio",)

class TestBoth(SchedulerContract):
    event_loops = ("asyncio", "trio")

class TestFixtureLoops(SchedulerContract):
    pass
"""

ARGS = ("--collect-only", "test_cases.py")


def _collected(tmp_path: Path) -> list[str]:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_cases.py").write_text(MODULE)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *ARGS],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [line for line in done.stdout.splitlines() if "::" in line]


def _ids(items: list[str], cls: str, loop: str) -> set[str]:
    return {
        item.split("::")[-1].split("[")[0]
        for item in items
        if f"::{cls}::" in item and item.endswith(f"[{loop}]")
    }


def test_an_asyncio_only_backend_gets_no_trio_cases_collected(tmp_path: Path) -> None:
    items = _collected(tmp_path)
    cases = _ids(items, "TestBoth", "asyncio")
    assert len(cases) > 10
    assert _ids(items, "TestAsyncioOnly", "asyncio") == cases
    assert _ids(items, "TestAsyncioOnly", "trio") == set()
    assert sum("::TestAsyncioOnly::" in item for item in items) == len(cases)


def test_the_loops_named_or_else_the_fixtures_each_get_every_case(
    tmp_path: Path,
) -> None:
    items = _collected(tmp_path)
    cases = _ids(items, "TestBoth", "asyncio")
    assert _ids(items, "TestBoth", "trio") == cases
    assert _ids(items, "TestFixtureLoops", "asyncio") == cases
    assert _ids(items, "TestFixtureLoops", "trio") == cases
