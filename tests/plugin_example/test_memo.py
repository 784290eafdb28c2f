"""The tutorial's plugin, found through its entry point, passes the whole contract.

The plugin is registered the way an installed package would be: a
``dist-info`` directory with an ``entry_points.txt`` on ``sys.path``; nothing
is installed.
"""

from __future__ import annotations

import ast
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from asyncsched.schedulers import get_scheduler
from asyncsched.testing import ContractTarget, SchedulerContract

from .memo import MemoScheduler

HERE = Path(__file__).parent
DIST = HERE / "installed"  # not "dist": that name is git-ignored


@pytest.fixture(autouse=True)
def _memo_plugin_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(DIST))


class TestMemoPluginContract(SchedulerContract):
    capabilities = MemoScheduler.capabilities
    posix_shell = False

    @pytest.fixture
    async def target(self) -> AsyncIterator[ContractTarget]:
        async with get_scheduler("memo", session_name="contract") as sched:
            yield ContractTarget(sched, quick_timeout=10, posix_shell=False)


def test_the_plugin_is_found_through_its_entry_point() -> None:
    sched = get_scheduler("memo", session_name="found", docker_host="ignored")
    assert type(sched).__module__ == "tests.plugin_example.memo"
    assert sched.backend == "memo"


def test_the_plugin_uses_only_public_names() -> None:
    tree = ast.parse((HERE / "memo.py").read_text())
    froms = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and (node.module or "").startswith("asyncsched")
    ]
    plain = [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name.startswith("asyncsched")
    ]
    assert froms
    assert plain == []  # no module object to reach private names through
    names = [alias.name for node in froms for alias in node.names]
    assert not [name for name in names if name.startswith("_")], names
    imported = [node.module or "" for node in froms]
    for module in imported:
        assert not any(part.startswith("_") for part in module.split(".")), module
        assert module in {
            "asyncsched.schedulers.kit",
            "asyncsched.specs",
            "asyncsched.testing",
        }, module
