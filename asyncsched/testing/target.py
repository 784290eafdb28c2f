"""What the contract runs against: an open scheduler and how to make apps for it."""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from asyncsched.errors import InvalidArgumentError
from asyncsched.schedulers.api import Scheduler
from asyncsched.specs import AppDef, CfgVal, Resource, Role

__all__ = ("ContractTarget",)


@dataclass
class ContractTarget:
    """An open scheduler under test and how to make apps for it.

    Example:
        >>> from asyncsched.testing import ContractTarget, InMemoryScheduler
        >>> target = ContractTarget(InMemoryScheduler("demo"), posix_shell=False)
        >>> target.app("echo hi").roles[0].args
        ['-c', 'echo hi']
    """

    scheduler: Scheduler[Any]
    cfg: dict[str, CfgVal] = field(default_factory=dict)
    image: str = "/"
    #: seconds a "quick" app may take end to end on this backend
    quick_timeout: float = 30.0
    #: False when the engine may lose a replica's own outcome (Slurm with only
    #: the job-completion log): that replica may then read UNKNOWN, never a
    #: wrong state
    independent_replicas: bool = True
    #: False when replicas do not run a POSIX shell (the in-memory scheduler):
    #: the cases that need ``trap`` and ``wait`` do not apply
    posix_shell: bool = True
    #: False when the engine may report another exit code than the one a
    #: replica stopped by a cancel exited with (Kubernetes 1.20's kubelet
    #: says 137 ``ContainerStatusUnknown`` for the container of a deleted pod)
    stop_codes_kept: bool = True
    #: False when a cancel may stop a replica without its SIGTERM grace
    #: (Slurm: ``scancel`` also signals ``srun``, which may end a step before
    #: the replica's trap runs; the engine then keeps no exit code or SIGKILL's):
    #: the grace case then checks only the replicas whose trap ran
    cancel_grace_kept: bool = True
    #: for a backend whose replicas are processes of this machine: the
    #: replica processes still running (e.g. their pids); the close cases
    #: check that none is left once ``aclose`` returned. None: not checked
    replica_processes: Callable[[], Awaitable[builtins.list[int]]] | None = None
    #: the name the scheduler is registered under (``local_cwd``,
    #: ``local_docker``...): the scheme of the handles its errors must name.
    #: None: only checked to be the scheduler's ``handle_name``
    registry_name: str | None = None
    #: the step, in seconds, of the times a backend's log ``since``/``until``
    #: compare: 1.0 for an engine that keeps whole seconds. The since/until
    #: case writes two lines 4 steps apart and cuts between them one step
    #: after it saw the first, so a backend with finer times (the local and
    #: in-memory ones) may give a smaller step: the case then ends sooner.
    #: Its reader must see a line within 3 steps of its being written.
    log_time_step: float = 1.0

    def __post_init__(self) -> None:
        if not self.log_time_step > 0:
            raise InvalidArgumentError(
                "ContractTarget.log_time_step must be more than 0 seconds,"
                f" not {self.log_time_step!r}"
            )

    def app(self, script: str, *, name: str = "app", replicas: int = 1) -> AppDef:
        """An app of one role ``worker`` running ``sh -c script`` per replica."""
        role = Role(
            name="worker",
            image=self.image,
            entrypoint="sh",
            args=["-c", script],
            num_replicas=replicas,
            resource=Resource(cpu=1, gpu=0, memMB=128),
        )
        return AppDef(name=name, roles=[role])

    def roles_app(self, scripts: dict[str, str], *, name: str = "app") -> AppDef:
        """An app of one single-replica role per ``{role name: script}``."""
        app = AppDef(name=name)
        for role_name, script in scripts.items():
            [role] = self.app(script).roles
            role.name = role_name
            app.roles.append(role)
        return app

    async def run(self, script: str, **kwargs: Any) -> str:
        """Submit :meth:`app` of ``script``; return the app id."""
        return await self.scheduler.submit(self.app(script, **kwargs), self.cfg)

    def handle(self, app_id: str) -> str:
        """The full handle errors name: ``handle_name://session/app_id``, the
        scheduler's registry name as its scheme."""
        sched = self.scheduler
        return f"{sched.handle_name}://{sched.session_name}/{app_id}"
