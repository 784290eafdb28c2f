"""A verb whose output reader goes away (``| head``) exits 0 without a word.

Each test runs the real CLI in a subprocess whose stdout is a pipe that the
test (or ``head``) closes early, then checks the exit status and stderr.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator

import pytest

from .process import Cli

pytest.importorskip("asyncsched.schedulers.local_scheduler")

_CLI = f"{shlex.quote(sys.executable)} -m asyncsched"


def _finished_app(cli: Cli, *command: str, replicas: int = 1) -> str:
    done = cli("run", "--no-log", "--replicas", str(replicas), "--", *command)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _read_lines_then_close(
    cli: Cli, *args: str, lines: int, with_stderr: bool = False
) -> tuple[list[str], subprocess.Popen[str]]:
    """Start the CLI, read ``lines`` lines of its stdout, close the pipe."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "asyncsched", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if with_stderr else subprocess.PIPE,
        text=True,
        cwd=cli.cwd,
        env=cli.env,
    )
    assert proc.stdout is not None
    got = [proc.stdout.readline() for _ in range(lines)]
    proc.stdout.close()
    return got, proc


def _ended_quietly(proc: subprocess.Popen[str], timeout: float = 30) -> None:
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("the CLI went on after its reader left") from None
    assert (proc.returncode, stderr or "") == (0, "")


def test_log_piped_into_head_exits_0_quietly(cli: Cli) -> None:
    # two replicas: both streams hit the closed pipe (errors in a task group)
    handle = _finished_app(cli, "sh", "-c", "seq 1 3000", replicas=2)
    result = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {_CLI} log {handle} | head -2"],
        capture_output=True,
        text=True,
        cwd=cli.cwd,
        env=cli.env,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert len(result.stdout.splitlines()) == 2


@pytest.fixture
def quiet_app(cli: Cli) -> Iterator[str]:
    """A running local app (supervised by ``run --wait``) that printed three
    lines and then prints nothing more; cancelled at the end."""
    proc = cli.start(
        "run",
        "--wait",
        "--name",
        "quiet",
        "--",
        "sh",
        "-c",
        "echo a; echo b; echo c; exec sleep 60",
    )
    try:
        assert proc.stdout is not None
        assert proc.stderr is not None
        handle = proc.stdout.readline().strip()
        # `run` shows the app's lines on stderr: the third one means all are logged
        for expected in ("a", "b", "c"):
            line = proc.stderr.readline()
            assert line == f"quiet/0 {expected}\n", line + proc.stderr.read()
        yield handle
    finally:
        cli("cancel", handle)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def test_log_follow_ends_when_its_reader_leaves_while_the_app_is_silent(
    cli: Cli, quiet_app: str
) -> None:
    got, proc = _read_lines_then_close(cli, "log", "-f", quiet_app, lines=2)
    assert got == ["quiet/0 a\n", "quiet/0 b\n"]
    _ended_quietly(proc)  # long before the app's 60 s are over


def test_run_streaming_logs_ends_when_its_reader_leaves_and_cancels_its_local_app(
    cli: Cli,
) -> None:
    got, proc = _read_lines_then_close(
        cli,
        "run",
        "--name",
        "chatty",
        "--",
        "sh",
        "-c",
        "echo one; exec sleep 60",
        lines=2,
        with_stderr=True,  # `run ... 2>&1 | head -2`
    )
    handle = got[0].strip()
    assert handle.startswith("local_cwd://asyncsched/chatty-"), got
    assert got[1] == "chatty/0 one\n"
    _ended_quietly(proc)  # nothing more is written: run saw its reader leave
    status = cli("status", "--json", handle)
    assert json.loads(status.stdout)["state"] == "CANCELLED", status.stderr


@pytest.mark.parametrize(
    "verb",
    [
        ["status"],
        ["status", "--json"],
        ["describe"],
        ["list"],
        ["list", "--json"],
        ["runopts"],
        ["schedulers"],
        ["prune", "--dry-run"],
        ["run", "--dryrun", "--", "echo", "x"],
        ["run", "--help"],
    ],
    ids=" ".join,
)
def test_verb_into_an_already_closed_pipe_exits_0_quietly(
    cli: Cli, verb: list[str]
) -> None:
    args = list(verb)
    if verb[0] in ("status", "describe"):
        args.append(_finished_app(cli, "true"))
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "asyncsched", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cli.cwd,
            env=cli.env,
        )
    finally:
        os.close(write_end)
    _ended_quietly(proc)
