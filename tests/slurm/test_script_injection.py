"""No run option or role field can add a line, a directive or an option to the
batch script: a hostile value is refused (naming the option or field) or
carried verbatim (no cluster needed; the cluster half is in
test_hostile_values_on_cluster.py)."""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from asyncsched.errors import InvalidRunConfigException, SpecError
from asyncsched.schedulers.slurm._checks import check_roles
from asyncsched.schedulers.slurm._render import FAIL_FAST_WRAPPER, render_request
from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.specs import AppDef, Resource, Role

from .sbatch_script import (
    HOSTILE,
    bash_syntax_ok,
    component_commands,
    run_components,
    sbatch_directives,
    srun_argv,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """No cluster needed here: run on both event loops."""
    return str(request.param)


#: every string run option of the Slurm scheduler
OPTIONS = (
    "partition",
    "time",
    "comment",
    "constraint",
    "mail-user",
    "mail-type",
    "job_dir",
    "qos",
)
#: options on the #SBATCH lines (the rest go on the sbatch command line)
LINE_OPTIONS = ("partition", "time", "constraint", "qos")


def _app(**role_kw: object) -> AppDef:
    kw: dict[str, object] = {
        "entrypoint": "echo",
        "args": ["hi"],
        "resource": Resource(cpu=1, gpu=0, memMB=64),
        "num_replicas": 2,
    }
    kw.update(role_kw)
    return AppDef("inj", roles=[Role("w", image="/", **kw)])  # type: ignore[arg-type]


def _expected_directives(cfg: dict[str, str]) -> list[list[str]]:
    line = [f"--{k}={cfg[k]}" for k in LINE_OPTIONS if k in cfg]
    return [
        [
            f"--job-name=w-{k}",
            "--requeue",
            *line,
            "--ntasks-per-node=1",
            "--cpus-per-task=1",
            "--mem=64",
        ]
        for k in range(2)
    ]


def _assert_carried_verbatim(option: str, value: str) -> None:
    cfg = {option: value}
    request = render_request(_app(), cfg)
    script = request.materialize()
    baseline = render_request(_app(), {}).materialize()
    ok, err = bash_syntax_ok(script)
    assert ok, f"bash -n: {err}\n{script}"
    # nothing added: same number of lines, same directives plus this option
    assert script.count("\n") == baseline.count("\n"), script
    assert sbatch_directives(script) == _expected_directives(cfg), script
    # the "# Run with:" comment stays one line that reads back as the argv
    (run_with,) = [ln for ln in script.split("\n") if ln.startswith("# Run with: ")]
    assert shlex.split(run_with[len("# Run with: ") :]) == request.cmd
    flag = "--chdir" if option == "job_dir" else f"--{option}"
    if option not in LINE_OPTIONS:
        assert f"{flag}={value}" in request.cmd


@pytest.mark.parametrize("label", list(HOSTILE))
@pytest.mark.parametrize("option", OPTIONS)
def test_hostile_run_option_is_refused_or_carried_verbatim(
    option: str, label: str
) -> None:
    value = HOSTILE[label]
    error: InvalidRunConfigException | None = None
    try:
        render_request(_app(), {option: value})
    except InvalidRunConfigException as exc:
        error = exc
    if error is None:
        _assert_carried_verbatim(option, value)
    else:
        assert error.cfg_key == option
        assert f"{option}=" in str(error)


@pytest.mark.parametrize("option", OPTIONS)
@pytest.mark.parametrize(
    "value",
    [
        "a\nb",
        "a\rb",
        "a\0b",
        "a\tb",
        "a\x1bb",
        "a\x7fb",
        "a\u2029b",
        "x\n#SBATCH --uid=0",
    ],
)
def test_control_characters_are_refused_in_every_option(
    option: str, value: str
) -> None:
    with pytest.raises(InvalidRunConfigException) as info:
        render_request(_app(), {option: value})
    assert info.value.cfg_key == option


@pytest.mark.parametrize(
    "option", ["partition", "time", "constraint", "qos", "mail-user", "mail-type"]
)
@pytest.mark.parametrize("value", ["normal --uid=0", "a b", " x", "x "])
def test_whitespace_is_refused_where_slurm_reads_one_word(
    option: str, value: str
) -> None:
    with pytest.raises(
        InvalidRunConfigException, match=r"whitespace|time limit|event names"
    ) as info:
        render_request(_app(), {option: value})
    assert info.value.cfg_key == option


@pytest.mark.parametrize("option", LINE_OPTIONS)
@pytest.mark.parametrize("value", ["a'b", 'a"b', "a\\b", "a#b", "xhetjob", "PACKJOB"])
def test_sbatch_parser_specials_are_refused_on_sbatch_lines(
    option: str, value: str
) -> None:
    with pytest.raises(InvalidRunConfigException) as info:
        render_request(_app(), {option: value})
    assert info.value.cfg_key == option


def test_time_is_checked_as_written_not_stripped() -> None:
    for value in (" 10", "10 ", "10\n"):
        with pytest.raises(InvalidRunConfigException) as info:
            render_request(_app(), {"time": value})
        assert info.value.cfg_key == "time"


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("comment", 'it\'s "$(touch /tmp/x)" `id`; #SBATCH --uid=0 \\'),
        ("job_dir", '/tmp/jobs/it\'s a "dir" $(x) `y`;#z'),
        ("constraint", "[rack1|rack2]&gpu*2"),
        ("constraint", "(a|b)&c,d:e!f"),
        ("mail-user", "o'brien+$(x)@example.com"),
        ("mail-type", "END,FAIL,TIME_LIMIT_90"),
        ("partition", "debug,gpu"),
        ("qos", "high-prio_2.x"),
        ("time", "1-02:03:04"),
        ("comment", "ünïcödé ✓"),
    ],
)
def test_valid_values_with_shell_specials_are_carried_verbatim(
    option: str, value: str
) -> None:
    _assert_carried_verbatim(option, value)


