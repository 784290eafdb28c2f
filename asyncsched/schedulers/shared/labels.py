"""The ``asyncsched.io/*`` label keys every container-based backend sets.

Docker containers and Kubernetes objects carry the same keys, so a user
selects an app's pieces the same way on both.

Example:
    >>> LABEL_APP_ID
    'asyncsched.io/app-id'
"""

from __future__ import annotations

__all__ = [
    "LABEL_APP_ID",
    "LABEL_APP_NAME",
    "LABEL_PREFIX",
    "LABEL_REPLICA_ID",
    "LABEL_ROLE_INDEX",
    "LABEL_ROLE_NAME",
    "LABEL_SESSION",
    "LABEL_VERSION",
]

LABEL_PREFIX = "asyncsched.io/"
LABEL_APP_ID = LABEL_PREFIX + "app-id"
LABEL_APP_NAME = LABEL_PREFIX + "app-name"
LABEL_ROLE_NAME = LABEL_PREFIX + "role-name"
LABEL_ROLE_INDEX = LABEL_PREFIX + "role-index"
LABEL_REPLICA_ID = LABEL_PREFIX + "replica-id"
LABEL_SESSION = LABEL_PREFIX + "session"
LABEL_VERSION = LABEL_PREFIX + "version"
