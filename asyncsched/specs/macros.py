"""Placeholders substituted into a role's args, env and metadata at submit time."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, fields
from string import Template
from typing import Any

from ._copying import copy_value
from .app import Role
from .resources import NULL_RESOURCE

__all__ = ["macros"]

logger = logging.getLogger(__name__)

_SUBSTITUTED = ("args", "env", "metadata")


class macros:
    """Placeholders a scheduler replaces in ``Role.args``, ``Role.env`` values and
    strings inside ``Role.metadata``; ``image`` and ``entrypoint`` are never
    substituted. ``$$`` escapes a literal ``$``.

    Attributes:
        img_root: Local root directory of the fetched image.
        base_img_root: Deprecated.
        app_id: Id the scheduler gave the app.
        replica_id: Index of the replica within its role, as a string.
        rank0_env: *Name* of the env var holding the rank-0 host.

    Example:
        >>> values = macros.Values(img_root="/img", app_id="echo-1", replica_id="0",
        ...                        rank0_env="RANK0_HOST")
        >>> values.substitute("--id=${app_id} --host=$${" + macros.rank0_env + "}")
        '--id=echo-1 --host=${RANK0_HOST}'
    """

    img_root = "${img_root}"
    base_img_root = "${base_img_root}"
    app_id = "${app_id}"
    replica_id = "${replica_id}"
    rank0_env = "${rank0_env}"

    @dataclass
    class Values:
        """The values substituted for the placeholders of :class:`macros`."""

        img_root: str
        app_id: str
        replica_id: str
        rank0_env: str
        base_img_root: str = "DEPRECATED"

        def substitute(self, arg: str) -> str:
            """Replace ``$name``/``${name}`` placeholders in ``arg``.

            Unknown names are left alone and ``$$`` becomes ``$``.
            """
            if "$" not in arg:  # nothing to replace (most args and env values)
                return arg
            return Template(arg).safe_substitute(asdict(self))

        def apply(self, role: Role) -> Role:
            """Return a substituted deep copy of ``role``; ``role`` is not changed.

            Overrides are carried over to the copy unresolved (and therefore
            unsubstituted).
            """
            raw = vars(role)
            overrides: dict[str, Any] = raw["overrides"]
            pending = [name for name in _SUBSTITUTED if name in overrides]
            if pending:
                logger.warning(
                    "role %r overrides %s; macros are not substituted into overrides",
                    raw["name"],
                    pending,
                )
            # keep the shared NULL_RESOURCE shared
            memo: dict[int, Any] = {id(NULL_RESOURCE): NULL_RESOURCE}
            values = {
                f.name: copy_value(raw[f.name], memo)
                for f in fields(Role)
                if f.name != "overrides"
            }
            values["args"] = [self._sub(a) for a in values["args"]]
            values["env"] = {k: self._sub(v) for k, v in values["env"].items()}
            values["metadata"] = self._apply_nested(values["metadata"])
            return Role(**values, overrides=dict(overrides))

        def _sub(self, value: Any) -> Any:
            return self.substitute(value) if isinstance(value, str) else value

        def _apply_nested(self, d: dict[str, Any]) -> dict[str, Any]:
            result: dict[str, Any] = {}
            for key, value in d.items():
                if isinstance(value, dict):
                    result[key] = self._apply_nested(value)
                elif isinstance(value, list):
                    result[key] = [self._sub(v) for v in value]
                else:
                    result[key] = self._sub(value)
            return result
