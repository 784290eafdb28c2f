"""AppDef -> one heterogeneous ``sbatch`` script (TorchX's shape), without I/O.

Every replica of every role is one component of a heterogeneous job, named
``{role}-{replica}``; one ``srun`` starts them all, each component writing
its stdout and stderr, in the order written, to
``slurm-$SLURM_JOB_ID-{role}-{replica}.out``. A component's environment
is not in the script: it is written to an owner-only file per component
(:meth:`SlurmBatchRequest.env_files`, shell-quoted assignments, so every value
arrives byte for byte), in a directory the script gets as its first argument;
each task sources its file in a small ``/bin/sh`` wrapper, which then runs
the entrypoint (:data:`ENV_WRAPPER`, or :data:`FAIL_FAST_WRAPPER` under
fail-fast). So no value is on any command line (``ps``) nor
in the ``set -x`` trace of the batch log. The script removes the directory
when the job succeeds (a failed run may be requeued, by the script or by
Slurm, and read it again; a cancelled job's script, or the scheduler, removes
it when the job is cancelled). A cancel is the script's to carry out (see
:meth:`SlurmBatchRequest.materialize`): it gives the replicas SIGTERM and
``cancel_grace`` seconds, then cancels its own job. A failed run is requeued while ``TORCHX_MAX_RETRIES`` exceeds
``SLURM_RESTART_COUNT``. Pure: the same AppDef and config always give the same
script; what the script cannot carry safely is refused first (:mod:`._checks`).

Example:
    >>> from asyncsched.specs import AppDef, Resource, Role
    >>> role = Role("w", image="/tmp", entrypoint="echo", args=["hi"],
    ...             resource=Resource(cpu=1, gpu=0, memMB=64))
    >>> req = render_request(AppDef("a", roles=[role]), {})
    >>> "#SBATCH --job-name=w-0 --requeue" in req.materialize()
    True
    >>> print(req.env_files()["w-0.env"].splitlines()[0])
    ASYNCSCHED_APP_ID=''"$1"''
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from asyncsched.schedulers.shared.replicas import expand_replicas
from asyncsched.schedulers.slurm._checks import (
    check_roles,
    check_run_options,
    check_time,
)
from asyncsched.schedulers.slurm._envdir import CANCEL_MARK
from asyncsched.specs import AppDef, CfgVal, Role

__all__ = [
    "ENV_WRAPPER",
    "FAILED_MARK",
    "FAIL_FAST_WRAPPER",
    "GROUP_OPTS",
    "JOB_OPTS",
    "MAX_COMPONENTS",
    "RANK0_ENV",
    "SCRIPT_NAME",
    "STOP_SIGNAL",
    "SlurmBatchRequest",
    "SlurmReplicaRequest",
    "check_time",
    "render_request",
    "replica_name",
]

#: the variable ``${rank0_env}`` names on Slurm (TorchX's)
RANK0_ENV = "SLURM_JOB_NODELIST_HET_GROUP_0"
SCRIPT_NAME = "asyncsched-sbatch.sh"
#: run options that go on every component's ``#SBATCH`` line, in this order
GROUP_OPTS = ("partition", "time", "constraint", "qos")
#: the most components one ``srun`` can start in a heterogeneous job (Slurm's
#: ``MAX_HET_JOB_COMPONENTS``, the size of srun's het-group bitmaps; slurmrestd
#: refuses more at submit): the natural replica maximum of an app on Slurm
MAX_COMPONENTS = 128
#: run options given once, on the ``sbatch`` command line
JOB_OPTS = ("comment", "mail-user", "mail-type")
#: partitions with at most this much memory per node get no ``--mem``
#: (TorchX's workaround for AWS ParallelCluster, which reports no memory)
MIN_PARTITION_MEM_MB = 1000
#: the signal asyncsched sends a running job's replica steps to stop them (a
#: cancel, fail-fast): every process of a step gets it, and every process
#: ignores it by default but the replica's watcher (see :data:`ENV_WRAPPER`),
#: which turns it into one ``SIGTERM`` to the replica's whole process group
STOP_SIGNAL = "URG"
#: the file a fail-fast replica that exited non-zero first creates in the
#: environment directory (the one replica that then stops the others); the
#: script removes it before each run
FAILED_MARK = "failed"
# the wrapper's start: it reads the environment file untraced, starts its
# watcher, then the command in a child, and waits for it
_WRAPPER_RUN = (
    'set +vx; . "$2" || exit 127; d=${2%/*};'
    " (s=; trap 'kill $s 2>/dev/null; exit' TERM; trap 'kill -TERM 0' "
    + STOP_SIGNAL
    + '; while [ ! -e "$d/'
    + CANCEL_MARK
    + '" ] && [ ! -e "$d/'
    + FAILED_MARK
    + '" ]; do sleep 1 & s=$!; wait $s; done; kill -TERM 0)'
    " </dev/null >/dev/null 2>&1 & w=$!;"
    ' trap : TERM; (shift 2; [ ! -e "$d/'
    + CANCEL_MARK
    + '" ] && [ ! -e "$d/'
    + FAILED_MARK
    + '" ] || exit 143; exec "$@" 2>&1); c=$?; kill $w 2>/dev/null;'
)
#: what each component runs: ``$1`` is the job id, ``$2`` the component's
#: environment file, the rest the role's command. The file is sourced with
#: tracing off (``set +vx``: an inherited ``SHELLOPTS`` may turn it on where
#: /bin/sh is bash), so neither srun's nor the replica's command line holds a
#: value (``srun --export``'s comma list could not carry a comma either, and
#: kept quotes). The command runs in a child (a subshell that execs it), its
#: stderr into its stdout (one pipe: the combined log keeps the order it was
#: written in); the wrapper waits for it and exits with its code. A SIGTERM
#: to the step reaches the command and not the wrapper (``trap : TERM``).
#: Beside it runs a watcher: on :data:`STOP_SIGNAL`, or once the cancel mark
#: or :data:`FAILED_MARK` exists in the environment directory (a signal that
#: came before its trap was set), it sends ``SIGTERM`` to the wrapper's process
#: group (one ``kill``: the command and its children get it at once, so a
#: command's ``SIGTERM`` trap runs even when its children die of the same
#: signal; Slurm signals a step's processes one by one, the deepest first).
#: E.g. ``/bin/sh -c <script> asyncsched-env 5 /dir/w-0.env cmd`` exits with
#: ``cmd``'s code, and ``touch /dir/cancel`` gives ``cmd`` SIGTERM within 1 s.
#: The child reads the marks once more before it execs the command (its
#: SIGTERM is back to the default there): a watcher's SIGTERM that came
#: between the wrapper's ``trap : TERM`` and the child's start reached no
#: command, so a replica stopped before its command started exits 143
#: without running it, instead of running until the cancel's grace is over
ENV_WRAPPER = (
    "/bin/sh",
    "-c",
    _WRAPPER_RUN + ' exit "$c"',
    "asyncsched-env",
)
#: :data:`ENV_WRAPPER` under fail-fast (the default): the first replica to exit
#: non-zero (it creates :data:`FAILED_MARK`; not once a cancel created the
#: cancel mark) sends :data:`STOP_SIGNAL` to every step of the job
#: (``scancel --signal=URG``, which spares ``srun``): the other replicas'
#: watchers give their commands SIGTERM, and they stop through their own
#: SIGTERM trap, as on a cancel, instead of ``srun --kill-on-bad-exit``
#: killing them
FAIL_FAST_WRAPPER = (
    "/bin/sh",
    "-c",
    _WRAPPER_RUN
    + ' [ "$c" -eq 0 ] || [ -e "$d/'
    + CANCEL_MARK
    + '" ] || ! (set -C; : >"$d/'
    + FAILED_MARK
    + f'") 2>/dev/null || scancel --signal={STOP_SIGNAL} "$1"; exit "$c"',
    "asyncsched-env",
)
#: the script's variable holding the directory of the environment files
_ENV_DIR = "env_dir"
_APP_ID = "${app_id}"


def replica_name(role: str, replica_id: int) -> str:
    """``{role}-{replica_id}``: the component's job name and log file stem."""
    return f"{role}-{replica_id}"


