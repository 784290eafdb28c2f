"""Fixtures for the Slurm backend tests: a real private cluster, never a mock.

``slurm_cluster`` (session-scoped, parametrised) starts a private cluster
twice, one after the other: ``jobcomp`` (finished jobs are recorded only in
the job completion log) and ``accounting`` (also a private ``mariadbd`` and
``slurmdbd``, as on most production clusters). Each runs ``munged``,
``slurmctld`` and four ``slurmd`` (logical nodes on this host) from a
configuration written into a temp dir (see :mod:`tests.slurm.cluster`); the
fixture waits until ``sinfo`` shows the nodes idle and stops everything it
started at the end. Every test that uses the cluster runs on both. Without
Slurm (not root, or not Debian, so ``provision.sh`` installed nothing) the
tests skip -- or fail when ``CI`` is set or ``ASYNCSCHED_REQUIRE_SLURM=1``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from asyncsched.schedulers.api import DescribeAppResponse
from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.schedulers.snapshot import AppSnapshot
from asyncsched.specs import AppDef, AppState, Resource, Role

from .cluster import Cluster, ClusterError, missing_binaries, start_cluster


def _required() -> bool:
    return (
        bool(os.environ.get("CI")) or os.environ.get("ASYNCSCHED_REQUIRE_SLURM") == "1"
    )


#: the longest a job may take to start, move or end on a loaded 2-core test
#: machine (a deadline, not a wait: passing tests return as soon as it moves)
SETTLE = 120

#: the two kinds of cluster every Slurm test runs on
CLUSTER_MODES = ("jobcomp", "accounting")


@pytest.fixture(scope="session", params=CLUSTER_MODES)
def slurm_cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """A running private Slurm cluster (session-wide), without and with
    accounting storage (pytest finishes one before starting the other)."""
    accounting = request.param == "accounting"
    missing = missing_binaries(accounting=accounting)
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
        cluster = start_cluster(accounting=accounting)
    except ClusterError as exc:
        pytest.fail(f"could not start the Slurm test cluster: {exc}")
    try:
        yield cluster
    finally:
        cluster.stop()


#: replica 0 exits 0; replica 1 waits until replica 0's shell is gone, then
#: exits 3 (so srun's --kill-on-bad-exit cannot reach replica 0 first)
MIXED_RESULT_SCRIPT = (
    "f=replica0-$ASYNCSCHED_APP_ID.pid;"
    ' if [ "$ASYNCSCHED_REPLICA_ID" = 0 ]; then echo $$ >$f.tmp; mv $f.tmp $f; exit 0; fi;'
    " while [ ! -s $f ]; do sleep 0.05; done;"
    " while kill -0 $(cat $f) 2>/dev/null; do sleep 0.05; done; exit 3"
)
#: each replica's result for MIXED_RESULT_SCRIPT: (state, exit code)
MIXED_RESULTS: list[tuple[AppState, int | None]] = [
    (AppState.SUCCEEDED, 0),
    (AppState.FAILED, 3),
]


def assert_own_results(
    desc: DescribeAppResponse | AppSnapshot,
    expected: list[tuple[AppState, int | None]],
    *,
    may_be_lost: bool,
    context: str = "",
) -> None:
    """Each replica has its own expected result; with ``may_be_lost`` (Slurm's
    job completion log, which can be written before a replica's code reaches
    the controller) a replica may instead be UNKNOWN with a message saying so,
    but never a wrong result."""
    roles = (
        desc.role_statuses() if isinstance(desc, AppSnapshot) else desc.roles_statuses
    )
    [role] = roles
    got = [(r.state, r.exit_code) for r in role.replicas]
    for k, (result, want) in enumerate(zip(got, expected, strict=True)):
        if result == want:
            continue
        assert may_be_lost, (k, got, desc.msg, context)
        assert result == (AppState.UNKNOWN, None), (k, got, desc.msg, context)
        assert f"-{k}: " in desc.msg, (k, got, desc.msg, context)


@dataclass
class AgedApps:
    """Apps submitted when the cluster starts, so that by the time the test
    that needs them runs they may have left the controller (``MinJobAge``)."""

    state_dir: Path
    work_dir: Path
    ok: str
    failed: str
    mixed: str
    cancelled: str


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
    """Four apps: two replicas that succeed; one replica that exits 3; two
    replicas of which the first exits 0 and the second 3; two replicas
    cancelled."""
    root = tmp_path_factory.mktemp("aged")

    async def submit() -> tuple[str, str, str, str]:
        async with SlurmScheduler(
            "pytest", slurm_conf=str(slurm_cluster.conf), state_dir=str(root / "state")
        ) as sched:
            cfg = {"job_dir": str(root / "ok")}
            ok = await sched.submit(_quick_app("aged-ok", "echo done", 2), cfg)
            cfg = {"job_dir": str(root / "failed")}
            # one replica: with two, --kill-on-bad-exit may SIGTERM the second
            # before it exits 3 itself, and its code would then be 143
            failed = await sched.submit(_quick_app("aged-failed", "exit 3", 1), cfg)
            cfg = {"job_dir": str(root / "mixed")}
            mixed = await sched.submit(
                _quick_app("aged-mixed", MIXED_RESULT_SCRIPT, 2), cfg
            )
            cfg = {"job_dir": str(root / "cancelled")}
            cancelled = await sched.submit(
                _quick_app("aged-cancelled", "sleep 300", 2), cfg
            )
            await sched.cancel(cancelled)
            return ok, failed, mixed, cancelled

    ok, failed, mixed, cancelled = anyio.run(submit)
    return AgedApps(root / "state", root, ok, failed, mixed, cancelled)


@dataclass
class OvertimeApp:
    """An app over its 1-minute time limit, submitted when the cluster starts
    (Slurm ends it 60-90 s later: by then the other tests have run)."""

    state_dir: Path
    app_id: str


@pytest.fixture(scope="session")
def overtime_app(
    slurm_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> OvertimeApp:
    root = tmp_path_factory.mktemp("overtime")

    async def submit() -> str:
        async with SlurmScheduler(
            "pytest", slurm_conf=str(slurm_cluster.conf), state_dir=str(root / "state")
        ) as sched:
            app = _quick_app("overtime", "sleep 600", 1)
            return await sched.submit(app, {"job_dir": str(root / "job"), "time": "1"})

    return OvertimeApp(root / "state", anyio.run(submit))


@pytest.fixture
async def slurm(
    slurm_cluster: Cluster,
    aged_apps: AgedApps,
    overtime_app: OvertimeApp,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[SlurmScheduler]:
    """A scheduler on the test cluster; jobs run (and log) in ``tmp_path``.

    The jobs the test submitted through it and left running are ended
    outright (``scancel``) afterwards: they would hold CPUs of the four nodes
    for the next tests (a three-replica app needs three nodes with a free
    CPU, and waited 30 s behind a cancelled app whose replicas ignored
    SIGTERM and a test's one-minute job).

    (It starts ``aged_apps`` and ``overtime_app`` early, for the tests of
    finished-job records and of time limits.)
    """
    monkeypatch.chdir(tmp_path)
    async with SlurmScheduler(
        "pytest",
        slurm_conf=str(slurm_cluster.conf),
        state_dir=str(tmp_path / "state"),
        min_interval=0.2,
        max_interval=1.0,
    ) as sched:
        try:
            yield sched
        finally:
            await _end_jobs_left(slurm_cluster, list(await sched.registry.all()))


async def _end_jobs_left(cluster: Cluster, job_ids: list[str]) -> None:
    """``scancel`` the jobs (those already over answer an error: ignored)."""
    if job_ids:
        with anyio.move_on_after(30):
            await anyio.run_process(
                ["scancel", *job_ids], env={**os.environ, **cluster.env}, check=False
            )


@pytest.fixture
def anyio_backend(slurm_cluster: Cluster) -> str:
    """The Slurm backend runs on asyncio and trio: the cluster with accounting
    is driven from trio, the one with only the completion log from asyncio, so
    every Slurm test file runs on both event loops without doubling its time."""
    return "trio" if slurm_cluster.accounting else "asyncio"


def _cluster_of(item: pytest.Item) -> object:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("slurm_cluster") if callspec else None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run each cluster's ``slow`` Slurm tests last on that cluster: they wait
    for jobs started with the cluster (``overtime_app``), and the other tests
    fill that time instead of an idle wait."""
    slow = [
        item
        for item in items
        if item.get_closest_marker("slow") is not None and _cluster_of(item) is not None
    ]
    for item in slow:
        items.remove(item)
        cluster = _cluster_of(item)
        last = max(i for i, other in enumerate(items) if _cluster_of(other) == cluster)
        items.insert(last + 1, item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test on a cluster carries the cluster's state and daemon logs,
    so a failure seen only in CI can be read from its report."""
    report = yield
    cluster = getattr(item, "funcargs", {}).get("slurm_cluster")
    if report.failed and isinstance(cluster, Cluster):
        queue = cluster.run("squeue", "-h", "-t", "all", "-o", "%i %T %R %M")
        nodes = cluster.run("sinfo", "-N", "-h", "-o", "%N %T %E")
        state = (
            f"squeue:\n{queue.stdout}{queue.stderr}\nsinfo:\n{nodes.stdout}"
            f"{nodes.stderr}\n{cluster.log_tail()}"
        )
        report.sections.append(("slurm cluster", state))
    return report
