"""Apps and runners shared by the runner, sync and CLI tests."""

from __future__ import annotations

from typing import Any

import anyio

from asyncsched.runner import Runner
from asyncsched.schedulers import SchedulerFactory
from asyncsched.schedulers.api import Scheduler
from asyncsched.specs import AppDef, AppDryRunInfo, Resource, Role
from asyncsched.testing import InMemoryScheduler, create_scheduler


def sh_app(
    script: str, *, name: str = "app", replicas: int = 1, role: str = "worker"
) -> AppDef:
    """An app whose replicas run ``sh -c script`` (in-memory or local)."""
    return AppDef(
        name=name,
        roles=[
            Role(
                name=role,
                image="/",
                entrypoint="sh",
                args=["-c", script],
                num_replicas=replicas,
                resource=Resource(cpu=1, gpu=0, memMB=64),
            )
        ],
        metadata={"owner": "tests"},
    )


class CountingFactory:
    """An in-memory scheduler factory that remembers what it built."""

    def __init__(self) -> None:
        self.built: list[Scheduler[Any]] = []

    def __call__(self, session_name: str, **kwargs: Any) -> Scheduler[Any]:
        sched = create_scheduler(session_name, **kwargs)
        self.built.append(sched)
        return sched


def inmemory_runner(name: str = "test", **kwargs: Any) -> Runner:
    factories: dict[str, SchedulerFactory] = {"inmemory": create_scheduler}
    return Runner(name, factories, **kwargs)


def fixed(sched: Scheduler[Any]) -> SchedulerFactory:
    """A factory that always returns ``sched``."""

    def factory(session_name: str, **kwargs: Any) -> Scheduler[Any]:
        return sched

    return factory


class GatedScheduler(InMemoryScheduler):  # type: ignore[misc]
    """An in-memory scheduler whose submits wait until :attr:`release` is set,
    counting how many wait at once (:attr:`active`, at the most :attr:`peak`)."""

    def __init__(self, session_name: str, **kwargs: Any) -> None:
        super().__init__(session_name, **kwargs)
        self.active = 0
        self.peak = 0
        self.release = anyio.Event()

    async def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        self.active += 1
        self.peak = max(self.peak, self.active)
        await self.release.wait()
        self.active -= 1
        return await super().schedule(dryrun_info)
