"""SchedulerContract subclasses are collected on the event loops they name
only, with only the cases their declared capabilities make apply."""

from __future__ import annotations

import subprocess
import sys

import pytest

MODULE = """
import pytest
from asyncsched.schedulers.kit import Capabilities
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

class TestBare(SchedulerContract):
    capabilities = Capabilities()  # no logs, no list: asyncio only

class TestObservedNoShell(SchedulerContract):
    capabilities = Capabilities.observed()
    posix_shell = False
"""

ARGS = ("--collect-only", "test_cases.py")


@pytest.fixture(scope="module")
def items(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The test ids pytest collects from MODULE (one collection, in a child
    pytest, for every test here: it is the same for all)."""
    tmp_path = tmp_path_factory.mktemp("contract-loops")
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


def test_an_asyncio_only_backend_gets_no_trio_cases_collected(items: list[str]) -> None:
    cases = _ids(items, "TestBoth", "asyncio")
    assert len(cases) > 10
    assert _ids(items, "TestAsyncioOnly", "asyncio") == cases
    assert _ids(items, "TestAsyncioOnly", "trio") == set()
    assert sum("::TestAsyncioOnly::" in item for item in items) == len(cases)


def test_the_loops_named_or_else_the_fixtures_each_get_every_case(
    items: list[str],
) -> None:
    cases = _ids(items, "TestBoth", "asyncio")
    assert _ids(items, "TestBoth", "trio") == cases
    assert _ids(items, "TestFixtureLoops", "asyncio") == cases
    assert _ids(items, "TestFixtureLoops", "trio") == cases


def test_cases_of_capabilities_not_declared_are_not_collected(items: list[str]) -> None:
    every = _ids(items, "TestBoth", "asyncio")
    bare = _ids(items, "TestBare", "asyncio")
    assert _ids(items, "TestBare", "trio") == set()  # its event_loops: asyncio
    gated = {
        "test_list_contains_submitted_app",
        "test_logs_arrive_in_order_with_newlines",
        "test_log_regex_and_streams",
        "test_log_tail_follows_until_terminal",
        "test_declared_log_streams_are_served",
        "test_declared_log_since_until_is_honoured",
        "test_declared_per_replica_status_reports_each_replica",
        "test_cancel_after_a_failure_keeps_the_app_failed",
        "test_unknown_app_role_and_replica_errors_name_the_handle",
        "test_unknown_app_error_names_the_handle_the_user_was_given",
        "test_default_log_stream_is_the_combined_one",
        "test_log_times_are_datetimes_or_epoch_seconds",
        "test_a_failed_replica_stops_its_siblings_by_default",
    }
    assert gated <= every
    assert bare == every - gated
    assert "test_cancel_is_idempotent_and_reports_cancelled" in bare  # declared


def test_observed_capabilities_collect_every_case_on_both_loops_but_shell_ones(
    items: list[str],
) -> None:
    every = _ids(items, "TestBoth", "asyncio")
    shell = {"test_wait_after_cancel_waits_out_the_replicas_grace"}
    for loop in ("asyncio", "trio"):
        assert _ids(items, "TestObservedNoShell", loop) == every - shell
