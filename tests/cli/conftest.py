"""Fixtures of the CLI tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from .process import Cli


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)
