"""Fixtures for the Slurm backend tests: a real private cluster, never a mock.

``slurm_cluster`` (session-scoped) starts ``munged``, ``slurmctld`` and two
``slurmd`` (logical nodes ``n1``/``n2`` on this host) from a configuration
written into a temp dir (see :mod:`tests.slurm.cluster`), waits until ``sinfo``
shows the nodes idle, and stops everything it started at the end. Without
Slurm (not root, or not Debian, so ``provision.sh`` installed nothing) the
tests skip -- or fail when ``CI`` is set or ``ASYNCSCHED_REQUIRE_SLURM=1``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.specs import AppDef, Resource, Role

from .cluster import Cluster, ClusterError, missing_binaries, start_cluster


def _required() -> bool:
    return (
        bool(os.environ.get("CI")) or os.environ.get("ASYNCSCHED_REQUIRE_SLURM") == "1"
    )


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[Cluster]:
    """A running private Slurm cluster (session-wide)."""
    missing = missing_binaries()
    if missing or os.geteuid() != 0:
        reason = (
            f"not installed: {', '.join(missing)} (run tests/slurm/provision.sh as root)"
            if missing
            else "the test cluster runs its daemons as root"
        )
        if _required():
            pytest.fail(f"Slurm required (CI / ASYNCSCHED_REQUIRE_SLURM): {reason}")
        pytest.skip(f"no Slurm: {reason}")
    try:
        cluster = start_cluster()
    except ClusterError as exc:
        pytest.fail(f"could not start the Slurm test cluster: {exc}")
    try:
        yield cluster
    finally:
        cluster.stop()


@dataclass
class AgedApps:
    """Apps submitted when the cluster starts, so that by the time the test
    that needs them runs they may have left the controller (``MinJobAge``)."""

    state_dir: Path
    work_dir: Path
    ok: str
    failed: str


def _quick_app(name: str, script: str, replicas: int) -> AppDef:
    role = Role(
        "worker",
        image="/",
        entrypoint="sh",
        args=["-c", script],
        num_replicas=replicas,
        resource=Resource(cpu=1, gpu=0, memMB=64),
    )
    return AppDef(name, roles=[role])


@pytest.fixture(scope="session")
def aged_apps(
    slurm_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> AgedApps:
    """Two apps: two replicas that succeed; one replica that exits 3."""
    root = tmp_path_factory.mktemp("aged")

    async def submit() -> tuple[str, str]:
        async with SlurmScheduler(
            "pytest", slurm_conf=str(slurm_cluster.conf), state_dir=str(root / "state")
        ) as sched:
            cfg = {"job_dir": str(root / "ok")}
            ok = await sched.submit(_quick_app("aged-ok", "echo done", 2), cfg)
            cfg = {"job_dir": str(root / "failed")}
            # one replica: with two, --kill-on-bad-exit may SIGTERM the second
            # before it exits 3 itself, and its code would then be 143
            failed = await sched.submit(_quick_app("aged-failed", "exit 3", 1), cfg)
            return ok, failed

    ok, failed = anyio.run(submit)
    return AgedApps(root / "state", root, ok, failed)


@pytest.fixture
async def slurm(
    slurm_cluster: Cluster,
    aged_apps: AgedApps,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[SlurmScheduler]:
    """A scheduler on the test cluster; jobs run (and log) in ``tmp_path``.

    (It starts ``aged_apps`` early, for the test of finished-job records.)
    """
    monkeypatch.chdir(tmp_path)
    async with SlurmScheduler(
        "pytest",
        slurm_conf=str(slurm_cluster.conf),
        state_dir=str(tmp_path / "state"),
        min_interval=0.2,
        max_interval=1.0,
    ) as sched:
        yield sched
