"""App, role and replica states, and how they are rendered."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

from asyncsched.errors import AppStatusError

from .app import NONE
from .reasons import StatusReason

__all__ = [
    "AppState",
    "AppStatus",
    "ReplicaState",
    "ReplicaStatus",
    "RoleStatus",
    "deciding_reason",
    "is_started",
    "is_terminal",
    "rollup_state",
]


class AppState(int, Enum):
    """Lifecycle state of an app (and of each replica, see :data:`ReplicaState`).

    ``str()`` gives the name, ``repr()`` gives ``"NAME (value)"``.
    """

    UNSUBMITTED = 0
    SUBMITTED = 1
    PENDING = 2
    RUNNING = 3
    SUCCEEDED = 4
    FAILED = 5
    CANCELLED = 6
    UNKNOWN = 7

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"{self.name} ({self.value})"


ReplicaState = AppState

_TERMINAL_STATES = frozenset({AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED})
_STARTED_STATES = _TERMINAL_STATES | {AppState.RUNNING}


def is_terminal(state: AppState) -> bool:
    """True for SUCCEEDED, FAILED and CANCELLED."""
    return state in _TERMINAL_STATES


def is_started(state: AppState) -> bool:
    """True once the app has run: RUNNING or a terminal state."""
    return state in _STARTED_STATES


_LIVE_ORDER = (
    AppState.RUNNING,
    AppState.PENDING,
    AppState.SUBMITTED,
    AppState.UNSUBMITTED,
)


def rollup_state(
    replica_states: Iterable[AppState], decided: AppState | None = None
) -> AppState:
    """The app state implied by its replicas' states (every backend uses it).

    ``decided`` is an outcome the backend settled for the whole app before
    every replica ended: CANCELLED once a cancel was asked, FAILED on
    fail-fast or a lost supervisor, a job-level terminal phase. Precedence:

    1. FAILED when a replica FAILED and the app is over (every replica is
       terminal, or an outcome is ``decided``). A replica stopped *by* a
       cancel is CANCELLED, never FAILED, so a cancel wins only when it came
       before any failure.
    2. The ``decided`` outcome, when terminal.
    3. Every replica terminal: CANCELLED if any was cancelled, else SUCCEEDED
       (as TorchX: all SUCCEEDED gives SUCCEEDED, any failure FAILED).
    4. Otherwise RUNNING once any replica has started (RUNNING or ended),
       else the most advanced live state (PENDING, SUBMITTED, UNSUBMITTED),
       else UNKNOWN (no replica, or only UNKNOWN ones).

    Example:
        >>> S, F, C, R = (AppState.SUCCEEDED, AppState.FAILED,
        ...               AppState.CANCELLED, AppState.RUNNING)
        >>> rollup_state([F, R]), rollup_state([F, C]), rollup_state([S, C])
        (RUNNING (3), FAILED (5), CANCELLED (6))
        >>> rollup_state([S, R], decided=C), rollup_state([F, R], decided=C)
        (CANCELLED (6), FAILED (5))
    """
    states = list(replica_states)
    over = decided is not None and is_terminal(decided)
    ended = bool(states) and all(is_terminal(s) for s in states)
    if (over or ended) and AppState.FAILED in states:
        return AppState.FAILED
    if decided is not None and over:
        return decided
    if ended:
        if AppState.CANCELLED in states:
            return AppState.CANCELLED
        return AppState.SUCCEEDED
    if any(is_started(s) for s in states):
        return AppState.RUNNING
    for live in _LIVE_ORDER:
        if live in states:
            return live
    return decided if decided is not None else AppState.UNKNOWN


@dataclass
class ReplicaStatus:
    """Status of one replica of a role.

    Args:
        id: Replica (node) index within the role; not a worker rank.
        state: Current state.
        role: Role name.
        hostname: Host the replica runs on.
        structured_error_msg: JSON error reply (torchelastic format), or ``NONE``.
        exit_code: Exit code once the replica has exited (asyncsched addition).
        pid: Process id where the scheduler knows it (asyncsched addition).
        num_restarts: Times this replica was restarted (asyncsched addition).
        reason: Why it did not succeed, or why it is still PENDING; None while
            it runs or once it succeeded (asyncsched addition).
        message: The engine's own words about ``reason`` (asyncsched addition).
    """

    id: int
    state: AppState
    role: str
    hostname: str
    structured_error_msg: str = NONE
    exit_code: int | None = None
    pid: int | None = None
    num_restarts: int = 0
    reason: StatusReason | None = None
    message: str = ""


def deciding_reason(
    state: AppState, roles: list[RoleStatus]
) -> tuple[StatusReason | None, str]:
    """The reason (and message) of the replica that decided an app's ``state``.

    FAILED: the first failed replica with a reason; CANCELLED: the first
    cancelled one (else :attr:`StatusReason.CANCELLED`); PENDING or SUBMITTED:
    the first waiting replica with a reason. None for other states.

    Example:
        >>> r = ReplicaStatus(0, AppState.FAILED, "t", "h", reason=StatusReason.SIGNAL)
        >>> deciding_reason(AppState.FAILED, [RoleStatus("t", [r])])
        (<StatusReason.SIGNAL: 'SIGNAL'>, '')
    """
    wanted = {
        AppState.FAILED: (AppState.FAILED,),
        AppState.CANCELLED: (AppState.CANCELLED,),
        AppState.PENDING: (AppState.PENDING, AppState.SUBMITTED),
        AppState.SUBMITTED: (AppState.PENDING, AppState.SUBMITTED),
    }.get(state)
    if wanted is None:
        return None, ""
    for role in roles:
        for replica in role.replicas:
            if replica.state in wanted and replica.reason is not None:
                return replica.reason, replica.message
    if state == AppState.CANCELLED:
        return StatusReason.CANCELLED, ""
    return None, ""


@dataclass
class RoleStatus:
    """Statuses of the replicas of one role."""

    role: str
    replicas: list[ReplicaStatus]

    def to_json(self) -> dict[str, Any]:
        """``{"role": ..., "replicas": [...]}``; replica states stay int enums."""
        return {"role": self.role, "replicas": [asdict(r) for r in self.replicas]}


# An RPC error reply is cut down to its "XError('On WorkerInfo(...):\n ... ')" block.
_RPC_ERROR = re.compile(r"\w*\('On WorkerInfo\(.+\):\n(?:.*\n)*'\)")
# A message nesting another one ("...\nException ...") keeps the line before it.
_NESTED_ERROR = re.compile(r"(?P<msg>.+)\nException")


@dataclass
class AppStatus:
    """Runtime status of an app.

    Args:
        state: Overall state.
        num_restarts: Times the whole app was restarted.
        msg: Free-form message from the scheduler.
        structured_error_msg: JSON error reply, or ``NONE``.
        ui_url: Where to watch the app, if the scheduler has a UI.
        roles: Per-role replica statuses (of the latest attempt).
        reason: The reason of the replica that decided ``state`` (asyncsched
            addition), None when the app succeeded or runs.
    """

    state: AppState
    num_restarts: int = 0
    msg: str = ""
    structured_error_msg: str = NONE
    ui_url: str | None = None
    roles: list[RoleStatus] = field(default_factory=list)
    reason: StatusReason | None = None

    def is_terminal(self) -> bool:
        """True when the app has finished (successfully or not)."""
        return is_terminal(self.state)

    def raise_for_status(self) -> None:
        """Raise :class:`~asyncsched.errors.AppStatusError` unless SUCCEEDED."""
        if self.state != AppState.SUCCEEDED:
            raise AppStatusError(self, f"job did not succeed: {self!r}")

    def __repr__(self) -> str:
        import yaml

        roles = [
            {
                "role": role.role,
                "replicas": [_replica_repr(r) for r in role.replicas],
            }
            for role in self.roles
        ]
        body = {
            "msg": self.msg,
            "num_restarts": self.num_restarts,
            "roles": roles,
            "state": repr(self.state),
            "structured_error_msg": _parse_json_or_raw(self.structured_error_msg),
            "ui_url": self.ui_url,
        }
        if self.reason is not None:  # shown only when known: TorchX's shape otherwise
            body["reason"] = self.reason.value
        return yaml.safe_dump({"AppStatus": body}, sort_keys=True)

    def to_json(self, filter_roles: list[str] | None = None) -> dict[str, Any]:
        """JSON-friendly dict; ``filter_roles`` keeps only the named roles."""
        return {
            "state": str(self.state),
            "reason": None if self.reason is None else self.reason.value,
            "num_restarts": self.num_restarts,
            "roles": [r.to_json() for r in self._roles(filter_roles)],
            "msg": self.msg,
            "structured_error_msg": self.structured_error_msg,
            "url": self.ui_url,
        }

    def format(self, filter_roles: list[str] | None = None) -> str:
        """Human-readable status with one block per replica.

        Replica 0 of each role is marked with ``*``. A torchelastic error reply is
        shown with its exit code, timestamp, hostname and wrapped message; a
        FAILED or CANCELLED replica without one shows ``(no reply file)``.
        """
        replicas = "".join(
            _format_replica(r)
            for role in self._roles(filter_roles)
            for r in sorted(role.replicas, key=lambda r: r.id)
        )
        return (
            "AppStatus:\n"
            f"    State: {self.state}\n"
            f"    Num Restarts: {self.num_restarts}\n"
            f"    Roles: {replicas}\n"
            f"    Msg: {self.msg}\n"
            f"    Structured Error Msg: {self.structured_error_msg}\n"
            f"    UI URL: {self.ui_url}\n"
        )

    def _roles(self, filter_roles: list[str] | None) -> list[RoleStatus]:
        if not filter_roles:
            return self.roles
        return [r for r in self.roles if r.role in filter_roles]

    def _format_error_message(self, msg: str, header: str, width: int = 80) -> str:
        return _format_error_message(msg, header, width)


def _replica_repr(replica: ReplicaStatus) -> dict[str, Any]:
    body = {**asdict(replica), "state": repr(replica.state)}
    body.pop("reason")
    body.pop("message")
    if replica.reason is not None:
        body["reason"] = replica.reason.value
        body["message"] = replica.message
    return body


def _parse_json_or_raw(text: str) -> Any:
    if text == NONE:
        return NONE
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _format_error_message(msg: str, header: str, width: int = 80) -> str:
    """Trim an error to its interesting part and wrap it at ``width`` columns.

    A line is cut at the first space at or after ``width`` characters (newlines
    included in the count); the space starts the next line, which is indented
    to line up with the text after ``header``.
    """
    rpc = _RPC_ERROR.search(msg)
    if rpc:
        msg = rpc.group(0)
    nested = _NESTED_ERROR.search(msg)
    if nested:
        msg = nested.group("msg")

    chunks: list[str] = []
    start = 0
    while (cut := msg.find(" ", start + width)) != -1:
        chunks.append(msg[start:cut])
        start = cut
    chunks.append(msg[start:])
    indent = " " * len(header)
    return "\n".join(
        (header if i == 0 else indent) + chunk for i, chunk in enumerate(chunks)
    )


def _format_replica(replica: ReplicaStatus) -> str:
    marker = "*" if replica.id == 0 else " "
    head = f"\n {marker}{replica.role}[{replica.id}]:{_replica_details(replica)}"
    return head + _format_reason(replica)


def _format_reason(replica: ReplicaStatus) -> str:
    """An extra ``reason:`` line when the backend knows why (none otherwise)."""
    if replica.reason is None:
        return ""
    text = replica.reason.value
    if replica.exit_code is not None:
        text += f" (exit code {replica.exit_code})"
    if replica.message:
        text += f": {replica.message}"
    return "\n" + _format_error_message(text, header="        reason: ")


def _replica_details(replica: ReplicaStatus) -> str:
    state = str(replica.state)
    if replica.structured_error_msg == NONE:
        if replica.state in (AppState.FAILED, AppState.CANCELLED):
            return f"{state} (no reply file)"
        return state
    try:
        reply = json.loads(replica.structured_error_msg)["message"]
        message: str = reply["message"]
        timestamp = datetime.fromtimestamp(int(reply["extraInfo"]["timestamp"]))
        exit_code = reply["errorCode"] or "<N/A>"
    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
        # not a torchelastic reply: show it as it is
        return f"{state} {replica.structured_error_msg}"
    error = _format_error_message(message, header="    error_msg: ")
    return (
        f"{state} (exitcode: {exit_code})\n"
        f"        timestamp: {timestamp}\n"
        f"        hostname: {replica.hostname}\n"
        f"    {error}"
    )
