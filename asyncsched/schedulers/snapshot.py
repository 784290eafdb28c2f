"""What a backend knows of one app at one moment: the observation model.

A backend's ``_describe`` hook returns an :class:`AppSnapshot` (or None for
an unknown app); the base :class:`~asyncsched.schedulers.api.Scheduler` turns
it into ``describe``/``list``/``wait`` answers, rolls the replica states up
into the app state (:func:`~asyncsched.specs.rollup_state`) and checks
``log_iter`` arguments against it. A backend signals that an app changed with
``self.notify_changed(app_id)``; ``wait`` re-reads the snapshot then.

Example:
    >>> snap = AppSnapshot(
    ...     "app-1",
    ...     [ReplicaSnapshot("trainer", 0, AppState.SUCCEEDED, exit_code=0),
    ...      ReplicaSnapshot("trainer", 1, AppState.FAILED, exit_code=3)],
    ... )
    >>> snap.state, snap.role_names()
    (FAILED (5), ['trainer'])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from asyncsched.specs import (
    NONE,
    AppState,
    ReplicaStatus,
    Role,
    RoleStatus,
    StatusReason,
    is_terminal,
    rollup_state,
)

__all__ = ["AppSnapshot", "ReplicaSnapshot"]

#: replica states of a process that runs, or may still be started
_LIVE = frozenset(
    {AppState.UNSUBMITTED, AppState.SUBMITTED, AppState.PENDING, AppState.RUNNING}
)


@dataclass(frozen=True)
class ReplicaSnapshot:
    """One replica as the backend sees it.

    Args:
        role: Role name.
        id: Replica index within the role.
        state: Replica state (a replica stopped by a cancel is CANCELLED).
        exit_code: Exit code once it exited, else None.
        hostname: Where it runs (or ran).
        message: Why it is in that state, when the backend can tell.
        started: When it started (epoch seconds), if known.
        finished: When it ended (epoch seconds), if known.
        num_restarts: Times it was restarted.
        pid: Process id, where the backend knows it.
        structured_error_msg: JSON error reply (torchelastic), or ``NONE``.
        reason: Why it did not succeed or still waits (``message`` holds the
            engine's words), else None.
    """

    role: str
    id: int
    state: AppState
    exit_code: int | None = None
    hostname: str = ""
    message: str = ""
    started: float | None = None
    finished: float | None = None
    num_restarts: int = 0
    pid: int | None = None
    structured_error_msg: str = NONE
    reason: StatusReason | None = None

    @property
    def live(self) -> bool:
        """True while the replica runs or may still be started."""
        return self.state in _LIVE

    def status(self) -> ReplicaStatus:
        """The TorchX-shaped :class:`~asyncsched.specs.ReplicaStatus`."""
        return ReplicaStatus(**{name: getattr(self, name) for name in _STATUS_FIELDS})


#: the fields a ReplicaStatus shares with a ReplicaSnapshot (all of its own)
_STATUS_FIELDS = tuple(f.name for f in dataclasses.fields(ReplicaStatus))


@dataclass
class AppSnapshot:
    """One app: its replicas plus what the backend decided for the whole app.

    Args:
        app_id: The app id (as the backend spells it).
        replicas: Every replica, in role order then replica order.
        name: The AppDef name, when known.
        decided: An app-level outcome settled before every replica ended
            (see :func:`~asyncsched.specs.rollup_state`), else None.
        msg: Free-form message (``describe().msg``).
        num_restarts: Restarts of the app.
        structured_error_msg: JSON error reply of the app, or ``NONE``.
        ui_url: Where to look at the app.
        roles: The roles, as far as the backend can recover them.
        change_key: The key the backend notifies changes of this app under
            (default: ``app_id``).
        settled: False while a terminal app's last details (exit codes, the
            final pod status) are known to be on their way; ``wait`` gives
            them a moment to land. (Replicas that still run are not a
            detail: ``wait`` waits for them, see :attr:`stopped`.)
        native: The backend's own view of the app, handed back to its hooks.
    """

    app_id: str
    replicas: Sequence[ReplicaSnapshot]
    name: str = ""
    decided: AppState | None = None
    msg: str = NONE
    num_restarts: int = 0
    structured_error_msg: str = NONE
    ui_url: str | None = None
    roles: list[Role] = field(default_factory=list)
    change_key: str = ""
    settled: bool = True
    native: Any = field(default=None, repr=False, compare=False)

    @property
    def state(self) -> AppState:
        """The app state: the replicas rolled up (see ``rollup_state``)."""
        return rollup_state((r.state for r in self.replicas), self.decided)

    @property
    def terminal(self) -> bool:
        """True once the app state is terminal."""
        return is_terminal(self.state)

    @property
    def stopped(self) -> bool:
        """True once the app is terminal *and* none of its replicas still
        runs or waits to run: what ``wait`` returns.

        A cancelled or fail-fast app is terminal at once, while its replicas
        may still be in their SIGTERM grace; it is stopped only when each of
        them has ended. A replica whose outcome the engine lost (UNKNOWN) no
        longer runs.

        Example:
            >>> snap = AppSnapshot(
            ...     "app-1", [ReplicaSnapshot("trainer", 0, AppState.RUNNING)],
            ...     decided=AppState.CANCELLED)
            >>> snap.state, snap.stopped
            (CANCELLED (6), False)
        """
        return self.terminal and not any(r.live for r in self.replicas)

    def role_names(self) -> list[str]:
        """Role names in order of their first replica."""
        return list(dict.fromkeys(r.role for r in self.replicas))

    def replica(self, role: str, k: int) -> ReplicaSnapshot | None:
        """Replica ``k`` of ``role``, or None."""
        for r in self.replicas:
            if r.role == role and r.id == k:
                return r
        return None

    def role_statuses(self) -> list[RoleStatus]:
        """Per-role replica statuses, roles in order of their first replica."""
        roles: dict[str, list[ReplicaStatus]] = {}
        for r in self.replicas:
            roles.setdefault(r.role, []).append(r.status())
        return [RoleStatus(role, reps) for role, reps in roles.items()]

    def partial_roles(self, image: str = "") -> list[Role]:
        """Roles recovered from the replicas (name, ``image``, replica count)."""
        counts: dict[str, int] = {}
        for r in self.replicas:
            counts[r.role] = counts.get(r.role, 0) + 1
        return [Role(name=n, image=image, num_replicas=c) for n, c in counts.items()]
