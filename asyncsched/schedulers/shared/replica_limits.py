"""How many replicas one app may ask of a backend, and rendering big apps off the loop.

A backend sets :attr:`Scheduler.replica_limits
<asyncsched.schedulers.api.Scheduler.replica_limits>` (or overrides
``_replica_limits(cfg)`` when the limit depends on a run option); the base
class checks every app against it right after validating it, before a
workspace is built or anything is rendered, so a ``num_replicas`` of 10⁶ is
refused in microseconds instead of rendering a million replicas. Apps with
more than :data:`OFF_LOOP_REPLICAS` replicas in total are rendered in a
worker thread (:func:`render_off_loop`), so the event loop keeps serving
other tasks while a big (allowed) app is rendered.

Example:
    >>> from asyncsched.specs import AppDef, Role
    >>> limits = ReplicaLimits(per_role=4, per_app=6, why="an example limit")
    >>> app = AppDef("a", roles=[Role("r", "img", num_replicas=5)])
    >>> limits.check(app, "demo")
    Traceback (most recent call last):
    ...
    asyncsched.errors.SpecError: roles[0].num_replicas: role 'r' asks for 5 replicas; the demo scheduler runs at most 4 per role (an example limit)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

import anyio

from asyncsched.errors import SpecError
from asyncsched.specs import AppDef

__all__ = ["OFF_LOOP_REPLICAS", "ReplicaLimits", "render_off_loop", "total_replicas"]

#: apps with more replicas than this (in total) are rendered in a worker thread
OFF_LOOP_REPLICAS = 64

_P = ParamSpec("_P")
_R = TypeVar("_R")


@dataclass(frozen=True)
class ReplicaLimits:
    """The most replicas a backend accepts per role and per app (all roles).

    ``why`` says where the numbers come from; it ends the error message.
    """

    per_role: int
    per_app: int
    why: str

    def check(self, app: AppDef, backend: str) -> None:
        """Refuse ``app`` when a role, or the app in total, asks for too many.

        Raises:
            SpecError: naming the role (or ``roles`` for the total), the count
                asked for and the maximum.
        """
        for index, role in enumerate(app.roles):
            if role.num_replicas > self.per_role:
                raise SpecError(
                    f"roles[{index}].num_replicas",
                    f"role {role.name!r} asks for {role.num_replicas} replicas; the"
                    f" {backend} scheduler runs at most {self.per_role} per role"
                    f" ({self.why})",
                )
        total = total_replicas(app)
        if total > self.per_app:
            counts = ", ".join(f"{r.name}: {r.num_replicas}" for r in app.roles)
            raise SpecError(
                "roles",
                f"the app asks for {total} replicas in total ({counts}); the"
                f" {backend} scheduler runs at most {self.per_app} per app"
                f" ({self.why})",
            )


def total_replicas(app: AppDef) -> int:
    """The number of replicas of every role of ``app``.

    Example:
        >>> from asyncsched.specs import AppDef, Role
        >>> total_replicas(AppDef("a", roles=[Role("r", "i", num_replicas=3)] * 2))
        6
    """
    return sum(role.num_replicas for role in app.roles)


async def render_off_loop(
    app: AppDef, render: Callable[_P, _R], *args: _P.args, **kwargs: _P.kwargs
) -> _R:
    """``render(*args, **kwargs)``, in a worker thread when ``app`` is big.

    For pure, CPU-bound renderers (no I/O, no event-loop objects) whose cost
    grows with the number of replicas; small apps are rendered inline, where
    a thread hop would cost more than the work.

    Example:
        >>> async def demo(app: AppDef) -> int:
        ...     return await render_off_loop(app, total_replicas, app)
    """
    if total_replicas(app) <= OFF_LOOP_REPLICAS:
        return render(*args, **kwargs)
    return await anyio.to_thread.run_sync(functools.partial(render, *args, **kwargs))