def _quote(token: str, job_id: str = "$SLURM_JOB_ID") -> str:
    """Shell-quote ``token``; a literal ``${app_id}`` becomes ``job_id`` (a
    shell parameter holding the job id)."""
    return shlex.quote(token).replace(_APP_ID, f"'\"{job_id}\"'")


@dataclass
class SlurmReplicaRequest:
    """One heterogeneous component: its ``#SBATCH`` options and its ``srun`` group."""

    name: str
    entrypoint: str
    args: list[str]
    sbatch_opts: dict[str, str | None]
    srun_opts: dict[str, str]
    env: dict[str, str]
    #: run the command in :data:`FAIL_FAST_WRAPPER` (else :data:`ENV_WRAPPER`)
    fail_fast: bool = False

    def sbatch_line(self) -> str:
        """The component's ``#SBATCH`` options (``--key=value`` or ``--flag``)."""
        return " ".join(
            f"--{k}" if v is None else f"--{k}={v}" for k, v in self.sbatch_opts.items()
        )

    def srun_group(self) -> str:
        """The component's part of the ``srun`` line, every token quoted."""
        out = f'slurm-"$SLURM_JOB_ID"-{self.name}'
        tokens = [f"--output={out}.out"]
        tokens += [f"--{k}={v}" for k, v in self.srun_opts.items()]
        if self.env:
            wrapper = FAIL_FAST_WRAPPER if self.fail_fast else ENV_WRAPPER
            tokens += ["--export=ALL", *map(shlex.quote, wrapper)]
            tokens += ['"$SLURM_JOB_ID"', f'"${_ENV_DIR}"/{self.env_file}']
        tokens += [_quote(t) for t in (self.entrypoint, *self.args)]
        return " ".join(tokens)

    @property
    def env_file(self) -> str:
        """The name of the component's environment file (in the job's env dir)."""
        return f"{self.name}.env"

    def env_text(self) -> str:
        """The component's environment file: one ``NAME=<shell-quoted value>``
        line per variable, then one ``export`` of them all; ``${app_id}``
        becomes ``$1`` (the wrapper's first argument, the job id)."""
        lines = [f"{k}={_quote(v, '$1')}\n" for k, v in self.env.items()]
        return "".join(lines) + f"export {' '.join(self.env)}\n"


