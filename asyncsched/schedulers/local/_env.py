"""Environment and PATH composition for replica processes (TorchX rules).

Example:
    >>> join_PATH("/a:", None, ":/b")
    '/a:/b'
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from asyncsched.schedulers.shared.identity import IDENTITY_VARS, RANK0_ENV, identity_env

__all__ = [
    "IDENTITY_VARS",
    "RANK0_ENV",
    "child_env",
    "join_PATH",
    "replica_env",
    "role_PATH",
]


def join_PATH(*parts: str | None) -> str:
    """Join PATH fragments with ``os.pathsep``, skipping empty ones.

    Leading and trailing separators of each fragment are stripped first.
    """
    stripped = (p.strip(os.pathsep) for p in parts if p)
    return os.pathsep.join(p for p in stripped if p)


def role_PATH(
    role_path: str | None,
    extra_paths: list[str],
    cwd: str | None,
    prepend_cwd: bool,
) -> str:
    """The PATH a role's replicas get in the request: ``[cwd:]extra:role[:cwd]``."""
    path = join_PATH(*extra_paths, role_path)
    if cwd:
        path = join_PATH(cwd, path) if prepend_cwd else join_PATH(path, cwd)
    return path


def replica_env(
    role_env: Mapping[str, str],
    *,
    app_id: str,
    role_name: str,
    replica_id: int,
    num_replicas: int,
    replica_log_dir: str,
    app_log_dir: str,
) -> dict[str, str]:
    """The env of one replica as the request shows it (before the parent env).

    The role env (already macro-substituted) wins over the torchelastic
    defaults; the rank-0 host and identity variables are always set.
    """
    env = dict(role_env)
    env[RANK0_ENV] = "localhost"
    env.setdefault(
        "TORCHELASTIC_ERROR_FILE", os.path.join(replica_log_dir, "error.json")
    )
    env.setdefault("PET_LOG_DIR", os.path.join(app_log_dir, "torchelastic", role_name))
    env.update(identity_env(app_id, role_name, replica_id, num_replicas))
    return env


def child_env(
    request_env: Mapping[str, str], parent_env: Mapping[str, str]
) -> dict[str, str]:
    """The full env a replica process starts with.

    The parent env is inherited and overlaid with the request env; PATH is the
    request PATH followed by the parent PATH; ``PYTHONUNBUFFERED=x`` unless set.
    """
    env = dict(parent_env)
    env.update(request_env)
    env["PATH"] = join_PATH(request_env.get("PATH"), parent_env.get("PATH"))
    env.setdefault("PYTHONUNBUFFERED", "x")
    return env
