"""The Scheduler conformance suite against the Kubernetes backend, both job APIs."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler
from asyncsched.testing import ContractTarget, SchedulerContract

from .fakeapi.controller import FakeController
from .fakeapi.env import KubeEnv
from .helpers import IMAGE, JOB_APIS, cfg_for, scheduler


class TestKubernetesContract(SchedulerContract):
    # asyncio only: kubernetes_asyncio (aiohttp)
    capabilities = KubernetesScheduler.capabilities

    @pytest.fixture(params=JOB_APIS)
    async def target(
        self,
        request: pytest.FixtureRequest,
        kube_env: KubeEnv,
        kube_controller: FakeController,
    ) -> AsyncIterator[ContractTarget]:
        if not kube_env.logs_available and "log" in request.node.name:
            pytest.skip("pods cannot run on this API server (no fake kubelet)")
        async with scheduler(kube_env) as sched:
            yield ContractTarget(
                sched,
                cfg=cfg_for(kube_env, request.param),
                image=IMAGE,
                # a cancelled pod whose PID 1 ignores SIGTERM lives out its
                # 30 s grace on a real kubelet
                quick_timeout=120 if kube_env.real else 20,  # one 2-core node, shared
                registry_name="kubernetes",
                # the fake kubelet's shell has no trap (a real busybox does)
                posix_shell=kube_env.real,
                # 1.20's kubelet reports 137 (ContainerStatusUnknown) for the
                # container of a deleted pod, whatever it exited with
                stop_codes_kept=not kube_env.real,
            )