@dataclass
class SlurmBatchRequest:
    """The whole job: ``sbatch`` argv, the script, the environment files, where it runs.

    ``cmd`` is the ``sbatch`` command without the script path and its one
    argument (the absolute directory holding :meth:`env_files`); ``job_dir``
    (if any) is where the script is written and the job runs (``--chdir``).
    """

    cmd: list[str]
    replicas: dict[str, SlurmReplicaRequest]
    job_dir: str | None = None
    max_retries: int = 0
    app_name: str = ""
    roles: dict[str, int] = field(default_factory=dict)
    version: str = ""
    #: whole seconds a cancelled job's replicas get between SIGTERM and the
    #: job's end (the submitting scheduler's ``cancel_grace``, rounded up)
    cancel_grace: int = 30

    def env_files(self) -> dict[str, str]:
        """File name -> text of each component's environment file (holds the
        values: write it readable by its owner only)."""
        return {r.env_file: r.env_text() for r in self.replicas.values() if r.env}

    def materialize(self) -> str:
        """The ``sbatch`` script (it holds no environment value)."""
        header = "\n".join(
            f"#SBATCH {r.sbatch_line()}" for r in self.replicas.values()
        ).replace("\n", "\n#SBATCH hetjob\n")
        groups = " :\\\n     ".join(r.srun_group() for r in self.replicas.values())
        command = " ".join(shlex.quote(t) for t in self.cmd)
        return f"""#!/bin/bash
#
# Generated by asyncsched {self.version}
# Run with: {command}
#
{header}

set -evx
{_ENV_DIR}=${{1:?the directory of the environment files}}
# asyncsched cancels a running job with SIGURG to this script, once it created
# "${_ENV_DIR}/{CANCEL_MARK}" (read below, should the signal come first): the
# replicas' steps get SIG{STOP_SIGNAL}, which each replica's wrapper turns into
# SIGTERM to its command (srun gets none: it would kill them; nor does a
# replica's fail-fast, once that file exists), srun returns
# once they all ended, or is stopped {self.cancel_grace} s later (the grace),
# then the job is cancelled; never requeued
cancelled=
cancel() {{
    [ -z "$cancelled" ] || return 0
    cancelled=1
    set +e
    srun_pid=$!
    : >"${_ENV_DIR}/{CANCEL_MARK}"
    scancel --signal={STOP_SIGNAL} "$SLURM_JOB_ID"
    if [ -n "$srun_pid" ]; then
        (sleep {self.cancel_grace}; kill -TERM "$srun_pid") &
        wait "$srun_pid"
    fi
    rm -rf -- "${_ENV_DIR}"
    until scancel "$SLURM_JOB_ID"; do sleep 5; done
    sleep 300
    exit 143
}}
trap cancel URG
[ ! -e "${_ENV_DIR}/{CANCEL_MARK}" ] || cancel

export PYTHONUNBUFFERED=1
export SLURM_UNBUFFEREDIO=1
export TORCHX_MAX_RETRIES={self.max_retries}

rm -f -- "${_ENV_DIR}/{FAILED_MARK}"
set +e
srun {groups} &
wait $!
exitcode=$?
set -e
# the replicas may have seen the cancel mark (and stopped) before this
# script got its signal: the job is cancelled all the same, never failed
[ ! -e "${_ENV_DIR}/{CANCEL_MARK}" ] || cancel

echo "job exited with code $exitcode"
if [ $exitcode -ne 0 ]; then
    if [ "$TORCHX_MAX_RETRIES" -gt "${{SLURM_RESTART_COUNT:-0}}" ]; then
        scontrol requeue "$SLURM_JOB_ID"
    fi
    exit $exitcode
fi
rm -rf -- "${_ENV_DIR}"
"""

    def __str__(self) -> str:
        names = "".join(
            f"  {r.env_file}: {' '.join(r.env)}\n"
            for r in self.replicas.values()
            if r.env
        )
        return (
            f"SlurmBatchRequest: {' '.join(map(shlex.quote, self.cmd))} {SCRIPT_NAME}"
            " <env dir>\n"
            f"{SCRIPT_NAME}:\n{self.materialize()}"
            f"environment files (owner-only; values not shown):\n{names}"
        )


