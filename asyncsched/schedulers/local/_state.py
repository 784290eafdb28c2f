"""The retry decisions of local apps (pure functions).

The app state is the replicas rolled up by :func:`asyncsched.specs.rollup_state`
with the app-level outcome ``LocalApp.decided()``: CANCELLED once cancelled,
FAILED as soon as a replica fails for good when ``fail_fast``.

Retries (TorchX ignores them locally; asyncsched honours them): a replica of a
role with ``max_retries = n`` that exits non-zero restarts, by the role's
``retry_policy``: REPLICA restarts that replica (at most n times per replica),
ROLE restarts every replica of the role (at most n times per role),
APPLICATION restarts every replica of the app (at most n times per app).

Example:
    >>> counters = RetryCounters()
    >>> decide_retry("REPLICA", 1, counters, "trainer", 0)
    <RetryAction.RESTART_REPLICA: 'restart_replica'>
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from asyncsched.specs import RetryPolicy

__all__ = ["RetryAction", "RetryCounters", "decide_retry"]


class RetryAction(enum.Enum):
    """What to do about a replica that exited non-zero."""

    RESTART_REPLICA = "restart_replica"
    RESTART_ROLE = "restart_role"
    RESTART_APP = "restart_app"
    FAIL = "fail"


@dataclass
class RetryCounters:
    """Retries used so far, per replica, per role and for the app."""

    replica: dict[tuple[str, int], int] = field(default_factory=dict)
    role: dict[str, int] = field(default_factory=dict)
    app: int = 0


def decide_retry(
    policy: RetryPolicy | str,
    max_retries: int,
    counters: RetryCounters,
    role: str,
    replica_id: int,
) -> RetryAction:
    """Choose the action for a failure of ``role``/``replica_id`` and count it."""
    policy = RetryPolicy(policy)
    if policy == RetryPolicy.REPLICA:
        used = counters.replica.get((role, replica_id), 0)
        if used < max_retries:
            counters.replica[(role, replica_id)] = used + 1
            return RetryAction.RESTART_REPLICA
    elif policy == RetryPolicy.ROLE:
        used = counters.role.get(role, 0)
        if used < max_retries:
            counters.role[role] = used + 1
            return RetryAction.RESTART_ROLE
    elif counters.app < max_retries:
        counters.app += 1
        return RetryAction.RESTART_APP
    return RetryAction.FAIL