ROLE_VALUES = [
    "a,INJ=evil",
    "x=y=z",
    "it's",
    'say "hi"',
    "$HOME $(touch /tmp/asyncsched-pwned) `id` ${HOME}",
    "back\\slash\\",
    "  spaces  ",
    "line1\nline2\n",
    "tab\there",
    "semi;colon && or || pipe | amp &",
    "#not a comment",
    "-leading-dash",
    "",
    "ünïcödé",
]


def _env_of(out: bytes) -> dict[bytes, bytes]:
    pairs = (item.partition(b"=") for item in out.split(b"\0") if item)
    return {name: value for name, _, value in pairs}


def test_role_args_and_env_values_reach_each_component_byte_for_byte(
    tmp_path: Path,
) -> None:
    env = {f"V{i}": v for i, v in enumerate(ROLE_VALUES)}
    app = _app(entrypoint="printf", args=["%s\\0", *ROLE_VALUES], env=env)
    request = render_request(app, {})
    script = request.materialize()
    ok, err = bash_syntax_ok(script)
    assert ok, err
    printed = run_components(script, request.env_files(), tmp_path / "env")
    assert printed == [b"".join(v.encode() + b"\0" for v in ROLE_VALUES)] * 2
    app = _app(entrypoint="env", args=["-0"], env=env)
    request = render_request(app, {})
    outputs = run_components(request.materialize(), request.env_files(), tmp_path / "e")
    for k, out in enumerate(outputs):
        got = _env_of(out)
        identity = {
            "ASYNCSCHED_APP_ID": "4242",
            "ASYNCSCHED_ROLE_NAME": "w",
            "ASYNCSCHED_REPLICA_ID": str(k),
            "ASYNCSCHED_NUM_REPLICAS": "2",
        }
        for name, value in {**env, **identity}.items():
            assert got[name.encode()] == value.encode(), name
        assert b"INJ" not in got


SECRET = "tok-3f9a\nline2 'q' \"dq\" $HOME ünï"


