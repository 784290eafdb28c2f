"""Replica expansion shared by every backend: one role becomes N replica specs.

Each replica gets its own macro-substituted copy of the role (``args``,
``env`` values, ``metadata`` strings; see :class:`asyncsched.specs.macros`) and
the identity variables of :mod:`asyncsched.schedulers.shared.identity`. A
backend adds only what is its own (PATH, log dirs, rank-0 host value, ...).

Example:
    >>> from asyncsched.specs import AppDef, Role
    >>> app = AppDef("a", roles=[Role("r", image="i", args=["${replica_id}"], num_replicas=2)])
    >>> [r.role.args for r in expand_replicas(app, "a-1")]
    [['0'], ['1']]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from asyncsched.schedulers.shared.identity import RANK0_ENV, identity_env
from asyncsched.specs import AppDef, Role, macros

__all__ = ["ReplicaSpec", "expand_replicas", "expand_role"]


@dataclass(frozen=True)
class ReplicaSpec:
    """One replica of one role, ready for a backend to render.

    Attributes:
        role_index: Position of the role in ``AppDef.roles``.
        replica_id: Index of the replica within its role.
        role: The role with macros substituted for this replica (a copy).
        template: The role as the user gave it (not a copy: do not mutate).
        identity: The identity variables (``ASYNCSCHED_APP_ID``, ...).
        values: The macro values of this replica, for backend strings that
            macros also apply to (e.g. the local PATH).
    """

    role_index: int
    replica_id: int
    role: Role
    template: Role
    identity: dict[str, str]
    values: macros.Values

    @property
    def env(self) -> dict[str, str]:
        """The role's substituted env overlaid with the identity variables."""
        return {**self.role.env, **self.identity}


def expand_role(
    app_id: str,
    role: Role,
    *,
    role_index: int = 0,
    img_root: str = "",
    rank0_env: str = RANK0_ENV,
) -> list[ReplicaSpec]:
    """Expand one role into ``role.num_replicas`` :class:`ReplicaSpec`."""
    specs = []
    for replica_id in range(role.num_replicas):
        values = macros.Values(
            img_root=img_root,
            app_id=app_id,
            replica_id=str(replica_id),
            rank0_env=rank0_env,
        )
        specs.append(
            ReplicaSpec(
                role_index=role_index,
                replica_id=replica_id,
                role=values.apply(role),
                template=role,
                identity=identity_env(app_id, role.name, replica_id, role.num_replicas),
                values=values,
            )
        )
    return specs


def expand_replicas(
    app: AppDef,
    app_id: str,
    *,
    img_root: Callable[[int, Role], str] | str = "",
    rank0_env: str = RANK0_ENV,
) -> Iterator[ReplicaSpec]:
    """Every replica of every role of ``app``, role by role.

    ``img_root`` is a string, or a function of ``(role_index, role)`` for
    backends whose image root differs per role (the local backend).
    """
    for index, role in enumerate(app.roles):
        root = img_root(index, role) if callable(img_root) else img_root
        yield from expand_role(
            app_id, role, role_index=index, img_root=root, rank0_env=rank0_env
        )
