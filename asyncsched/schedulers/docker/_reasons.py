"""Docker container ``State`` -> :class:`~asyncsched.specs.StatusReason` and message.

Pure: reads the ``State`` object of ``GET /containers/{id}/json``.

Example:
    >>> container_reason({"Status": "exited", "ExitCode": 137, "OOMKilled": True})
    (<StatusReason.OOM_KILLED: 'OOM_KILLED'>, 'out of memory: the kernel killed it (exit code 137)')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from asyncsched.specs import StatusReason, explain_exit_code

__all__ = ["container_reason"]


def container_reason(
    state: Mapping[str, Any], *, cancelled: bool = False
) -> tuple[StatusReason | None, str]:
    """Why a container is not running or did not succeed; ``(None, "")`` otherwise.

    ``State.OOMKilled`` wins over the exit code; a non-empty ``State.Error``
    (the runtime could not start the process: no such executable, a bad mount)
    is a launch failure; a cancel by the user wins over both.
    """
    status = str(state.get("Status", ""))
    exit_code = int(state.get("ExitCode") or 0)
    error = str(state.get("Error") or "")
    if status in ("running", "restarting", "paused", "removing"):
        return None, ""
    if cancelled:
        return StatusReason.CANCELLED, "cancelled by the user"
    if state.get("OOMKilled"):
        return (
            StatusReason.OOM_KILLED,
            f"out of memory: the kernel killed it (exit code {exit_code})",
        )
    if error:
        return StatusReason.LAUNCH_FAILED, error
    if status == "dead":
        return None, "the engine marked the container dead"
    if status == "exited":
        return explain_exit_code(exit_code)
    return None, ""
