"""Environment variables that tell a replica who it is (every backend sets them).

TorchX passes identity only through macros (``${replica_id}``); asyncsched also
sets these variables in every replica, on every backend.

Example:
    >>> identity_env("app-x", "trainer", 1, 4)["ASYNCSCHED_REPLICA_ID"]
    '1'
"""

from __future__ import annotations

__all__ = [
    "ENV_APP_ID",
    "ENV_NUM_REPLICAS",
    "ENV_REPLICA_ID",
    "ENV_ROLE_NAME",
    "IDENTITY_VARS",
    "RANK0_ENV",
    "identity_env",
]

#: the env var whose *name* ``${rank0_env}`` expands to (TorchX's)
RANK0_ENV = "TORCHX_RANK0_HOST"

ENV_APP_ID = "ASYNCSCHED_APP_ID"
ENV_ROLE_NAME = "ASYNCSCHED_ROLE_NAME"
ENV_REPLICA_ID = "ASYNCSCHED_REPLICA_ID"
ENV_NUM_REPLICAS = "ASYNCSCHED_NUM_REPLICAS"
IDENTITY_VARS = (ENV_APP_ID, ENV_ROLE_NAME, ENV_REPLICA_ID, ENV_NUM_REPLICAS)


def identity_env(
    app_id: str, role_name: str, replica_id: int, num_replicas: int
) -> dict[str, str]:
    """The identity variables of replica ``replica_id`` of ``role_name``."""
    return {
        ENV_APP_ID: app_id,
        ENV_ROLE_NAME: role_name,
        ENV_REPLICA_ID: str(replica_id),
        ENV_NUM_REPLICAS: str(num_replicas),
    }
