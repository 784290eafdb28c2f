"""Slurm job records -> asyncsched states, without I/O.

Parses the delimited output of ``squeue -O`` and ``sacct --parsable2``
(accounting, or ``-c`` for the job completion log) into :class:`Component`
rows, groups the components of a heterogeneous job into an :class:`AppView`,
and maps Slurm states as TorchX does, per replica.

Example:
    >>> slurm_state("CANCELLED by 0"), slurm_state("TIMEOUT")
    (<AppState.CANCELLED: 6>, <AppState.FAILED: 5>)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from asyncsched.schedulers.snapshot import AppSnapshot, ReplicaSnapshot
from asyncsched.specs import AppState, is_terminal

__all__ = [
    "SACCT_FIELDS",
    "SQUEUE_FORMAT",
    "AppView",
    "Component",
    "group_components",
    "parse_sacct",
    "parse_squeue",
    "slurm_state",
]

# WorkDir last: a path may contain the separator, the other fields cannot
_SQUEUE_FIELDS = (
    "JobID",
    "HetJobID",
    "HetJobOffset",
    "Name",
    "State",
    "exit_code",
    "DerivedEC",
    "SubmitTime",
    "NodeList",
    "restartcnt",
    "Reason",
    "WorkDir",
)
SQUEUE_FORMAT = ",".join(f"{name}:0|" for name in _SQUEUE_FIELDS)
SACCT_FIELDS = "JobID,JobName,State,ExitCode,DerivedExitCode,Submit,NodeList,WorkDir"

# TorchX's table, plus the transient states it leaves UNKNOWN
_STATES: dict[str, AppState] = {
    "COMPLETED": AppState.SUCCEEDED,
    "CANCELLED": AppState.CANCELLED,
    "RUNNING": AppState.RUNNING,
    "PENDING": AppState.PENDING,
    "REQUEUED": AppState.PENDING,
    "RESIZING": AppState.PENDING,
    "SUSPENDED": AppState.PENDING,
    "BOOT_FAIL": AppState.FAILED,
    "DEADLINE": AppState.FAILED,
    "FAILED": AppState.FAILED,
    "NODE_FAIL": AppState.FAILED,
    "OUT_OF_MEMORY": AppState.FAILED,
    "PREEMPTED": AppState.FAILED,
    "REVOKED": AppState.FAILED,
    "TIMEOUT": AppState.FAILED,
    # asyncsched additions: not terminal yet, so wait() keeps waiting
    "COMPLETING": AppState.RUNNING,
    "CONFIGURING": AppState.PENDING,
    "REQUEUE_HOLD": AppState.PENDING,
    "REQUEUE_FED": AppState.PENDING,
    "RESV_DEL_HOLD": AppState.PENDING,
    "SIGNALING": AppState.RUNNING,
    "STAGE_OUT": AppState.RUNNING,
    "STOPPED": AppState.PENDING,
    "SPECIAL_EXIT": AppState.FAILED,
}
_SACCT_ID = re.compile(r"^(\d+)(?:\+(\d+))?$")


def slurm_state(raw: str) -> AppState:
    """Map a Slurm state (``"CANCELLED by 0"``, ``"RUNNING+"``) to an AppState."""
    word = raw.split()[0].rstrip("+") if raw.strip() else ""
    return _STATES.get(word.upper(), AppState.UNKNOWN)


@dataclass(frozen=True)
class Component:
    """One job of Slurm (a whole job, or one component of a heterogeneous job)."""

    job_id: str
    app_id: str
    offset: int
    name: str
    raw_state: str
    exit_code: int | None
    submit: float | None
    node: str = ""
    work_dir: str = ""
    restarts: int = 0

    @property
    def state(self) -> AppState:
        """The mapped state of this component."""
        return slurm_state(self.raw_state)


@dataclass
class AppView:
    """What Slurm says of one app (all its components)."""

    app_id: str
    components: list[Component] = field(default_factory=list)
    source: str = "squeue"

    @property
    def state(self) -> AppState:
        """The app state (the components rolled up, see ``rollup_state``)."""
        return self.snapshot().state

    @property
    def work_dir(self) -> str:
        """The job's working directory (where its logs are), or ``""``."""
        return next((c.work_dir for c in self.components if c.work_dir), "")

    @property
    def submit(self) -> float | None:
        """Submit time (epoch seconds) of the first component."""
        return next((c.submit for c in self.components if c.submit), None)

    def snapshot(self) -> AppSnapshot:
        """The app, one replica per component (named ``{role}-{replica}``)."""
        replicas = []
        for comp in sorted(self.components, key=lambda c: c.offset):
            role, _, index = comp.name.rpartition("-")
            if not role or not index.isdigit():
                role, index = comp.name, "0"
            replicas.append(
                ReplicaSnapshot(
                    role,
                    int(index),
                    comp.state,
                    exit_code=comp.exit_code if is_terminal(comp.state) else None,
                    hostname=comp.node,
                    message=comp.raw_state,
                    num_restarts=comp.restarts,
                )
            )
        snapshot = AppSnapshot(
            self.app_id,
            replicas,
            msg=", ".join(sorted({c.raw_state for c in self.components})),
            num_restarts=max((c.restarts for c in self.components), default=0),
            native=self,
        )
        snapshot.roles = snapshot.partial_roles(image=self.work_dir)
        return snapshot


