"""The Scheduler conformance suite against a real (private) Slurm cluster."""

from __future__ import annotations

import pytest

from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.testing import ContractTarget, SchedulerContract

from .cluster import Cluster

pytestmark = pytest.mark.slurm


class TestSlurmContract(SchedulerContract):
    capabilities = SlurmScheduler.capabilities
    # asyncio and trio, one per test cluster (see conftest.anyio_backend)
    event_loops_from_fixture = True

    @pytest.fixture
    async def target(
        self, slurm: SlurmScheduler, slurm_cluster: Cluster
    ) -> ContractTarget:
        # the job-completion log may lose a replica's own code; accounting keeps it
        return ContractTarget(
            slurm,
            cfg={},
            image="/",
            quick_timeout=30,
            registry_name="slurm",
            independent_replicas=slurm_cluster.accounting,
            # cancel signals the replicas' steps, never srun, and fail-fast
            # is the replicas' wrapper's (no srun --kill-on-bad-exit), which
            # a cancel turns off: every trap runs to its end
            cancel_grace_kept=True,
        )
