"""A private single-host Slurm cluster for tests and benchmarks (no systemd).

Four logical nodes (``n1``..``n4``, each ``slurmd`` on its own port) so that
heterogeneous jobs (whose components never share a node) of up to four
replicas can start; one ``slurmctld``; one ``munged`` (as the
``munge`` user, own key and socket). Everything lives in a temp dir; the
configuration is written for this host (CPUs and memory from ``slurmd -C``).
Two flavours: ``start_cluster()`` records finished jobs only in the job
completion log (``jobcomp/filetxt``); ``start_cluster(accounting=True)`` also
runs accounting storage, as most production clusters do: a private
``mariadbd`` and ``slurmdbd`` (see :mod:`tests.slurm.accounting`), the
cluster registered with ``sacctmgr``.
:func:`start_cluster` returns once ``sinfo`` shows every node idle;
:meth:`Cluster.stop` cancels every job, stops the daemons by PID and kills
what they left (the processes whose ``SLURM_CONF`` is this cluster's), and
nothing else.

Example (as root, with the Debian packages installed)::

    cluster = start_cluster()
    try:
        os.environ.update(cluster.env)
        ...
    finally:
        cluster.stop()
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import psutil

from .accounting import (
    ACCOUNTING_BINARIES,
    AccountingError,
    accounting_conf,
    register_cluster,
    start_database,
    start_slurmdbd,
)

__all__ = ["BINARIES", "Cluster", "ClusterError", "missing_binaries", "start_cluster"]

BINARIES = ("slurmctld", "slurmd", "munged", "sbatch", "squeue", "sinfo", "sacct")
PARTITION = "debug"
#: heterogeneous components never share a node: an app has at most this many replicas
NODES = ("n1", "n2", "n3", "n4")
MIN_JOB_AGE = 10
#: seconds between the SIGTERM and the SIGKILL of a plain ``scancel`` (and of
#: srun stopping a step's other tasks): Slurm's default is 30, which each test
#: of a replica that ignores SIGTERM waited out in full (and each test of a
#: trap that must outlive it sleeps a little longer)
KILL_WAIT = 5
CLUSTER_NAME = "asyncschedtest"


class ClusterError(RuntimeError):
    """The cluster could not be started."""


def missing_binaries(*, accounting: bool = False) -> list[str]:
    """The Slurm/munge (and with ``accounting``, MariaDB/slurmdbd) programs
    not on PATH (or in /usr/sbin)."""
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    wanted = BINARIES + (ACCOUNTING_BINARIES if accounting else ())
    return [b for b in wanted if shutil.which(b, path=path) is None]


def _which(name: str) -> str:
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    found = shutil.which(name, path=path)
    if found is None:
        raise ClusterError(f"{name} is not installed")
    return found


@dataclass
class Cluster:
    """A running private cluster; ``env`` points Slurm commands at it."""

    root: Path
    conf: Path
    jobcomp: Path
    accounting: bool = False
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def mode(self) -> str:
        """``"accounting"`` (slurmdbd) or ``"jobcomp"`` (completion log only)."""
        return "accounting" if self.accounting else "jobcomp"

    @property
    def env(self) -> dict[str, str]:
        """Variables that make Slurm commands use this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def run(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """Run a Slurm command against this cluster (test setup only)."""
        return subprocess.run(
            list(args),
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def log_tail(self) -> str:
        """The end of every daemon log (for failure messages)."""
        parts = []
        for log in sorted(self.root.glob("*.log")):
            text = log.read_text(errors="replace")[-1500:]
            parts.append(f"--- {log.name}\n{text}")
        return "\n".join(parts)

    def wait_idle(self, deadline_s: float = 30) -> None:
        """Poll ``sinfo`` until every node is idle."""
        deadline = time.monotonic() + deadline_s
        last = ""
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise ClusterError(
                        f"{name} exited with {proc.returncode}\n{self.log_tail()}"
                    )
            out = self.run("sinfo", "-h", "-N", "-o", "%N %t", timeout=10)
            last = out.stdout + out.stderr
            states = dict(
                line.split() for line in out.stdout.splitlines() if line.strip()
            )
            if out.returncode == 0 and all(states.get(n) == "idle" for n in NODES):
                return
            time.sleep(0.2)
        raise ClusterError(
            f"nodes not idle in {deadline_s}s: {last}\n{self.log_tail()}"
        )

    def restart_controller(self, deadline_s: float = 60) -> None:
        """Stop ``slurmctld`` (SIGTERM: it saves its state) and start it again
        on the same configuration and state; return once ``squeue`` answers.
        Jobs keep running on the nodes meanwhile (blocking: call it from a
        worker thread in async code)."""
        old = self.procs.get("slurmctld")
        if old is not None:
            _terminate(old)
        with (self.root / "slurmctld-stdout.log").open("ab") as out:
            self.procs["slurmctld"] = subprocess.Popen(
                [_which("slurmctld"), "-D", "-i", "-f", str(self.conf)],
                env={**os.environ, **self.env},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + deadline_s
        while self.run("squeue", "-h", timeout=10).returncode != 0:
            if self.procs["slurmctld"].poll() is not None:
                raise ClusterError(f"slurmctld did not restart\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise ClusterError(f"slurmctld silent after restart\n{self.log_tail()}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Cancel all jobs, stop the daemons, kill what they left; remove the dir."""
        with contextlib.suppress(Exception):
            self.run("scancel", "--full", "-u", "root", timeout=10)
        daemons = (*(f"slurmd-{n}" for n in NODES), "slurmctld", "slurmdbd")
        for name in (*daemons, "mariadbd", "munged"):
            proc = self.procs.get(name)
            if proc is not None:
                _terminate(proc)
        _kill_leftovers(str(self.conf))
        shutil.rmtree(self.root, ignore_errors=True)


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=15)


def _kill_leftovers(conf: str) -> None:
    """Kill slurmstepd and job processes of this cluster (SLURM_CONF is ours)."""
    me = os.getpid()
    victims = []
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == me:
            continue
        with contextlib.suppress(psutil.Error):
            if proc.environ().get("SLURM_CONF") == conf:
                victims.append(proc)
    for proc in victims:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(victims, timeout=10)


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _node_hw() -> tuple[int, int]:
    out = subprocess.run(
        [_which("slurmd"), "-C"], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    cpus = re.search(r"\bCPUs=(\d+)", out)
    mem = re.search(r"\bRealMemory=(\d+)", out)
    if cpus is None or mem is None:
        raise ClusterError(f"cannot read slurmd -C: {out!r}")
    return int(cpus.group(1)), int(mem.group(1))


def write_conf(
    root: Path, *, cpus: int | None = None, dbd_port: int | None = None
) -> tuple[Path, Path]:
    """Write slurm.conf for this host under ``root``; return (conf, jobcomp).

    With ``dbd_port``, accounting goes to the slurmdbd listening there.
    """
    hw_cpus, mem = _node_hw()
    cpus = cpus or hw_cpus
    ctld_port, *node_ports = _free_ports(1 + len(NODES))
    storage = (
        "JobAcctGatherType=jobacct_gather/none\n"
        "AccountingStorageType=accounting_storage/none\n"
        if dbd_port is None
        else accounting_conf(dbd_port, root / "munge" / "munge.socket")
    )
    for sub in ("state", "spool"):
        (root / sub).mkdir()
    jobcomp = root / "jobcomp.txt"
    conf = root / "slurm.conf"
    nodes = "\n".join(
        f"NodeName={name} NodeAddr=127.0.0.1 NodeHostname=localhost Port={port}"
        f" CPUs={cpus} RealMemory={mem} State=UNKNOWN"
        for name, port in zip(NODES, node_ports, strict=True)
    )
    conf.write_text(
        f"""\
ClusterName={CLUSTER_NAME}
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root / "munge" / "munge.socket"}
StateSaveLocation={root / "state"}
SlurmdSpoolDir={root / "spool"}/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd-%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
{storage}JobCompType=jobcomp/filetxt
JobCompLoc={jobcomp}
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MinJobAge={MIN_JOB_AGE}
KillWait={KILL_WAIT}
ReturnToService=2
SlurmctldDebug=info
SlurmdDebug=info
{nodes}
PartitionName={PARTITION} Nodes={",".join(NODES)} Default=YES MaxTime=INFINITE State=UP
"""
    )
    return conf, jobcomp


def _start_munged(root: Path, procs: dict[str, subprocess.Popen[bytes]]) -> None:
    munge = pwd.getpwnam("munge")
    mdir = root / "munge"
    mdir.mkdir(mode=0o700)
    key = mdir / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o600)
    for path in (mdir, key):
        os.chown(path, munge.pw_uid, munge.pw_gid)
    sock = mdir / "munge.socket"
    with (root / "munged-stderr.log").open("wb") as stderr:
        procs["munged"] = _popen_munged(munge, mdir, key, sock, stderr)
    deadline = time.monotonic() + 15
    while not sock.exists():
        if procs["munged"].poll() is not None or time.monotonic() > deadline:
            log = (root / "munged-stderr.log").read_text(errors="replace")
            raise ClusterError(f"munged did not start: {log}")
        time.sleep(0.05)


def _popen_munged(
    munge: pwd.struct_passwd, mdir: Path, key: Path, sock: Path, stderr: IO[bytes]
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            _which("munged"),
            "--foreground",
            "--force",
            f"--socket={sock}",
            f"--key-file={key}",
            f"--log-file={mdir / 'munged.log'}",
            f"--pid-file={mdir / 'munged.pid'}",
            f"--seed-file={mdir / 'munged.seed'}",
        ],
        user=munge.pw_uid,
        group=munge.pw_gid,
        extra_groups=[],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        start_new_session=True,
    )


def start_cluster(
    *, cpus: int | None = None, idle_deadline: float = 60, accounting: bool = False
) -> Cluster:
    """Start munged, slurmctld and the slurmds (with ``accounting``, first
    mariadbd and slurmdbd); return once the nodes are idle.

    Raises:
        ClusterError: a binary is missing or a daemon did not come up.
    """
    missing = missing_binaries(accounting=accounting)
    if missing:
        raise ClusterError(f"not installed: {', '.join(missing)}")
    root = Path(tempfile.mkdtemp(prefix="asyncsched-slurm-"))
    os.chmod(root, 0o755)
    db_port, dbd_port = _free_ports(2) if accounting else (None, None)
    conf, jobcomp = write_conf(root, cpus=cpus, dbd_port=dbd_port)
    cluster = Cluster(root=root, conf=conf, jobcomp=jobcomp, accounting=accounting)
    env = {**os.environ, **cluster.env}
    try:
        _start_munged(root, cluster.procs)
        if db_port is not None and dbd_port is not None:
            try:
                db = start_database(root / "mysql", db_port, cluster.procs)
                munge_socket = root / "munge" / "munge.socket"
                start_slurmdbd(root, db, dbd_port, munge_socket, cluster.procs, env)
                register_cluster(
                    CLUSTER_NAME, env, cluster.procs, root / "slurmdbd.log"
                )
            except (AccountingError, subprocess.SubprocessError) as exc:
                raise ClusterError(f"accounting storage did not start: {exc}") from exc
        commands = {
            "slurmctld": [_which("slurmctld"), "-D", "-i", "-f", str(conf)],
            **{
                f"slurmd-{n}": [_which("slurmd"), "-D", "-N", n, "-f", str(conf)]
                for n in NODES
            },
        }
        for name, argv in commands.items():
            with (root / f"{name}-stdout.log").open("wb") as out:
                cluster.procs[name] = subprocess.Popen(
                    argv,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        cluster.wait_idle(idle_deadline)
    except BaseException:
        cluster.stop()
        raise
    return cluster
