"""A local replica's exit -> exit code as shells report it, StatusReason, message.

Pure. ``returncode`` is what ``waitpid`` gave (Python's convention: negative
for a death by signal); replicas report ``128 + signal`` like a shell.

Example:
    >>> replica_outcome(AppState.FAILED, -9, app_failed=True)
    (137, <StatusReason.SIGNAL: 'SIGNAL'>, 'killed by SIGKILL (exit code 137)')
"""

from __future__ import annotations

from asyncsched.specs import (
    AppState,
    StatusReason,
    exit_code_of_signal,
    explain_exit_code,
    is_terminal,
)

__all__ = ["replica_outcome", "shell_exit_code"]


def shell_exit_code(returncode: int | None) -> int | None:
    """``returncode`` with a signal death as ``128 + signal`` (None stays None)."""
    if returncode is None or returncode >= 0:
        return returncode
    return exit_code_of_signal(-returncode)


def replica_outcome(
    state: AppState,
    returncode: int | None,
    *,
    app_failed: bool,
    app_msg: str = "",
    limit: tuple[StatusReason, str] | None = None,
    lost: bool = False,
) -> tuple[int | None, StatusReason | None, str]:
    """Exit code, reason and message of a local replica in ``state``.

    A CANCELLED replica was stopped by the user's cancel, or (``app_failed``)
    by fail-fast after another replica failed. A ``lost`` replica ended
    with its supervising process (killed, or the host went down): like a
    node failure, ``NODE_FAILURE``. Another FAILED replica without an exit
    code failed to (re)start: the app's message says why. A FAILED replica
    that a ``limit`` ended (OOM_KILLED, TIME_LIMIT) reports it.

    Example:
        >>> replica_outcome(AppState.FAILED, None, app_failed=True, lost=True,
        ...                 app_msg="the supervisor (pid 7) died")[1]
        <StatusReason.NODE_FAILURE: 'NODE_FAILURE'>
    """
    code = shell_exit_code(returncode)
    if lost and code is None and is_terminal(state):
        return code, StatusReason.NODE_FAILURE, app_msg
    if state == AppState.CANCELLED:
        if app_failed:
            return code, StatusReason.CANCELLED, "stopped: another replica failed"
        return code, StatusReason.CANCELLED, "cancelled by the user"
    if state != AppState.FAILED:
        return code, None, ""
    if limit is not None:
        limit_reason, limit_message = limit
        if code is not None:
            limit_message = f"{limit_message}; {explain_exit_code(code)[1]}"
        return code, limit_reason, limit_message
    if code is None:
        return code, StatusReason.LAUNCH_FAILED, app_msg
    reason, message = explain_exit_code(code)
    return code, reason or StatusReason.EXIT_CODE, message
