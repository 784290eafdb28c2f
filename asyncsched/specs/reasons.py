"""Why a replica (or an app) is not running, or did not succeed: :class:`StatusReason`.

Every backend maps what its engine reports (an exit status, Docker's
``State.OOMKilled``, a pod's ``terminated.reason``, a Slurm job state) to one of
these members; the engine's own words go into the status's ``message``. The
table per backend is in ``docs/status-reasons.md``.

Example:
    >>> StatusReason.OOM_KILLED.value
    'OOM_KILLED'
    >>> exit_code_of_signal(9)
    137
    >>> reason_of_exit_code(137)
    <StatusReason.SIGNAL: 'SIGNAL'>
"""

from __future__ import annotations

import signal
from enum import StrEnum

__all__ = [
    "StatusReason",
    "exit_code_of_signal",
    "explain_exit_code",
    "reason_of_exit_code",
    "signal_name",
]

# Shells and container engines report a death by signal N as exit code 128 + N.
_SIGNAL_BASE = 128
# ... and a command that could not be executed as 126 (found, not runnable)
# or 127 (not found): POSIX shells, env, nohup, docker run and runc agree.
_CANNOT_EXECUTE = {126: "command found but not executable", 127: "command not found"}


class StatusReason(StrEnum):
    """A typed cause for a non-success, or for a long PENDING.

    Members:
        EXIT_CODE: the process exited on its own with a non-zero code.
        SIGNAL: the process was killed by a signal it did not handle
            (``exit_code`` is 128 + the signal number).
        OOM_KILLED: the kernel or the engine killed it for exceeding its memory.
        TIME_LIMIT: the engine stopped it at its time limit (Slurm ``TIMEOUT``,
            Kubernetes ``DeadlineExceeded``).
        IMAGE_PULL: the image could not be pulled, or is being pulled (PENDING).
        UNSCHEDULABLE: no node can take it (PENDING), e.g. a resource request
            no node satisfies.
        QUEUED: waiting in the engine's queue for resources or priority (PENDING).
        PREEMPTED: the engine took its resources for other work.
        EVICTED: the node evicted it (disk or memory pressure, drain).
        NODE_FAILURE: the node it ran on failed.
        LAUNCH_FAILED: it could not be started at all (no such executable,
            permission denied, bad container configuration).
        CANCELLED: the user cancelled it.
    """

    EXIT_CODE = "EXIT_CODE"
    SIGNAL = "SIGNAL"
    OOM_KILLED = "OOM_KILLED"
    TIME_LIMIT = "TIME_LIMIT"
    IMAGE_PULL = "IMAGE_PULL"
    UNSCHEDULABLE = "UNSCHEDULABLE"
    QUEUED = "QUEUED"
    PREEMPTED = "PREEMPTED"
    EVICTED = "EVICTED"
    NODE_FAILURE = "NODE_FAILURE"
    LAUNCH_FAILED = "LAUNCH_FAILED"
    CANCELLED = "CANCELLED"


def exit_code_of_signal(signum: int) -> int:
    """The exit code shells and container engines report for a death by ``signum``."""
    return _SIGNAL_BASE + signum


def signal_name(signum: int) -> str:
    """``SIGKILL`` for 9; ``signal 70`` for a number with no name here."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def reason_of_exit_code(exit_code: int) -> StatusReason | None:
    """The reason an engine's exit code alone gives: None for 0.

    A code above 128 that names a signal reads as :attr:`StatusReason.SIGNAL`;
    126 and 127 (the shell's "cannot execute" and "not found") as
    :attr:`StatusReason.LAUNCH_FAILED`; any other non-zero code as
    :attr:`StatusReason.EXIT_CODE`. Engines that know more (an OOM kill, a time
    limit) say so in their own mapping.
    """
    return explain_exit_code(exit_code)[0]


def explain_exit_code(exit_code: int) -> tuple[StatusReason | None, str]:
    """:func:`reason_of_exit_code` with a message for people.

    Example:
        >>> explain_exit_code(143)
        (<StatusReason.SIGNAL: 'SIGNAL'>, 'killed by SIGTERM (exit code 143)')
    """
    if exit_code == 0:
        return None, ""
    if exit_code in _CANNOT_EXECUTE:
        text = f"{_CANNOT_EXECUTE[exit_code]} (exit code {exit_code})"
        return StatusReason.LAUNCH_FAILED, text
    signum = exit_code - _SIGNAL_BASE
    if 0 < signum < signal.NSIG:
        text = f"killed by {signal_name(signum)} (exit code {exit_code})"
        return StatusReason.SIGNAL, text
    return StatusReason.EXIT_CODE, f"exited with code {exit_code}"