def test_env_values_are_neither_in_the_script_nor_on_any_command_line() -> None:
    app = _app(env={"TOKEN": SECRET, "PLAIN": "s3cr3t"})
    request = render_request(app, {})
    script = request.materialize()
    for value in (SECRET, "s3cr3t", "tok-3f9a"):
        assert value not in script
        assert value not in str(request)  # what submit_dryrun prints
    assert "w-1.env: TOKEN PLAIN ASYNCSCHED_APP_ID" in str(request)
    argv = srun_argv(script, job_id="4242")
    assert not [a for a in argv if b"s3cr3t" in a or b"tok-3f9a" in a]
    for command in component_commands(argv):
        assert command[:4] == [c.encode() for c in FAIL_FAST_WRAPPER]
        # the job id, then the component's file, then the role's command
        assert command[4] == b"4242"
        assert command[5].startswith(b"/env-dir/w-")
        assert command[6:] == [b"echo", b"hi"]
    # the values are in the environment files only, one per component
    assert sorted(request.env_files()) == ["w-0.env", "w-1.env"]
    assert all("s3cr3t" in text for text in request.env_files().values())


def test_env_file_is_read_untraced_even_when_the_shell_inherits_xtrace(
    tmp_path: Path,
) -> None:
    # where /bin/sh is bash, an exported SHELLOPTS would turn tracing on in
    # the wrapper: it turns it off before it reads the file
    request = render_request(_app(env={"TOKEN": SECRET}), {})
    env_dir = tmp_path / "env"
    env_dir.mkdir()
    for name, text in request.env_files().items():
        (env_dir / name).write_text(text)
    argv = srun_argv(request.materialize(), env_dir=str(env_dir))
    command = component_commands(argv)[0]
    proc = subprocess.run(
        ["bash", *command[1:]],
        capture_output=True,
        check=True,
        env={"PATH": os.environ["PATH"], "SHELLOPTS": "xtrace:verbose"},
    )
    assert proc.stdout == b"hi\n"
    assert b"tok-3f9a" not in proc.stderr


@pytest.mark.parametrize(
    ("code", "retries", "removed", "requeued"),
    [(0, 0, True, False), (3, 0, False, False), (3, 2, False, True)],
)
def test_script_removes_the_env_files_only_when_the_job_succeeds(
    tmp_path: Path, code: int, retries: int, removed: bool, requeued: bool
) -> None:
    # a failed run may run again (requeued by the script for retries, or by
    # Slurm, e.g. when preempted) and must find its environment
    app = _app()
    app.roles[0].max_retries = retries
    script = tmp_path / "job.sh"
    script.write_text(render_request(app, {}).materialize())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("srun", f"exit {code}"), ("scontrol", 'echo "$@" >requeued')):
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    env_dir = tmp_path / ".asyncsched-env-x"
    env_dir.mkdir()
    (env_dir / "w-0.env").write_text("A=1\nexport A\n")
    proc = subprocess.run(
        ["bash", str(script), str(env_dir)],
        cwd=tmp_path,
        capture_output=True,
        check=False,
        env={"PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": "7"},
    )
    assert proc.returncode == code, proc.stderr
    assert env_dir.exists() != removed
    assert (tmp_path / "requeued").exists() == requeued


