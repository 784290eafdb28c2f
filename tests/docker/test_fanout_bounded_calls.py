"""Many Docker apps through the Runner: every container runs, is awaited and
removed, and the scheduler never has more Engine API calls in flight than its
``max_concurrency``.

Six times as many apps as the bound are submitted, awaited and deleted at
once, so every step queues at the bound (the test checks that the load did
reach it); each more app would only add the daemon's container start-up.

The calls are counted where they arrive: at a real unix-socket proxy in front
of the private daemon, which records how many connections are open at once.
aiohttp reuses an idle pooled connection before it opens a new one, so the
most connections open at once is at least the most requests in flight.
"""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import Any

import aiodocker
import anyio
import pytest

from asyncsched.runner import Runner
from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.specs import AppState

from .conftest import NETWORK, SESSION, SESSION_LABEL, Engine
from .helpers import DropProxy, sh_app

pytestmark = [pytest.mark.docker, pytest.mark.timeout(600)]

BOUND = 4
APPS = 6 * BOUND
# besides the scheduler's calls: the events stream and the watcher's own
# inspect of a container that just died (one at a time)
WATCHER_CONNECTIONS = 2


class PeakProxy(DropProxy):
    """The drop proxy, also recording the most client connections open at once."""

    def __init__(self, target: str, path: Path) -> None:
        super().__init__(target, path)
        self.open = 0
        self.peak = 0
        self.accepted = 0

    async def _handle(self, client: Any) -> None:
        self.open += 1
        self.accepted += 1
        self.peak = max(self.peak, self.open)
        try:
            await super()._handle(client)
        finally:
            self.open -= 1


async def test_apps_run_at_once_are_awaited_and_removed_within_the_call_bound(
    swept: Engine, raw_docker: aiodocker.Docker, tmp_path: Path
) -> None:
    proxy = PeakProxy(swept.host, tmp_path / "proxy.sock")
    schedulers: builtins.list[DockerScheduler] = []

    def factory(session_name: str, **kwargs: Any) -> DockerScheduler:
        sched = DockerScheduler(session_name, **kwargs)
        schedulers.append(sched)
        return sched

    apps = [sh_app(f"echo ran-{i}", name=f"fan{i}") for i in range(APPS)]
    async with anyio.create_task_group() as tg:
        await proxy.serve(tg)
        async with Runner(
            SESSION,
            scheduler_factories={"docker": factory},
            scheduler_params={
                "docker_host": proxy.url,
                "network": NETWORK,
                "max_concurrency": BOUND,
            },
        ) as runner:
            handles = await runner.run_many(apps, "docker")
            assert len(set(handles)) == APPS
            statuses = await runner.wait_all(handles, timeout=480)
            assert [s.state if s else None for s in statuses.values()] == [
                AppState.SUCCEEDED
            ] * APPS
            [sched] = schedulers
            app_ids = [h.rsplit("/", 1)[-1] for h in handles]
            # every container ran to its end: exit code 0 recorded by the daemon
            for app_id in app_ids:
                desc = await sched.describe(app_id)
                assert desc is not None
                [role] = desc.roles_statuses
                assert [r.exit_code for r in role.replicas] == [0], app_id
            async with anyio.create_task_group() as deletes:
                for app_id in app_ids:
                    deletes.start_soon(sched.delete, app_id)
            for app_id in app_ids:
                assert await sched.describe(app_id) is None
        tg.cancel_scope.cancel()

    left = await raw_docker.containers.list(
        all=True, filters={"label": [SESSION_LABEL]}
    )
    assert left == []
    assert proxy.accepted > 0
    assert proxy.peak >= BOUND, f"the load never reached the bound: {proxy.peak}"
    assert proxy.peak <= BOUND + WATCHER_CONNECTIONS, (
        f"{proxy.peak} connections to the daemon at once, bound {BOUND}"
    )
