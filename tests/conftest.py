"""Shared pytest configuration.

Async tests run on asyncio (pytest-asyncio, auto mode), except those marked
``@pytest.mark.anyio``: pytest's anyio plugin runs them once per backend of the
``anyio_backend`` fixture (asyncio and trio), and pytest-asyncio is kept away
from them (see :func:`pytest_collection_modifyitems`). No test touches the
user's own state: the local backend's app index goes to a temp dir.
Under pytest-xdist, ``--dist loadgroup`` gives each engine's tests to one
worker (see :mod:`tests.engine_groups`), and the run ends with the time per
worker (see :mod:`tests.worker_times`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

#: the event loops the anyio-marked tests run on
ANYIO_BACKENDS = ("asyncio", "trio")


@pytest.fixture(autouse=True)
def _private_state_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    path = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("ASYNCSCHED_STATE_DIR", str(path))
    return path


def pytest_configure(config: pytest.Config) -> None:
    """In the xdist controller: print the time per worker at the end
    (:mod:`tests.worker_times`)."""
    if not hasattr(config, "workerinput") and config.pluginmanager.has_plugin("xdist"):
        from .worker_times import WorkerTimes

        config.pluginmanager.register(WorkerTimes(), "asyncsched-worker-times")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup``: one worker per engine directory, see
    :mod:`tests.engine_groups` (the other modes are pytest-xdist's own)."""
    if config.getoption("dist") != "loadgroup":
        return None
    from .engine_groups import EngineGroupScheduling

    return EngineGroupScheduling(config, log)


@pytest.fixture(params=ANYIO_BACKENDS)
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The event loop of an ``@pytest.mark.anyio`` test (each one in turn)."""
    return str(request.param)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Hand anyio-marked tests back to the anyio plugin.

    pytest-asyncio's auto mode claims every ``async def`` test (it would run
    the trio variant on asyncio); such items are replaced by plain functions
    without its ``asyncio`` marker, which the anyio plugin then runs.
    """
    for i, item in enumerate(items):
        if (
            not isinstance(item, pytest.Function)
            or type(item) is pytest.Function
            or item.get_closest_marker("anyio") is None
        ):
            continue
        plain = pytest.Function.from_parent(
            item.parent,
            name=item.name,
            callspec=getattr(item, "callspec", None),
            callobj=item.obj,
            fixtureinfo=item._fixtureinfo,
            originalname=item.originalname,
        )
        plain.own_markers = [m for m in item.own_markers if m.name != "asyncio"]
        items[i] = plain
