"""Shared pytest configuration.

Every async test runs on asyncio (pytest-asyncio, auto mode). No test touches
the user's own state: the local backend's app index goes to a temp dir.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _private_state_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    path = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("ASYNCSCHED_STATE_DIR", str(path))
    return path
