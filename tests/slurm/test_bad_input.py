"""Bad input is a clear asyncsched error before anything is submitted."""

from __future__ import annotations

from pathlib import Path

import pytest

from asyncsched.errors import (
    InvalidRunConfigException,
    SchedulerUnavailableError,
    SpecError,
    SubmitError,
)
from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.specs import AppDef, Resource, Role

from .cluster import Cluster, missing_binaries

pytestmark = pytest.mark.anyio  # on both loops: see conftest.anyio_backend


def _app() -> AppDef:
    role = Role(
        "worker",
        image="/",
        entrypoint="echo",
        args=["never"],
        resource=Resource(cpu=1, gpu=0, memMB=64),
    )
    return AppDef("bad", roles=[role])


async def test_invalid_time_is_rejected_without_running_a_command(
    tmp_path: Path,
) -> None:
    async with SlurmScheduler("t", state_dir=str(tmp_path)) as sched:
        with pytest.raises(InvalidRunConfigException) as info:
            await sched.submit(_app(), {"time": "1 hour"})
        assert info.value.cfg_key == "time"
        assert sched.cli.total == 0


async def test_missing_slurm_is_unavailable_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    async with SlurmScheduler("t", state_dir=str(tmp_path)) as sched:
        with pytest.raises(SchedulerUnavailableError, match="sinfo is not installed"):
            await sched.submit(_app())
    assert not (tmp_path / "slurm").exists()  # nothing recorded


async def test_unreachable_controller_is_unavailable(tmp_path: Path) -> None:
    if missing_binaries():
        pytest.skip("Slurm client commands not installed")
    conf = tmp_path / "slurm.conf"
    conf.write_text(
        "ClusterName=down\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=1\n"
        "AuthType=auth/none\nNodeName=n1 NodeAddr=127.0.0.1 CPUs=1\n"
        "PartitionName=debug Nodes=n1\n"
    )
    # sinfo itself retries for about 9 s before it gives up: the submit's two
    # probes end at the command timeout, kept short
    async with SlurmScheduler(
        "t", slurm_conf=str(conf), state_dir=str(tmp_path), command_timeout=0.5
    ) as sched:
        with pytest.raises(SchedulerUnavailableError, match="slurmctld"):
            await sched.submit(_app())
    assert not (tmp_path / "slurm").exists()


@pytest.mark.slurm
async def test_unknown_partition_lists_the_known_ones(
    slurm_cluster: Cluster, tmp_path: Path
) -> None:
    before = slurm_cluster.run("squeue", "-h", "-t", "all", "-o", "%i").stdout
    async with SlurmScheduler(
        "t", slurm_conf=str(slurm_cluster.conf), state_dir=str(tmp_path)
    ) as sched:
        with pytest.raises(InvalidRunConfigException, match="'debug'") as info:
            await sched.submit(_app(), {"partition": "nosuch"})
        assert info.value.cfg_key == "partition"
    after = slurm_cluster.run("squeue", "-h", "-t", "all", "-o", "%i").stdout
    assert set(after.split()) <= set(before.split())


@pytest.mark.slurm
async def test_refused_job_is_a_submit_error_and_leaves_no_job_dir(
    slurm_cluster: Cluster, tmp_path: Path
) -> None:
    job_dir = tmp_path / "job"
    async with SlurmScheduler(
        "t", slurm_conf=str(slurm_cluster.conf), state_dir=str(tmp_path)
    ) as sched:
        with pytest.raises(SubmitError, match="sbatch refused the job"):
            await sched.submit(
                _app(), {"constraint": "no-such-feature", "job_dir": str(job_dir)}
            )
    assert not job_dir.exists()
    assert not (tmp_path / "slurm").exists()  # nothing recorded


def _sized(replicas: int, cpu: int) -> AppDef:
    role = Role(
        "worker",
        image="/",
        entrypoint="echo",
        args=["never"],
        num_replicas=replicas,
        resource=Resource(cpu=cpu, gpu=0, memMB=64),
    )
    return AppDef("big", roles=[role])


@pytest.mark.slurm
@pytest.mark.parametrize("partition", [None, "debug"])
async def test_more_replicas_than_nodes_is_refused_naming_the_node_count(
    slurm_cluster: Cluster, tmp_path: Path, partition: str | None
) -> None:
    nodes = len(slurm_cluster.run("sinfo", "-h", "-N", "-o", "%N").stdout.split())
    cfg = {} if partition is None else {"partition": partition}
    before = slurm_cluster.run("squeue", "-h", "-t", "all", "-o", "%i").stdout
    async with SlurmScheduler(
        "t", slurm_conf=str(slurm_cluster.conf), state_dir=str(tmp_path)
    ) as sched:
        with pytest.raises(SpecError, match=f"has {nodes} node") as info:
            await sched.submit(_sized(nodes + 1, 1), cfg)
        assert info.value.field == "roles[0].num_replicas"
        assert f"{nodes + 1} replicas" in str(info.value)
        assert "'debug'" in str(info.value)
        assert "sbatch" not in sched.cli.counts
    after = slurm_cluster.run("squeue", "-h", "-t", "all", "-o", "%i").stdout
    assert set(after.split()) <= set(before.split())
    assert not (tmp_path / "slurm").exists()  # nothing recorded


@pytest.mark.slurm
async def test_more_cpus_than_a_node_has_is_refused(
    slurm_cluster: Cluster, tmp_path: Path
) -> None:
    cpus = max(
        int(c.rstrip("+"))
        for c in slurm_cluster.run("sinfo", "-h", "-o", "%c").stdout.split()
    )
    async with SlurmScheduler(
        "t", slurm_conf=str(slurm_cluster.conf), state_dir=str(tmp_path)
    ) as sched:
        with pytest.raises(SpecError, match=f"at most {cpus}") as info:
            await sched.submit(_sized(1, cpus + 1))
        assert info.value.field == "roles[0].resource.cpu"
        assert "sbatch" not in sched.cli.counts
