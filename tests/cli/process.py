"""The CLI as a user runs it: ``python -m asyncsched`` in a subprocess.

Example:
    >>> def test_version(cli: Cli) -> None:
    ...     assert cli("--version").returncode == 0
    ...     with reaped(cli.start("events", "--follow")) as follow:
    ...         assert follow.stdout is not None
"""

from __future__ import annotations

import json
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
        return self._python(["-m", "asyncsched", *args], timeout)

    def _python(
        self, argv: list[str], timeout: float
    ) -> subprocess.CompletedProcess[str]:
        """Run this Python with ``argv`` in the CLI's directory and env."""
        return subprocess.run(
            [sys.executable, *argv],
            capture_output=True,
            text=True,
            cwd=self.cwd,
            env=self.env,
            timeout=timeout,
            check=False,
        )

    def each(
        self, *argvs: tuple[str, ...], timeout: float = 60
    ) -> list[subprocess.CompletedProcess[str]]:
        """The outcome of each of ``argvs``, as :meth:`__call__` would give it,
        from ONE Python process that calls the CLI's ``main`` once per argv,
        one after another (a start-up costs half a second of CPU). For
        commands that start no app (``run`` stays in a process of its own).
        What that process writes outside the calls (an import-time warning,
        say) fails the run."""
        ran = self._python(["-c", _EACH, json.dumps(argvs)], timeout)
        assert (ran.returncode, ran.stderr) == (0, ""), ran.stderr
        return [
            subprocess.CompletedProcess(list(argv), code, out, err)
            for argv, (code, out, err) in zip(
                argvs, json.loads(ran.stdout), strict=True
            )
        ]

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "asyncsched", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.cwd,
            env=self.env,
        )


#: the driver of :meth:`Cli.each`: argvs as JSON in, [code, stdout, stderr] out
_EACH = """
import contextlib, io, json, sys
from asyncsched.cli import main
outcomes = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    outcomes.append([code, out.getvalue(), err.getvalue()])
print(json.dumps(outcomes))
"""


@contextmanager
def reaped(proc: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """``proc`` for the block; afterwards killed if it still runs, and reaped."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)
