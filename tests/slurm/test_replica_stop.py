"""How a replica's wrapper turns a stop (cancel, fail-fast) into its command's
SIGTERM, run here without Slurm: the wrapper and command are what the
rendered script's ``srun`` starts, and the stop is delivered as ``slurmstepd``
delivers a signal to a step (proctrack/linuxproc, Slurm 22.05): to every
process of the step, one at a time, the deepest first."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import psutil
import pytest

from asyncsched.schedulers.slurm._render import render_request
from asyncsched.specs import AppDef, Resource, Role

from .sbatch_script import component_commands, srun_argv

#: what the replica runs: a SIGTERM trap, and a child it waits for (Slurm's
#: signal reaches the child first: its end alone must not end the command)
TRAP_SCRIPT = 'trap "echo stopped; exit 7" TERM; echo started; sleep 300 & wait'
#: seconds between two processes' signals: slurmstepd's pace on a loaded host
PACE = 0.3
DEADLINE = 30.0
#: (fail-fast?, the mark file a stop creates): a cancel, with and without
#: fail-fast, and a fail-fast sibling's failure
STOPS = [(False, "cancel"), (True, "cancel"), (True, "failed")]


def _rendered(tmp_path: Path, fail_fast: bool) -> tuple[str, list[bytes], Path]:
    """The script, replica 0's command (as srun starts it), the env dir."""
    role = Role(
        "w",
        image="/",
        entrypoint="sh",
        args=["-c", TRAP_SCRIPT],
        resource=Resource(cpu=1, gpu=0, memMB=64),
    )
    request = render_request(AppDef("a", roles=[role]), {"fail_fast": fail_fast})
    env_dir = tmp_path / "env"
    env_dir.mkdir(mode=0o700)
    for name, text in request.env_files().items():
        (env_dir / name).write_text(text)
    script = request.materialize()
    [command] = component_commands(srun_argv(script, env_dir=str(env_dir)))
    return script, command, env_dir


def _stop_signal(script: str) -> signal.Signals:
    """The signal the script's cancel gives the replicas' steps."""
    found = re.search(r'scancel --signal=(\w+) "\$SLURM_JOB_ID"', script)
    assert found is not None, script
    return signal.Signals[f"SIG{found.group(1)}"]


def _start(command: list[bytes]) -> subprocess.Popen[bytes]:
    """Start the replica as slurmstepd does: its own process group, stdout
    piped, a bare environment."""
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        start_new_session=True,
    )


@contextmanager
def _replica(command: list[bytes]) -> Iterator[subprocess.Popen[bytes]]:
    """Start the replica (as slurmstepd does: its own process group); return
    once its command printed ``started``; kill what is left at the end."""
    proc = _start(command)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"started\n"
        yield proc
    finally:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _deepest_first(top: psutil.Process) -> list[psutil.Process]:
    out: list[psutil.Process] = []
    for child in top.children():
        out += _deepest_first(child)
    return [*out, top]


def _wait_until_started(proc: subprocess.Popen[bytes]) -> None:
    """Until the command's child runs and every watcher (a fork of the
    wrapper, same command line) sleeps: their traps are set."""
    top = psutil.Process(proc.pid)
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        tree = top.children(recursive=True)
        watchers = [p for p in tree if p.cmdline() == top.cmdline()]
        child = [p for p in tree if p.cmdline() == ["sleep", "300"]]
        if child and all(
            any(c.name() == "sleep" for c in w.children()) for w in watchers
        ):
            return
        time.sleep(0.05)
    raise AssertionError("the replica's processes did not start")


def _finish(proc: subprocess.Popen[bytes]) -> tuple[bytes, int]:
    """The replica's code (once it ended) and the rest of its output."""
    code = proc.wait(timeout=DEADLINE)
    assert proc.stdout is not None
    return proc.stdout.read(), code


@pytest.mark.parametrize("fail_fast", [True, False])
def test_a_stop_runs_the_commands_term_trap_when_slurm_signals_its_children_first(
    tmp_path: Path, fail_fast: bool
) -> None:
    script, command, _ = _rendered(tmp_path, fail_fast)
    stop = _stop_signal(script)
    with _replica(command) as proc:
        _wait_until_started(proc)
        for each in _deepest_first(psutil.Process(proc.pid)):
            with suppress(psutil.NoSuchProcess):  # ended by an earlier one
                each.send_signal(stop)
            time.sleep(PACE)
        rest, code = _finish(proc)
    assert rest == b"stopped\n"
    assert code == 7  # the trap's code is the replica's


@pytest.mark.parametrize(("fail_fast", "mark"), STOPS)
def test_a_replica_that_missed_the_stop_signal_stops_on_the_mark_file(
    tmp_path: Path, fail_fast: bool, mark: str
) -> None:
    # a cancel or a fail-fast creates its file before it signals: a replica
    # whose watcher was not ready for the signal still stops, within a second.
    # The mark comes once the command's child runs: a SIGTERM between the
    # command's ``echo`` and its fork would leave its child (started after the
    # group's signal) holding the output pipe open
    _, command, env_dir = _rendered(tmp_path, fail_fast)
    with _replica(command) as proc:
        _wait_until_started(proc)
        (env_dir / mark).touch()
        rest, code = _finish(proc)
    assert (rest, code) == (b"stopped\n", 7)


def test_the_watcher_ends_with_the_command(tmp_path: Path) -> None:
    _, command, _ = _rendered(tmp_path, fail_fast=False)
    command = [*command[:-1], b"echo started; sleep 1; exit 3"]
    with _replica(command) as proc:
        sid = os.getsid(proc.pid)
        rest, code = _finish(proc)
        assert (rest, code) == (b"", 3)
        deadline = time.monotonic() + DEADLINE
        while [p for p in psutil.process_iter() if _sid(p) == sid]:
            assert time.monotonic() < deadline, "the watcher outlived its command"
            time.sleep(0.05)


def _sid(proc: psutil.Process) -> int | None:
    try:
        return os.getsid(proc.pid)
    except OSError:
        return None


@pytest.mark.parametrize(("fail_fast", "mark"), STOPS)
def test_a_replica_stopped_before_its_command_starts_never_runs_it(
    tmp_path: Path, fail_fast: bool, mark: str
) -> None:
    # a cancel (or a sibling's failure) right after the job started: the mark
    # is there before the replica's wrapper runs, so its watcher's SIGTERM may
    # come between the wrapper's own ``trap : TERM`` and its command's start,
    # where nothing gets it; the command must not start then (it ran until
    # the cancel's grace was over: 30 s by default), on any of many tries
    _, command, env_dir = _rendered(tmp_path, fail_fast)
    command = [*command[:-1], b"echo ran; sleep 300"]
    (env_dir / mark).touch()
    for _ in range(20):
        proc = _start(command)
        try:
            out, _ = proc.communicate(timeout=DEADLINE)
        finally:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        assert out == b"", out  # the command never ran
        # the wrapper ends stopped, as by the SIGTERM it would have got
        assert proc.returncode in (128 + 15, -15), proc.returncode
