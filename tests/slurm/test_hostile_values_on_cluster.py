"""Hostile but valid values on a real cluster: sbatch's own parser takes the run
options verbatim, nothing extra runs, and every environment value and argument
reaches its replica byte for byte."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from asyncsched.errors import InvalidRunConfigException
from asyncsched.schedulers.slurm._render import render_request
from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.specs import AppDef, AppState, Resource, Role

from .cluster import NODES, Cluster
from .sbatch_script import HOSTILE, sbatch_directives

pytestmark = [pytest.mark.slurm, pytest.mark.anyio]

#: values srun's --export comma list used to split, unquote or lose
ENV_VALUES = {
    "COMMA": "a,INJ=evil",
    "EQUALS": "x=y=z",
    "SINGLE": "it's",
    "DOUBLE": 'say "hi"',
    "DOLLAR": "$HOME ${HOME} $(touch pwned-env) `touch pwned-env`",
    "BACKSLASH": "back\\slash\\",
    "SPACES": "  lead and trail  ",
    "NEWLINES": "line1\nline2\n",
    "TAB": "a\tb",
    "SHELL": "a;b && c || d | e & #f",
    "EMPTY": "",
    "UNICODE": "ünïcödé ✓",
    "PER_REPLICA": "replica=${replica_id},x",
}
#: component separators and option-looking words srun must pass as arguments
ARGS = ["%s\\0", "--uid=0", "a:b", ":x", *ENV_VALUES.values()]


def _env_of(out: bytes) -> dict[bytes, bytes]:
    env: dict[bytes, bytes] = {}
    for item in out.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep:
            env[name] = value
    return env


def _show_job(cluster: Cluster, job_id: str) -> list[dict[str, str]]:
    """``scontrol show job``, one dict per component (whole-line fields kept whole)."""
    out = cluster.run("scontrol", "show", "job", job_id).stdout
    jobs: list[dict[str, str]] = []
    for block in out.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            line = line.strip()
            key = line.partition("=")[0]
            if key in ("Comment", "WorkDir", "Command"):
                fields[key] = line.partition("=")[2]
            else:
                for item in line.split():
                    k, _, v = item.partition("=")
                    fields[k] = v
        if "JobId" in fields:
            jobs.append(fields)
    return jobs


async def test_env_values_and_args_reach_each_replica_byte_for_byte(
    slurm: SlurmScheduler, tmp_path: Path
) -> None:
    env_role = Role(
        "env",
        image="/",
        entrypoint="env",
        args=["-0"],
        env=dict(ENV_VALUES),
        num_replicas=2,
        resource=Resource(cpu=1, gpu=0, memMB=64),
    )
    args_role = Role(
        "args",
        image="/",
        entrypoint="printf",
        args=list(ARGS),
        env={"COMMA": "other,role"},
        resource=Resource(cpu=1, gpu=0, memMB=64),
    )
    app_id = await slurm.submit(AppDef("bytes", roles=[env_role, args_role]))
    status = await slurm.wait(app_id, timeout=120)
    assert status is not None
    assert status.state == AppState.SUCCEEDED, status
    for k in range(2):
        out = (tmp_path / f"slurm-{app_id}-env-{k}.out").read_bytes()
        env = _env_of(out)
        for name, value in ENV_VALUES.items():
            expected = value.replace("${replica_id}", str(k)).encode()
            assert env[name.encode()] == expected, name
        assert b"INJ" not in env
        assert env[b"ASYNCSCHED_APP_ID"] == app_id.encode()
        assert env[b"ASYNCSCHED_REPLICA_ID"] == str(k).encode()
    out = (tmp_path / f"slurm-{app_id}-args-0.out").read_bytes()
    printed = [a.replace("${replica_id}", "0").encode() for a in ARGS[1:]]
    assert out.split(b"\0")[:-1] == printed
    assert not list(tmp_path.rglob("pwned*"))


async def test_sbatch_takes_hostile_run_options_verbatim_and_runs_nothing_extra(
    slurm: SlurmScheduler, slurm_cluster: Cluster, tmp_path: Path
) -> None:
    features = "asyncsched_a,asyncsched_b"
    nodes = ",".join(NODES)
    slurm_cluster.run(
        "scontrol",
        "update",
        f"NodeName={nodes}",
        f"AvailableFeatures={features}",
        f"ActiveFeatures={features}",
    )
    marker = tmp_path / "pwned"
    cfg = {
        "comment": f'it\'s "$(touch {marker})" `touch {marker}`; #SBATCH --uid=0 \\',
        "job_dir": str(tmp_path / 'it\'s a "dir" $(x) `y`;#z'),
        # (a count such as [a*1] is accepted too, but 22.05 never starts a
        # heterogeneous job with one)
        "constraint": "[asyncsched_a|asyncsched_b]&asyncsched_b",
        "mail-user": f"o'brien+$(touch${{IFS}}{marker})@example.com",
        "mail-type": "END,FAIL",
        "partition": "debug",
        "time": "0-00:10:00",
        "qos": "normal",
    }
    role = Role(
        "w",
        image="/",
        entrypoint="true",
        num_replicas=2,
        resource=Resource(cpu=1, gpu=0, memMB=64),
    )
    app_id = await slurm.submit(AppDef("opts", roles=[role]), cfg)
    try:
        await _check_job(slurm, slurm_cluster, app_id, cfg)
    finally:
        slurm_cluster.run("scancel", app_id)  # never leave a job that blocks others
    assert not marker.exists()


async def _check_job(
    slurm: SlurmScheduler, cluster: Cluster, app_id: str, cfg: dict[str, str]
) -> None:
    # the job stays in the controller for MinJobAge after it ends
    jobs = _show_job(cluster, app_id)
    assert [j["JobName"] for j in jobs] == ["w-0", "w-1"]
    for job in jobs:
        assert job["Comment"].rstrip(" ") == cfg["comment"]
        assert job["WorkDir"] == cfg["job_dir"]
        assert job["Features"] == cfg["constraint"]
        assert job["Partition"] == "debug"
        assert job["TimeLimit"] == "00:10:00"
        assert job["Requeue"] == "1"
    assert jobs[0]["MailUser"] == cfg["mail-user"]
    assert jobs[0]["MailType"] == "END,FAIL"
    status = await slurm.wait(app_id, timeout=120)
    assert status is not None
    assert status.state == AppState.SUCCEEDED, status
    # nothing but the job ran: the batch log holds only the script's own trace
    log = (Path(cfg["job_dir"]) / f"slurm-{app_id}.out").read_text()
    assert "job exited with code 0" in log
    assert not re.search(r"^\++ touch", log, re.MULTILINE)


def _accepted(option: str, value: str) -> bool:
    try:
        render_request(_held_app(), {option: value})
    except InvalidRunConfigException:
        return False
    return True


def _held_app() -> AppDef:
    role = Role(
        "w",
        image="/",
        entrypoint="true",
        num_replicas=2,
        resource=Resource(cpu=1, gpu=0, memMB=64),
    )
    return AppDef("held", roles=[role])


#: options the controller stores whatever their text (qos: ignored without
#: accounting, but it sits on the #SBATCH line before --mem, which must survive)
_VERBATIM = ("comment", "mail-user", "job_dir", "qos")


@pytest.mark.parametrize(
    ("option", "label"),
    [(o, label) for o in _VERBATIM for label, v in HOSTILE.items() if _accepted(o, v)],
)
def test_sbatch_parses_every_accepted_hostile_value_as_our_reader_does(
    slurm_cluster: Cluster, tmp_path: Path, option: str, label: str
) -> None:
    value = HOSTILE[label]
    if option == "job_dir":
        value = str(tmp_path / f"d{value}")
        Path(value).mkdir(parents=True)
    cfg = {option: value}
    if option == "mail-user":
        cfg["mail-type"] = "END"  # scontrol shows MailUser only with a type
    request = render_request(_held_app(), cfg)
    script = request.materialize()
    # what our reader (and the render tests) expect sbatch to see
    assert len(sbatch_directives(script)) == 2
    path = tmp_path / "job.sh"
    path.write_bytes(script.encode("utf-8", "surrogateescape"))
    proc = slurm_cluster.run(*request.cmd, "--hold", str(path))
    if option == "qos" and proc.returncode != 0 and "qos" in proc.stderr.lower():
        pytest.skip(f"this cluster checks QOS names (accounting): {proc.stderr}")
    assert proc.returncode == 0, proc.stderr
    job_id = proc.stdout.strip().split(";")[0]
    try:
        jobs = _show_job(slurm_cluster, job_id)
    finally:
        slurm_cluster.run("scancel", job_id)
    assert [j["JobName"] for j in jobs] == ["w-0", "w-1"]
    for job in jobs:
        assert job["MinMemoryNode"] == "64M"  # the options after qos survived
        assert job["Requeue"] == "1"
        if option == "comment":
            assert job["Comment"].rstrip(" ") == value
        if option == "job_dir":
            assert job["WorkDir"] == value
    if option == "mail-user":
        assert jobs[0]["MailUser"] == value