def _epoch(text: str) -> float | None:
    text = text.strip()
    if not text or text in ("N/A", "Unknown", "None"):
        return None
    try:
        return datetime.fromisoformat(text).timestamp()  # controller local time
    except ValueError:
        return None


def _wait_status(raw: str) -> int | None:
    """A raw wait status (``768``) or ``code:signal`` (``3:0``) -> exit code."""
    raw = raw.strip()
    if ":" in raw:
        code, _, sig = raw.partition(":")
        if not (code.isdigit() and sig.isdigit()):
            return None
        return 128 + int(sig) if int(sig) else int(code)
    if not raw.isdigit():
        return None
    status = int(raw)
    if status & 0x7F:
        return 128 + (status & 0x7F)
    return (status >> 8) & 0xFF


def _exit_code(job: str, derived: str) -> int | None:
    """Per replica: its step's code (the derived code) when non-zero, else the
    job's (the batch script's, i.e. srun's): a step's code can reach the
    controller after the job ended, and the completion log may then lack it."""
    code = _wait_status(derived)
    return code if code else _wait_status(job)


def parse_squeue(text: str) -> list[Component]:
    """Parse ``squeue -h -O SQUEUE_FORMAT`` output."""
    rows = []
    n = len(_SQUEUE_FIELDS)
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|", n - 1)
        if len(parts) < n:
            continue
        work_dir = parts[-1].removesuffix("|")
        (job_id, het_id, het_off, name, state, exit_raw, derived) = parts[:7]
        submit, nodes, restarts = parts[7], parts[8], parts[9]
        job_id = job_id.strip()
        het = het_id.strip()
        app_id = het if het.isdigit() and het != "0" else job_id
        offset = int(het_off) if het_off.strip().isdigit() else 0
        rows.append(
            Component(
                job_id=job_id,
                app_id=app_id,
                offset=offset,
                name=name.strip(),
                raw_state=state.strip(),
                exit_code=_exit_code(exit_raw, derived),
                submit=_epoch(submit),
                node="" if nodes.strip() in ("", "(null)") else nodes.strip(),
                work_dir=work_dir.strip(),
                restarts=int(restarts) if restarts.strip().isdigit() else 0,
            )
        )
    return rows


def parse_sacct(text: str, leaders: dict[str, str] | None = None) -> list[Component]:
    """Parse ``sacct -n -P -o SACCT_FIELDS`` output; job steps are skipped.

    Accounting prints heterogeneous components as ``ID+k``; the completion log
    (``-c``) prints each component's own id, which ``leaders`` maps to
    ``(app id)`` with the offset being the distance from it.
    """
    leaders = leaders or {}
    rows = []
    for line in text.splitlines():
        parts = line.split("|", 7)
        if len(parts) < 8:
            continue
        job, name, state, exit_raw, derived, submit, nodes, work_dir = parts
        match = _SACCT_ID.match(job.strip())
        if match is None:
            continue  # a step (5.batch, 5+0.0) or garbage
        own, plus = match.group(1), match.group(2)
        if plus is not None:
            app_id, offset = own, int(plus)
        else:
            app_id = leaders.get(own, own)
            offset = int(own) - int(app_id)
        rows.append(
            Component(
                job_id=own if plus is None else f"{own}+{plus}",
                app_id=app_id,
                offset=offset,
                name=name,
                raw_state=state,
                exit_code=_exit_code(exit_raw, derived),
                submit=_epoch(submit),
                node="" if nodes in ("", "None assigned") else nodes,
                work_dir=work_dir,
            )
        )
    return rows


def group_components(
    rows: Iterable[Component],
    *,
    source: str,
    not_before: dict[str, float] | None = None,
) -> dict[str, AppView]:
    """Group rows by app id. With several records of one component (job ids
    are reused), the newest is kept, and none submitted before
    ``not_before[app_id]`` (our own record of when we submitted it)."""
    not_before = not_before or {}
    best: dict[tuple[str, int], Component] = {}
    for row in rows:
        floor = not_before.get(row.app_id)
        if floor is not None and row.submit is not None and row.submit < floor:
            continue
        key = (row.app_id, row.offset)
        old = best.get(key)
        if old is None or (row.submit or 0) >= (old.submit or 0):
            best[key] = row
    views: dict[str, AppView] = {}
    for (app_id, _), row in sorted(best.items(), key=lambda kv: kv[0][1]):
        views.setdefault(app_id, AppView(app_id, source=source)).components.append(row)
    return views
