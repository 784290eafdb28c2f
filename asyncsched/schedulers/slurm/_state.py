"""Slurm job records -> asyncsched states, without I/O.

Parses the delimited output of ``squeue -O`` and ``sacct --parsable2``
(accounting, or ``-c`` for the job completion log) into :class:`Component`
rows, groups the components of a heterogeneous job into an :class:`AppView`,
and maps Slurm states as TorchX does.

Each replica is one component of a heterogeneous job, and Slurm copies the
batch script's state and exit code to every component; a component's own
result is its derived exit code (the worst of its steps) and, with
accounting, its step rows (``ID+k.0``). :func:`replica_result` reads a
replica's own state and exit code from those, and says so when Slurm lost it
(:class:`ReplicaResult`). Right after a job ends, accounting shows one
placeholder row named ``allocation`` for a while: :attr:`AppView.settled`
is then False.

Example:
    >>> slurm_state("CANCELLED by 0"), slurm_state("TIMEOUT")
    (<AppState.CANCELLED: 6>, <AppState.FAILED: 5>)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime

from asyncsched.schedulers.kit import (
    AppSnapshot,
    ReplicaSnapshot,
    failed_replica_message,
)
from asyncsched.schedulers.slurm._reasons import pending_reason, state_reason
from asyncsched.specs import AppState, StatusReason, explain_exit_code, is_terminal

__all__ = [
    "SACCT_FIELDS",
    "SQUEUE_FORMAT",
    "AppView",
    "Component",
    "ReplicaResult",
    "component_reason",
    "group_components",
    "parse_sacct",
    "parse_squeue",
    "replica_result",
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
# a step that ran a command: 5.0, 5+1.0 (not 5.batch, 5.extern)
_SACCT_STEP = re.compile(r"^(\d+(?:\+\d+)?)\.(\d+)$")
#: reasons of a replica that failed on its own (not a job-wide end): the app
#: message names the first such replica
_OWN = frozenset(
    {StatusReason.EXIT_CODE, StatusReason.SIGNAL, StatusReason.LAUNCH_FAILED}
)
#: the job name accounting shows until the job's own record arrives
PLACEHOLDER_NAME = "allocation"


def slurm_state(raw: str) -> AppState:
    """Map a Slurm state (``"CANCELLED by 0"``, ``"RUNNING+"``) to an AppState."""
    word = raw.split()[0].rstrip("+") if raw.strip() else ""
    return _STATES.get(word.upper(), AppState.UNKNOWN)


@dataclass(frozen=True)
class Component:
    """One job of Slurm (a whole job, or one component of a heterogeneous job).

    ``raw_state`` and ``job_code`` are the job's (for a heterogeneous job: the
    batch script's, copied to every component); ``own_code`` is the
    component's derived exit code (its steps' worst); ``step_state`` and
    ``step_code`` its last step's row (accounting only; ``""``/None unknown).
    """

    job_id: str
    app_id: str
    offset: int
    name: str
    raw_state: str
    job_code: int | None
    submit: float | None
    node: str = ""
    work_dir: str = ""
    restarts: int = 0
    own_code: int | None = None
    step_state: str = ""
    step_code: int | None = None
    #: squeue's reason for a pending job (``Resources``, ``Priority``...)
    pending: str = ""

    @property
    def state(self) -> AppState:
        """The mapped state of the job this component belongs to."""
        return slurm_state(self.raw_state)

    @property
    def placeholder(self) -> bool:
        """Accounting's stand-in row, shown until the job's record arrives."""
        return self.name == PLACEHOLDER_NAME and "+" not in self.job_id


@dataclass(frozen=True)
class ReplicaResult:
    """One replica's own state, exit code and (when not plain) why."""

    state: AppState
    exit_code: int | None
    message: str = ""


def _explained(components: list[Component]) -> bool:
    """Whether a replica's own code accounts for the failed job's code.

    The script exits with srun's code, the highest of the replicas' (128+N for
    signal N; accounting records that job code as plain N). A job code no
    replica recorded means Slurm lost a replica's result (the completion log
    can be written before a killed replica's code reaches the controller).
    """
    for comp in components:
        job = comp.job_code
        for code in (comp.own_code, comp.step_code):
            if code and (not job or code in (job, job + 128)):
                return True
    return False


#: exit codes of a step srun stopped (SIGTERM, then SIGKILL after KillWait)
_STOP_CODES = frozenset({128 + 15, 128 + 9})
_STOPPED = "stopped: another replica failed"


