"""On a cluster without Volcano: ``indexed`` apps work, ``volcano`` says what to do."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from asyncsched.errors import SubmitError
from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler
from asyncsched.specs import AppState, StatusReason

from .fakeapi import FakeKubeServer
from .fakeapi.controller import FakeController
from .helpers import make_app

NS = "no-volcano"


@pytest.fixture
async def plain_cluster(tmp_path: Path) -> AsyncIterator[str]:
    """A fake API server that serves no Volcano CRD, with the Job controller."""
    async with FakeKubeServer(volcano=False, bookmark_interval=0.2) as server:
        server.create_namespace(NS)
        kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig", namespace=NS))
        async with FakeController(kubeconfig, NS, volcano=False):
            yield kubeconfig


async def test_indexed_apps_run_and_volcano_ones_are_refused_clearly(
    plain_cluster: str,
) -> None:
    async with KubernetesScheduler("t", kubeconfig=plain_cluster) as sched:
        app_id = await sched.submit(
            make_app("echo hi", replicas=2), {"namespace": NS, "job_api": "indexed"}
        )
        desc = await sched.wait(app_id, timeout=20)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
        assert [r.app_id for r in await sched.list()] == [app_id]
        assert await sched.describe(f"{NS}:no-such-app") is None
        with pytest.raises(SubmitError, match="job_api=indexed"):
            await sched.submit(make_app("echo hi"), {"namespace": NS, "queue": "q"})


@pytest.fixture
async def no_controller(tmp_path: Path) -> AsyncIterator[str]:
    """A fake API server serving the Volcano CRD with no controller at all."""
    async with FakeKubeServer(bookmark_interval=0.2) as server:
        server.create_namespace(NS)
        yield str(server.write_kubeconfig(tmp_path / "kubeconfig", namespace=NS))


async def test_a_volcano_job_no_controller_acts_on_says_so(no_controller: str) -> None:
    """The CRD is served but nothing runs Volcano: after the bound the app
    still reads SUBMITTED, and says why instead of waiting without a word."""
    now = [time.time()]
    async with KubernetesScheduler(
        "t", kubeconfig=no_controller, wall_clock=lambda: now[0]
    ) as sched:
        app_id = await sched.submit(
            make_app("echo hi", replicas=2), {"namespace": NS, "queue": "default"}
        )
        desc = await sched.describe(app_id)
        assert desc is not None
        assert desc.state == AppState.SUBMITTED
        assert "Volcano" not in desc.msg  # not yet: a controller may be slow
        # the default bound is 60 s from the Job's creation, which a loaded
        # machine may stamp a few seconds after ``now`` was first read
        now[0] = time.time() + 61
        desc = await sched.describe(app_id)
        assert desc is not None
        assert desc.state == AppState.SUBMITTED
        assert "no Volcano controller" in desc.msg
        assert "volcano-system" in desc.msg
        replicas = desc.roles_statuses[0].replicas
        assert [r.reason for r in replicas] == [StatusReason.UNSCHEDULABLE] * 2
        assert all("Volcano controller" in r.message for r in replicas)