def _component(
    name: str,
    role: Role,
    env: dict[str, str],
    cfg: Mapping[str, CfgVal],
    *,
    nomem: bool,
    gpus_per_node: bool,
    fail_fast: bool = True,
) -> SlurmReplicaRequest:
    opts: dict[str, str | None] = {"job-name": name, "requeue": None}
    for key in GROUP_OPTS:
        value = cfg.get(key)
        if value is not None:
            opts[key] = str(value)
    res = role.resource
    opts["ntasks-per-node"] = "1"
    if res.cpu > 0:
        opts["cpus-per-task"] = str(int(res.cpu) if res.cpu >= 1 else 1)
    if res.memMB > 0 and not nomem:
        opts["mem"] = str(int(res.memMB))
    if res.gpu > 0:
        if gpus_per_node:
            opts["gpus-per-node"] = str(res.gpu)
        else:
            opts["gpus-per-task"] = str(res.gpu)
            opts["ntasks"] = "1"
    return SlurmReplicaRequest(
        name=name,
        entrypoint=role.entrypoint,
        args=list(role.args),
        sbatch_opts=opts,
        srun_opts={"wait": "60" if fail_fast else "0", "kill-on-bad-exit": "0"},
        env=env,
        fail_fast=fail_fast,
    )


def render_request(
    app: AppDef,
    cfg: Mapping[str, CfgVal],
    *,
    version: str = "",
    nomem: bool = False,
    gpus_per_node: bool = False,
    cancel_grace: float = 30.0,
) -> SlurmBatchRequest:
    """Render ``app`` as a heterogeneous batch job (one component per replica).

    ``${app_id}`` stays a literal and becomes ``$SLURM_JOB_ID`` in the script;
    ``${img_root}`` is the role's image (a directory); ``${rank0_env}`` is
    ``SLURM_JOB_NODELIST_HET_GROUP_0``. ``nomem`` drops ``--mem``;
    ``gpus_per_node`` uses ``--gpus-per-node`` (Slurm >= 24.11) instead of
    ``--gpus-per-task`` with ``--ntasks=1``. By default (fail-fast) the first
    replica to fail gives the others SIGTERM (:data:`FAIL_FAST_WRAPPER`), and
    srun ends any still running 60 s after the first replica ended
    (``--wait=60``); run option ``fail_fast=False`` starts them with
    ``--wait=0`` and :data:`ENV_WRAPPER`: a replica that fails leaves its
    siblings running to their own end.
    ``cancel_grace`` (seconds, rounded up) is how long a cancelled job's
    replicas get between SIGTERM and the job's end; the script carries it, so
    any process can cancel the job.

    Raises:
        InvalidRunConfigException: a run option the script cannot carry (a
            control character, whitespace in a one-word option, a bad time).
        SpecError: a role field it cannot carry (an env name that is not a
            shell identifier, a lone ``:`` argument, ...).
    """
    check_run_options(cfg)
    check_roles(app)
    job_dir = cfg.get("job_dir")
    replicas: dict[str, SlurmReplicaRequest] = {}
    for spec in expand_replicas(
        app,
        _APP_ID,
        img_root=lambda _i, role: role.image,
        rank0_env=RANK0_ENV,
    ):
        name = replica_name(spec.role.name, spec.replica_id)
        replicas[name] = _component(
            name,
            spec.role,
            spec.env,
            cfg,
            nomem=nomem or bool(cfg.get("nomem")),
            gpus_per_node=gpus_per_node,
            fail_fast=cfg.get("fail_fast", True) is not False,
        )
    cmd = ["sbatch", "--parsable"]
    for key in JOB_OPTS:
        value = cfg.get(key)
        if value is not None:
            cmd.append(f"--{key}={value}")
    if job_dir is not None:
        cmd.append(f"--chdir={job_dir}")
    return SlurmBatchRequest(
        cmd=cmd,
        replicas=replicas,
        job_dir=str(job_dir) if job_dir is not None else None,
        max_retries=min((r.max_retries for r in app.roles), default=0),
        app_name=app.name,
        roles={r.name: r.num_replicas for r in app.roles},
        version=version,
        cancel_grace=max(0, math.ceil(cancel_grace)),
    )
