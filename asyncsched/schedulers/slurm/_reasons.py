"""Slurm job states and pending reasons -> :class:`~asyncsched.specs.StatusReason`.

Pure: reads the words ``squeue``/``sacct``/``scontrol`` print: a state such as
``TIMEOUT`` or ``CANCELLED by 0``, an exit code ``code:signal``, and for a
pending job its reason (``squeue -o %r``: ``Resources``, ``Priority``,
``ReqNodeNotAvail, ...``).

Example:
    >>> state_reason("OUT_OF_MEMORY", "0:125")
    (<StatusReason.OOM_KILLED: 'OOM_KILLED'>, 'OUT_OF_MEMORY: the job exceeded its memory')
    >>> pending_reason("Resources")
    (<StatusReason.QUEUED: 'QUEUED'>, 'waiting for resources (Resources)')
"""

from __future__ import annotations

from collections.abc import Mapping

from asyncsched.specs import StatusReason, exit_code_of_signal, explain_exit_code

__all__ = ["exit_code_of", "pending_reason", "state_reason"]

_STATES: Mapping[str, tuple[StatusReason, str]] = {
    "TIMEOUT": (StatusReason.TIME_LIMIT, "the job reached its time limit"),
    "DEADLINE": (StatusReason.TIME_LIMIT, "the job reached its deadline"),
    "OUT_OF_MEMORY": (StatusReason.OOM_KILLED, "the job exceeded its memory"),
    "NODE_FAIL": (StatusReason.NODE_FAILURE, "a node of the job failed"),
    "BOOT_FAIL": (StatusReason.NODE_FAILURE, "a node of the job failed to boot"),
    "PREEMPTED": (StatusReason.PREEMPTED, "the job was preempted"),
    "CANCELLED": (StatusReason.CANCELLED, "the job was cancelled"),
    "REVOKED": (StatusReason.CANCELLED, "the job was revoked by another cluster"),
}

# squeue's pending reasons: those that mean "your turn will come" and those
# that mean "as submitted, this cannot run" (held or misconfigured).
_QUEUED = frozenset(
    {
        "Resources",
        "Priority",
        "Dependency",
        "BeginTime",
        "None",
        "Reservation",
        "Licenses",
        "NodeDown",
        "JobArrayTaskLimit",
        "QOSGrpCpuLimit",
        "QOSGrpNodeLimit",
        "QOSMaxJobsPerUserLimit",
        "AssocGrpCpuLimit",
        "AssocMaxJobsLimit",
        "Prolog",
        "Cleaning",
    }
)
_CANNOT_RUN_PREFIXES = (
    "ReqNodeNotAvail",
    "PartitionConfig",
    "PartitionNodeLimit",
    "PartitionTimeLimit",
    "PartitionDown",
    "PartitionInactive",
    "BadConstraints",
    "InvalidAccount",
    "InvalidQOS",
    "QOSMaxWallDurationPerJobLimit",
    "DependencyNeverSatisfied",
    "JobHeldAdmin",
    "JobHeldUser",
)


def exit_code_of(text: str) -> int | None:
    """Slurm's ``code:signal`` as one exit code (128 + signal for a signal death).

    Example:
        >>> exit_code_of("3:0"), exit_code_of("0:9"), exit_code_of("")
        (3, 137, None)
    """
    code, _, sig = text.strip().partition(":")
    try:
        number = int(code)
        signum = int(sig) if sig else 0
    except ValueError:
        return None
    return exit_code_of_signal(signum) if signum else number


def state_reason(state: str, exit_code: str = "") -> tuple[StatusReason | None, str]:
    """The reason a finished job's (or step's) state and exit code give."""
    word = state.split()[0].rstrip("+") if state.strip() else ""
    if word in _STATES:
        reason, text = _STATES[word]
        if word == "CANCELLED" and state.strip() != word:  # "CANCELLED by 1000"
            text = f"the job was {state.strip().lower()}"
        return reason, f"{word}: {text}"
    if word == "FAILED":
        code = exit_code_of(exit_code)
        if code:
            return explain_exit_code(code)
        return StatusReason.EXIT_CODE, "FAILED"
    return None, ""


def pending_reason(reason: str) -> tuple[StatusReason | None, str]:
    """The reason a PENDING job's squeue reason gives (None if it gives none)."""
    text = reason.strip().strip("()")
    if not text or text == "None":
        return None, ""
    if text.startswith("launch failed"):
        return StatusReason.LAUNCH_FAILED, text
    if text.startswith(_CANNOT_RUN_PREFIXES):
        return StatusReason.UNSCHEDULABLE, f"cannot run as submitted ({text})"
    if text in _QUEUED or text.startswith(("QOS", "Assoc")):
        what = "resources" if text == "Resources" else "its turn"
        return StatusReason.QUEUED, f"waiting for {what} ({text})"
    return StatusReason.QUEUED, f"pending ({text})"