def test_script_refuses_to_run_without_its_env_dir(tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text(render_request(_app(), {}).materialize())
    proc = subprocess.run(["bash", str(script)], capture_output=True, check=False)
    assert proc.returncode != 0
    assert b"the directory of the environment files" in proc.stderr


def test_app_id_macro_becomes_the_job_id_inside_any_value(tmp_path: Path) -> None:
    app = _app(
        entrypoint="sh",
        args=["-c", 'printf "%s\\0" "$X" "$0"', "a'${app_id}'b"],
        env={"X": "id=${app_id},x"},
    )
    request = render_request(app, {})
    outputs = run_components(
        request.materialize(), request.env_files(), tmp_path / "e", job_id="77"
    )
    assert outputs == [b"id=77,x\0a'77'b\0"] * 2


@pytest.mark.parametrize("key", ["1BAD", "A-B", "A B", "A=B", "ÄB", "X\n"])
def test_env_name_must_be_a_shell_identifier(key: str) -> None:
    with pytest.raises(SpecError) as info:
        render_request(_app(env={key: "v"}), {})
    assert info.value.field == f"roles[0].env[{key!r}]"


def test_lone_colon_argument_is_refused_as_srun_reads_it_as_a_component() -> None:
    with pytest.raises(SpecError) as info:
        render_request(_app(args=["a", ":", "--uid=0", "sh"]), {})
    assert info.value.field == "roles[0].args[1]"
    # a colon inside an argument is fine
    argv = srun_argv(render_request(_app(args=["a:b", ":x"]), {}).materialize())
    assert argv[-2:] == [b"a:b", b":x"]


def test_lone_colon_entrypoint_is_refused_as_srun_reads_it_as_a_component() -> None:
    with pytest.raises(SpecError) as info:
        render_request(_app(entrypoint=":"), {})
    assert info.value.field == "roles[0].entrypoint"


@pytest.mark.parametrize("entrypoint", ["A=b", "/opt/x=y/run"])
def test_entrypoint_with_equals_sign_is_run_as_a_command(entrypoint: str) -> None:
    argv = srun_argv(render_request(_app(entrypoint=entrypoint), {}).materialize())
    for command in component_commands(argv):
        assert command[6:] == [entrypoint.encode(), b"hi"]


@pytest.mark.parametrize("name", ["hetjob", "my_packjob", "HetJob-x"])
def test_role_name_with_a_component_separator_is_refused(name: str) -> None:
    app = AppDef("a", roles=[Role(name, image="/", entrypoint="echo")])
    with pytest.raises(SpecError) as info:
        render_request(app, {})
    assert info.value.field == "roles[0].name"


def test_unencodable_role_value_is_a_spec_error() -> None:
    with pytest.raises(SpecError) as info:
        render_request(_app(env={"X": "\ud800"}), {})
    assert info.value.field == "roles[0].env['X']"


@pytest.mark.parametrize("option", OPTIONS)
async def test_hostile_option_is_refused_before_any_command_or_job_dir(
    option: str, tmp_path: Path
) -> None:
    job_dir = tmp_path / "job"
    cfg = {option: "x\ntouch /tmp/asyncsched-pwned"}
    if option != "job_dir":
        cfg["job_dir"] = str(job_dir)
    async with SlurmScheduler("t", state_dir=str(tmp_path / "state")) as sched:
        with pytest.raises(InvalidRunConfigException) as info:
            await sched.submit(_app(), cfg)
        assert info.value.cfg_key == option
        with pytest.raises(InvalidRunConfigException):
            await sched.submit_dryrun(_app(), cfg)
        assert sched.cli.total == 0  # not even sinfo
    assert not job_dir.exists()
    assert not (tmp_path / "state").exists()


async def test_hostile_role_field_is_refused_before_any_command(tmp_path: Path) -> None:
    async with SlurmScheduler("t", state_dir=str(tmp_path)) as sched:
        with pytest.raises(SpecError) as info:
            await sched.submit(_app(env={"1BAD-NAME": "x"}))
        assert info.value.field == "roles[0].env['1BAD-NAME']"
        assert sched.cli.total == 0


def test_role_checks_cost_the_same_whatever_the_replica_count() -> None:
    # the role fields are checked once per role, not once per replica: a
    # huge app is refused or passed without walking its replicas
    role = Role(
        "w", image="/", entrypoint="echo", args=["${replica_id}"], num_replicas=100_000
    )
    started = time.process_time()
    check_roles(AppDef("big", roles=[role]))
    assert time.process_time() - started < 1.0
    bad = Role("w", image="/", entrypoint="echo", args=[":"], num_replicas=100_000)
    with pytest.raises(SpecError) as info:
        check_roles(AppDef("big", roles=[bad]))
    assert info.value.field == "roles[0].args[0]"
