"""What ``describe`` and ``list`` answer, built from a backend's snapshot.

:func:`response_of` turns an :class:`~asyncsched.schedulers.snapshot.AppSnapshot`
into TorchX's :class:`DescribeAppResponse` shape; :func:`final_if_settled`
tells whether ``wait`` would return it at once.

Example:
    >>> from asyncsched.schedulers.snapshot import AppSnapshot, ReplicaSnapshot
    >>> snap = AppSnapshot("a-1", [ReplicaSnapshot("r", 0, AppState.SUCCEEDED, 0)])
    >>> response_of(snap).state
    SUCCEEDED (4)
"""

from __future__ import annotations

import builtins
import dataclasses
from dataclasses import dataclass, field

from asyncsched.schedulers.shared.messages import (
    app_failure_message,
    replica_exit_message,
)
from asyncsched.schedulers.snapshot import AppSnapshot
from asyncsched.specs import (
    NONE,
    AppState,
    Role,
    RoleStatus,
    StatusReason,
    deciding_reason,
)

__all__ = (
    "DescribeAppResponse",
    "ListAppResponse",
    "final_if_settled",
    "response_of",
    "still_stopping",
)


@dataclass
class DescribeAppResponse:
    """What ``describe`` knows of an app (TorchX's fields and defaults)."""

    app_id: str = "<NOT_SET>"
    state: AppState = AppState.UNSUBMITTED
    num_restarts: int = -1
    msg: str = NONE
    structured_error_msg: str = NONE
    ui_url: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    roles_statuses: list[RoleStatus] = field(default_factory=list)
    roles: list[Role] = field(default_factory=list)
    reason: StatusReason | None = None


@dataclass
class ListAppResponse:
    """One row of ``list()``; ``app_handle`` is filled in by the runner.

    Equality and hashing use ``app_id``, ``state`` and ``app_handle`` only, as in
    TorchX; ``name`` (an asyncsched addition) is informational.

    Example:
        >>> row = ListAppResponse(app_id="a-1", state=AppState.RUNNING, name="a")
        >>> row == ListAppResponse(app_id="a-1", state=AppState.RUNNING)
        True
    """

    app_id: str
    state: AppState
    app_handle: str = "<NOT_SET>"
    name: str = field(default="", compare=False)

    def __hash__(self) -> int:
        return hash((self.app_id, self.app_handle, self.state))


def final_if_settled(
    snapshot: AppSnapshot | None,
) -> tuple[bool, DescribeAppResponse | None]:
    """``(True, response)`` for an app ``wait`` would return at once (stopped
    and settled; unknown: None), else ``(False, None)``."""
    if snapshot is None:
        return True, None
    if snapshot.stopped and snapshot.settled:
        return True, response_of(snapshot)
    return False, None


def still_stopping(app: AppSnapshot) -> str:
    """Why a terminal app is not over yet ("" when it is not terminal)."""
    if not app.terminal or app.stopped:
        return ""
    live = [f"{r.role}/{r.id}" for r in app.replicas if r.live]
    shown = ", ".join(live[:5]) + (
        f" and {len(live) - 5} more" if len(live) > 5 else ""
    )
    return f"it is {app.state.name} but replicas still stop: {shown}"


def response_of(app: AppSnapshot) -> DescribeAppResponse:
    """The TorchX-shaped description of a snapshot.

    Where the backend says nothing, the same words as every backend: a
    failed replica's message says how it ended ("exited with code 3"), a
    failed app's names the first failed replica ("replica bad/0 exited with
    code 3"); see :mod:`asyncsched.schedulers.shared.messages`.
    """
    app = _with_failure_words(app)
    shared = {name: getattr(app, name) for name in _RESPONSE_FIELDS}
    statuses = app.role_statuses()
    reason, _ = deciding_reason(app.state, statuses)
    return DescribeAppResponse(
        roles_statuses=statuses,
        roles=builtins.list(app.roles),
        reason=reason,
        **shared,
    )


def _with_failure_words(app: AppSnapshot) -> AppSnapshot:
    replicas = [
        dataclasses.replace(r, message=replica_exit_message(r.exit_code))
        if r.state == AppState.FAILED and not r.message and r.exit_code is not None
        else r
        for r in app.replicas
    ]
    msg = app.msg
    if app.state == AppState.FAILED and msg in ("", NONE):
        msg = app_failure_message(replicas) or msg
    if msg == app.msg and all(
        a is b for a, b in zip(replicas, app.replicas, strict=True)
    ):
        return app
    return dataclasses.replace(app, replicas=replicas, msg=msg)


#: what a DescribeAppResponse takes from an AppSnapshot as it is
_RESPONSE_FIELDS = (
    "app_id",
    "state",
    "num_restarts",
    "msg",
    "structured_error_msg",
    "ui_url",
)
