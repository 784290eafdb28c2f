"""The Scheduler conformance suite against the real Docker engine."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.testing import ContractTarget, SchedulerContract

from .conftest import NETWORK, SESSION, TEST_IMAGE, Engine, sweep

pytestmark = pytest.mark.docker


class TestDockerContract(SchedulerContract):
    capabilities = DockerScheduler.capabilities  # asyncio only (aiodocker)

    @pytest.fixture
    async def target(self, docker_ready: Engine) -> AsyncIterator[ContractTarget]:
        # a grace well over the contract traps' second: a trap cut at its last
        # line would read as killed (137) though it ran
        sched = DockerScheduler(SESSION, network=NETWORK, stop_timeout=3)
        try:
            yield ContractTarget(
                sched,
                cfg={},
                image=TEST_IMAGE,
                quick_timeout=30,
                registry_name="local_docker",
            )
        finally:
            await sched.aclose()
            await sweep(docker_ready.host)