def _failed_by_itself(comp: Component, components: list[Component]) -> bool:
    """Whether another replica than ``comp`` failed with a code of its own
    that is not srun's stop (so it caused the job's failure)."""
    for other in components:
        code = other.own_code or other.step_code
        if other is not comp and code and code not in _STOP_CODES:
            return True
    return False


def replica_result(comp: Component, components: list[Component]) -> ReplicaResult:
    """The result of replica ``comp`` of the app made of ``components``.

    Slurm gives every component of a heterogeneous job the batch script's
    state; a FAILED script means some replica failed, and which one is in
    each component's derived exit code (and step rows). A replica whose own
    result Slurm did not keep (no code of its own, and no other replica's code
    explains the job's) is UNKNOWN, with a message saying so.

    Example:
        >>> rows = parse_sacct("5|w-0|FAILED|3:0|0:0||n1|/w\\n6|w-1|FAILED|3:0|3:0||n2|/w",
        ...                    {"5": "5", "6": "5"})
        >>> [replica_result(c, rows).state.name for c in rows]
        ['SUCCEEDED', 'FAILED']
    """
    state = comp.state
    word = comp.raw_state.split()[0].rstrip("+").upper() if comp.raw_state else ""
    if not is_terminal(state):
        return ReplicaResult(state, None)
    if state == AppState.SUCCEEDED:
        return ReplicaResult(state, 0)
    own = comp.own_code or comp.step_code
    if state == AppState.CANCELLED:
        return ReplicaResult(state, own, comp.raw_state)
    if word != "FAILED" or len(components) == 1:
        # a limit, node or preemption hit the whole job; or the only replica
        return ReplicaResult(state, own or comp.job_code, comp.raw_state)
    if own in _STOP_CODES and _failed_by_itself(comp, components):
        # fail-fast stopped it when another replica failed
        return ReplicaResult(AppState.CANCELLED, own, _STOPPED)
    if own:
        return ReplicaResult(AppState.FAILED, own)
    step = slurm_state(comp.step_state) if comp.step_state else None
    if step == AppState.SUCCEEDED or (step is None and _explained(components)):
        # its own steps succeeded (accounting), or another replica's failure
        # explains the job's: this one exited 0
        return ReplicaResult(AppState.SUCCEEDED, 0)
    return ReplicaResult(
        AppState.UNKNOWN,
        None,
        f"the job {comp.raw_state} (exit {comp.job_code}) but Slurm kept no"
        " result of this replica's own",
    )


@dataclass
class AppView:
    """What Slurm says of one app (all its components)."""

    app_id: str
    components: list[Component] = field(default_factory=list)
    source: str = "squeue"

    expected: int = 0

    @property
    def settled(self) -> bool:
        """False while accounting still shows its placeholder for the job, or
        fewer components than ``expected`` (the app's replica count, if known)."""
        if any(c.placeholder for c in self.components):
            return False
        return len(self.components) >= self.expected

    @property
    def lost(self) -> list[str]:
        """Names of the replicas whose own result Slurm did not keep (so far:
        on the controller, a step's code may still arrive)."""
        return [
            c.name
            for c in self.components
            if replica_result(c, self.components).state == AppState.UNKNOWN
            and is_terminal(c.state)
        ]

    @property
    def state(self) -> AppState:
        """The app state: the replicas rolled up (see ``rollup_state``);
        UNKNOWN while not :attr:`settled` (poll again)."""
        return self.snapshot().state

    @property
    def work_dir(self) -> str:
        """The job's working directory (where its logs are), or ``""``."""
        return next((c.work_dir for c in self.components if c.work_dir), "")

    @property
    def submit(self) -> float | None:
        """Submit time (epoch seconds) of the first component."""
        return next((c.submit for c in self.components if c.submit), None)

    def _job_outcome(self) -> AppState | None:
        """The whole job's end, once settled (a replica whose own result Slurm
        lost is UNKNOWN, but the job still ended): FAILED > CANCELLED > SUCCEEDED."""
        states = [c.state for c in self.components]
        if not states or not self.settled or not all(is_terminal(s) for s in states):
            return None
        for worst in (AppState.FAILED, AppState.CANCELLED):
            if worst in states:
                return worst
        return AppState.SUCCEEDED

    def snapshot(self) -> AppSnapshot:
        """The app, one replica per component (named ``{role}-{replica}``)."""
        replicas = []
        notes = []
        for comp in sorted(self.components, key=lambda c: c.offset):
            role, _, index = comp.name.rpartition("-")
            if not role or not index.isdigit():
                role, index = comp.name, "0"
            result = (
                replica_result(comp, self.components)
                if self.settled
                else ReplicaResult(AppState.UNKNOWN, None, "not settled yet")
            )
            if result.state == AppState.UNKNOWN and result.message:
                notes.append(f"{comp.name}: {result.message}")
            reason, message = component_reason(comp, result)
            replicas.append(
                ReplicaSnapshot(
                    role,
                    int(index),
                    result.state,
                    exit_code=result.exit_code,
                    hostname=comp.node,
                    message=message,
                    num_restarts=comp.restarts,
                    reason=reason,
                )
            )
        failed = next(
            (r for r in replicas if r.state == AppState.FAILED and r.reason in _OWN),
            None,
        )
        if failed is not None:  # the same words as every backend
            msg = failed_replica_message(failed.role, failed.id, failed.exit_code)
        else:
            msg = ", ".join(sorted({c.raw_state for c in self.components}))
        if not self.settled:
            msg += " (Slurm's accounting has not settled yet)"
        if notes:
            msg = "; ".join([msg, *notes])
        snapshot = AppSnapshot(
            self.app_id,
            replicas,
            msg=msg,
            num_restarts=max((c.restarts for c in self.components), default=0),
            decided=self._job_outcome(),
            native=self,
        )
        snapshot.roles = snapshot.partial_roles(image=self.work_dir)
        return snapshot


