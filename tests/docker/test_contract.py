"""The Scheduler conformance suite against the real Docker engine."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.testing import ContractTarget, SchedulerContract

from .conftest import NETWORK, SESSION, TEST_IMAGE, Engine, sweep

pytestmark = pytest.mark.docker

#: the cases about the stop grace itself get a grace well over the traps'
#: second (a trap cut at its last line would read as killed, 137, though it
#: ran) and over the 2 s a cancel may take (a cancel that blocked for the
#: grace must show); in the others the grace only delays the SIGKILL of
#: replicas that ignore SIGTERM, which 1 s does as well
GRACE_CASES = {
    "test_wait_after_cancel_waits_out_the_replicas_grace": 3,
    "test_cancel_returns_promptly_while_replicas_ignore_term": 3,
}


class TestDockerContract(SchedulerContract):
    capabilities = DockerScheduler.capabilities  # asyncio only (aiodocker)

    @pytest.fixture
    async def target(
        self, docker_ready: Engine, request: pytest.FixtureRequest
    ) -> AsyncIterator[ContractTarget]:
        grace = GRACE_CASES.get(request.node.originalname, 1)
        sched = DockerScheduler(SESSION, network=NETWORK, stop_timeout=grace)
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


def test_the_long_grace_goes_to_contract_cases_that_exist() -> None:
    """A renamed case would silently get the short grace: it must not."""
    for name in GRACE_CASES:
        assert callable(getattr(TestDockerContract, name, None)), name
