"""The ``asyncsched.io/*`` label keys every container-based backend sets.

Docker containers and Kubernetes objects carry the same keys, so a user
selects an app's pieces the same way on both.

Example:
    >>> LABEL_APP_ID
    'asyncsched.io/app-id'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "LABEL_APP_ID",
    "LABEL_APP_NAME",
    "LABEL_PREFIX",
    "LABEL_REPLICA_ID",
    "LABEL_ROLE_INDEX",
    "LABEL_ROLE_NAME",
    "LABEL_SESSION",
    "LABEL_VERSION",
    "ReplicaLabels",
]

LABEL_PREFIX = "asyncsched.io/"
LABEL_APP_ID = LABEL_PREFIX + "app-id"
LABEL_APP_NAME = LABEL_PREFIX + "app-name"
LABEL_ROLE_NAME = LABEL_PREFIX + "role-name"
LABEL_ROLE_INDEX = LABEL_PREFIX + "role-index"
LABEL_REPLICA_ID = LABEL_PREFIX + "replica-id"
LABEL_SESSION = LABEL_PREFIX + "session"
LABEL_VERSION = LABEL_PREFIX + "version"


@dataclass
class ReplicaLabels:
    """Which replica of which app an object is: written as labels, read back.

    Example:
        >>> ids = ReplicaLabels("app-1", "app", "trainer", 0, 2, "demo")
        >>> ReplicaLabels.read(ids.labels(version="1.0")) == ids
        True
    """

    app_id: str
    app_name: str
    role: str
    role_index: int
    replica_id: int
    session: str

    def labels(self, version: str) -> dict[str, str]:
        """The labels of the replica (values as Docker takes them, unsanitized)."""
        return {
            LABEL_APP_ID: self.app_id,
            LABEL_APP_NAME: self.app_name,
            LABEL_ROLE_NAME: self.role,
            LABEL_ROLE_INDEX: str(self.role_index),
            LABEL_REPLICA_ID: str(self.replica_id),
            LABEL_SESSION: self.session,
            LABEL_VERSION: version,
        }

    @classmethod
    def read(cls, labels: Mapping[str, str]) -> ReplicaLabels | None:
        """Read the labels back; None if they are not an asyncsched replica's."""
        try:
            return ReplicaLabels(
                app_id=labels[LABEL_APP_ID],
                app_name=labels.get(LABEL_APP_NAME, ""),
                role=labels[LABEL_ROLE_NAME],
                role_index=int(labels.get(LABEL_ROLE_INDEX, "0")),
                replica_id=int(labels[LABEL_REPLICA_ID]),
                session=labels.get(LABEL_SESSION, ""),
            )
        except (KeyError, ValueError):
            return None
