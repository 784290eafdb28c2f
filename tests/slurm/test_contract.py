"""The Scheduler conformance suite against a real (private) Slurm cluster."""

from __future__ import annotations

import pytest

from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.testing import ContractTarget, SchedulerContract

pytestmark = pytest.mark.slurm


class TestSlurmContract(SchedulerContract):
    @pytest.fixture
    async def target(self, slurm: SlurmScheduler) -> ContractTarget:
        return ContractTarget(
            slurm, cfg={}, image="/", quick_timeout=30, independent_replicas=False
        )
