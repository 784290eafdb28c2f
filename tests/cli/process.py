"""The CLI as a user runs it: ``python -m asyncsched`` in a subprocess.

Example:
    >>> def test_version(cli: Cli) -> None:
    ...     assert cli("--version").returncode == 0
    ...     with reaped(cli.start("events", "--follow")) as follow:
    ...         assert follow.stdout is not None
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ("Cli", "reaped")


class Cli:
    """Runs ``python -m asyncsched`` with an isolated state dir."""

    def __init__(self, tmp_path: Path) -> None:
        self.cwd = tmp_path
        self.env = {
            **os.environ,
            "ASYNCSCHED_STATE_DIR": str(tmp_path / "state"),
            "NO_COLOR": "1",
        }
        self.env.pop("LOGLEVEL", None)

    def __call__(
        self, *args: str, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "asyncsched", *args],
            capture_output=True,
            text=True,
            cwd=self.cwd,
            env=self.env,
            timeout=timeout,
            check=False,
        )

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "asyncsched", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.cwd,
            env=self.env,
        )


@contextmanager
def reaped(proc: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """``proc`` for the block; afterwards killed if it still runs, and reaped."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)