def component_reason(
    comp: Component, result: ReplicaResult
) -> tuple[StatusReason | None, str]:
    """The reason and message of one replica (see ``_reasons``).

    A job-wide end (time limit, OOM, node failure, preemption, cancel) is
    every replica's; a plain FAILED job is read from the replica's own code.
    """
    if result.state == AppState.PENDING:
        return pending_reason(comp.pending)
    if result.state == AppState.UNKNOWN:
        return None, result.message
    if result.state not in (AppState.FAILED, AppState.CANCELLED):
        return None, ""
    if result.message == _STOPPED:
        return StatusReason.CANCELLED, _STOPPED
    reason, message = state_reason(comp.raw_state)
    if reason is not None and reason != StatusReason.EXIT_CODE:
        return reason, message
    if result.exit_code:
        return explain_exit_code(result.exit_code)
    return StatusReason.EXIT_CODE, comp.raw_state


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
        submit, nodes, restarts, why = parts[7], parts[8], parts[9], parts[10]
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
                job_code=_wait_status(exit_raw),
                own_code=_wait_status(derived),
                submit=_epoch(submit),
                node="" if nodes.strip() in ("", "(null)") else nodes.strip(),
                work_dir=work_dir.strip(),
                restarts=int(restarts) if restarts.strip().isdigit() else 0,
                pending=why.strip(),
            )
        )
    return rows


def parse_sacct(text: str, leaders: dict[str, str] | None = None) -> list[Component]:
    """Parse ``sacct -n -P -o SACCT_FIELDS`` output.

    Accounting prints heterogeneous components as ``ID+k``, and their steps
    as ``ID+k.N`` (the last numbered step becomes the component's
    ``step_state``/``step_code``); the completion log (``-c``) prints each
    component's own id, which ``leaders`` maps to ``(app id)`` with the
    offset being the distance from it.
    """
    leaders = leaders or {}
    rows = []
    steps: dict[str, tuple[int, str, int | None]] = {}
    for line in text.splitlines():
        parts = line.split("|", 7)
        if len(parts) < 8:
            continue
        job, name, state, exit_raw, derived, submit, nodes, work_dir = parts
        step = _SACCT_STEP.match(job.strip())
        if step is not None:
            number = int(step.group(2))
            owner = step.group(1)
            if owner not in steps or steps[owner][0] <= number:
                steps[owner] = (number, state.strip(), _wait_status(exit_raw))
            continue
        match = _SACCT_ID.match(job.strip())
        if match is None:
            continue  # 5.batch, 5.extern or garbage
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
                job_code=_wait_status(exit_raw),
                own_code=_wait_status(derived),
                submit=_epoch(submit),
                node="" if nodes in ("", "None assigned") else nodes,
                work_dir=work_dir,
            )
        )
    return [_with_step(row, steps.get(row.job_id)) for row in rows]


def _with_step(row: Component, step: tuple[int, str, int | None] | None) -> Component:
    if step is None or row.placeholder:
        return row
    return replace(row, step_state=step[1], step_code=step[2])


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
