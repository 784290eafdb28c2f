"""The CLI through its real entry point, in subprocesses (two at a time for local apps)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .process import Cli, reaped

pytest.importorskip("asyncsched.schedulers.local_scheduler")


@pytest.fixture
def supervisor(cli: Cli) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``asyncsched run --wait`` of a long app, its handle once it runs."""
    command = ("sh", "-c", "echo started; sleep 60")
    with reaped(
        cli.start("run", "--wait", "--name", "sleeper", "--", *command)
    ) as proc:
        assert proc.stdout is not None
        handle = proc.stdout.readline().strip()
        assert handle.startswith("local_cwd://asyncsched/sleeper-"), proc.stderr
        # `run` follows the local app's logs on stderr once its signal handling
        # is set up: the app's first line there is the readiness line
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert first == "sleeper/0 started\n", first + proc.stderr.read()
        yield proc, handle


# -- bad arguments: one line, exit 2 -----------------------------------------------------------


#: bad arguments and a phrase of the one line each gets
BAD_ARGUMENTS = [
    (["frobnicate"], "invalid choice"),
    (["run"], "nothing to run"),
    (["run", "--replicas", "x", "--", "true"], "invalid int value"),
    (["run", "-s", "nope", "--", "true"], "Undefined scheduler backend: nope"),
    (["run", "-cfg", "bogus=1", "--", "true"], "Unknown run option: bogus"),
    (["run", "-cfg", "prepend_cwd", "--", "true"], "key=value"),
    (["run", "--env", "NOEQUALS", "--", "true"], "expected K=V"),
    (["run", "-f", "missing.yaml"], "missing.yaml"),
    (["status", "not-a-handle"], "is not of the form"),
    (["log", "local_cwd://s/app/role/x"], "is not of the form"),
    (["log", "--since", "someday", "local_cwd://s/app"], "invalid time"),
]


@pytest.fixture(scope="module")
def bad_argument_runs(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[tuple[str, ...], subprocess.CompletedProcess[str]]:
    """Each of BAD_ARGUMENTS run through the CLI's main, all in one process."""
    cli = Cli(tmp_path_factory.mktemp("bad-arguments"))
    argvs = [tuple(args) for args, _ in BAD_ARGUMENTS]
    return dict(zip(argvs, cli.each(*argvs), strict=True))


@pytest.mark.parametrize(("args", "message"), BAD_ARGUMENTS)
def test_bad_arguments_give_one_line_and_exit_2(
    bad_argument_runs: dict[tuple[str, ...], subprocess.CompletedProcess[str]],
    args: list[str],
    message: str,
) -> None:
    result = bad_argument_runs[tuple(args)]
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stdout == ""


def test_bad_appdef_file_names_the_field(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text(
        "name: x\nroles:\n  - {name: w, entrypoint: true, replica: 2}\n"
    )
    result = cli("run", "-f", "app.yaml")
    assert result.returncode == 2
    assert (
        "app.yaml: roles[0].replica: unknown field (did you mean `num_replicas`?)"
        in result.stderr
    )


# -- run: exit status follows the app ------------------------------------------------------------


def test_run_local_waits_and_exit_status_follows_the_state(
    cli: Cli, tmp_path: Path
) -> None:
    ok = cli("run", "--replicas", "2", "--", "sh", "-c", "echo rank=$TORCHX_JOB_ID")
    assert ok.returncode == 0, ok.stderr
    handle = ok.stdout.strip()
    assert handle.startswith("local_cwd://asyncsched/sh-")
    assert "SUCCEEDED" in ok.stderr
    assert "\x1b[" not in ok.stderr  # not a terminal: plain lines

    failed = cli(
        "run", "--log", "--", "sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 3"
    )
    assert failed.returncode == 1
    assert "sh/0 to-stdout" in failed.stderr
    assert "sh/0 to-stderr" in failed.stderr
    assert "FAILED" in failed.stderr

    (tmp_path / "app.json").write_text(
        json.dumps({"name": "fromfile", "roles": [{"name": "r", "entrypoint": "true"}]})
    )
    from_file = cli("run", "--wait", "-f", "app.json")
    assert from_file.returncode == 0, from_file.stderr
    assert "local_cwd://asyncsched/fromfile-" in from_file.stdout


def test_dryrun_submits_nothing(cli: Cli) -> None:
    result = cli(
        "run",
        "--dryrun",
        "-cfg",
        "prepend_cwd=True",
        "--name",
        "dry",
        "--",
        "echo",
        "hi",
    )
    assert result.returncode == 0, result.stderr
    assert "=== SCHEDULER REQUEST ===" in result.stdout
    assert "prepend_cwd" in result.stdout or "PATH" in result.stdout
    [listed] = cli.each(("list", "--json"))
    assert json.loads(listed.stdout) == []


# -- a second process while the first supervises ---------------------------------------------------


def test_status_log_list_describe_cancel_from_a_second_process(
    cli: Cli, supervisor: tuple[subprocess.Popen[str], str]
) -> None:
    proc, handle = supervisor

    # one second process runs them one after another
    status, text, log, listed, described, cancel = cli.each(
        ("status", "--json", handle),
        ("status", handle),
        ("log", f"{handle}/sleeper/0"),
        ("list", "--json"),
        ("describe", "--json", handle),
        ("cancel", handle),
    )
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    assert data["state"] == "RUNNING"
    assert data["roles"][0]["role"] == "sleeper"

    assert "State: RUNNING" in text.stdout

    assert log.stdout == "sleeper/0 started\n"

    apps = json.loads(listed.stdout)
    assert {"app_handle": handle, "state": "RUNNING"}.items() <= apps[0].items()

    data = json.loads(described.stdout)
    assert data["roles"][0]["args"] == ["-c", "echo started; sleep 60"]

    assert cancel.returncode == 0, cancel.stderr
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert "CANCELLED" in stderr


def test_follow_logs_from_a_second_process_end_with_the_app(
    cli: Cli, tmp_path: Path
) -> None:
    ticks = "for i in 1 2 3; do echo tick$i; sleep 0.3; done"
    with reaped(cli.start("run", "--name", "ticker", "--", "sh", "-c", ticks)) as proc:
        assert proc.stdout is not None
        handle = proc.stdout.readline().strip()
        follow = cli("log", "-f", "--regex", "tick[13]", handle)
        assert follow.returncode == 0, follow.stderr
        assert follow.stdout.splitlines() == ["ticker/0 tick1", "ticker/0 tick3"]
        _, stderr = proc.communicate(timeout=30)
        assert proc.returncode == 0, stderr


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_during_run_wait_cancels_the_app(
    cli: Cli, supervisor: tuple[subprocess.Popen[str], str], sig: int, code: int
) -> None:
    proc, handle = supervisor
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == code
    assert f"cancelling {handle}" in stderr
    assert "CANCELLED" in stderr


def test_unknown_app_exits_1(cli: Cli) -> None:
    result, described = cli.each(
        ("status", "local_cwd://asyncsched/nope-123"),
        ("describe", "local_cwd://asyncsched/nope-123"),
    )
    assert result.returncode == 1
    assert "Unknown app" in result.stderr
    assert described.returncode == 1


def test_handle_in_an_unknown_app_error_pastes_back_into_the_cli(cli: Cli) -> None:
    logged = cli("log", "local_cwd://asyncsched/nope-123")
    assert logged.returncode == 1, logged.stderr
    [handle] = re.findall(r"\S+://\S+/nope-123", logged.stderr)
    assert handle == "local_cwd://asyncsched/nope-123", logged.stderr
    pasted = cli("status", handle)
    assert pasted.returncode == 1, pasted.stderr
    assert "Unknown app" in pasted.stderr, pasted.stderr


def test_an_unusable_log_dir_run_option_exits_2_like_every_bad_run_option(
    cli: Cli,
) -> None:
    # /proc takes no new directory, even from root (whom a permission check
    # before the submit lets through): the submit itself finds it unusable
    ran = cli("run", "-cfg", "log_dir=/proc/no-such-dir/logs", "--", "echo", "hi")
    assert ran.returncode == 2, ran.stderr
    assert "log dir" in ran.stderr, ran.stderr
    assert "/proc/no-such-dir" in ran.stderr, ran.stderr


def test_schedulers_and_runopts(cli: Cli) -> None:
    schedulers, opts = cli.each(("schedulers", "--json"), ("runopts", "local_cwd"))
    listed = json.loads(schedulers.stdout)
    assert listed["default"] == "local_cwd"
    assert "local_dir" in listed["schedulers"]
    assert opts.returncode == 0
    assert "log_dir" in opts.stdout
    version = cli("--version")
    assert version.stdout.startswith("asyncsched ")


def test_log_errors_are_one_line_and_debug_shows_the_traceback(
    cli: Cli, supervisor: tuple[subprocess.Popen[str], str]
) -> None:
    _, handle = supervisor
    unknown_role, bad_regex, debug = cli.each(
        ("log", f"{handle}/nope/0"),
        ("log", "--regex", "(unclosed", handle),
        ("--debug", "log", f"{handle}/nope/0"),
    )
    assert unknown_role.returncode == 2, unknown_role.stderr
    assert unknown_role.stderr.strip().splitlines() == [
        f"asyncsched log: error: app {handle} has no role 'nope'; roles: ['sleeper']"
    ]

    assert bad_regex.returncode == 2, bad_regex.stderr
    assert len(bad_regex.stderr.strip().splitlines()) == 1, bad_regex.stderr
    assert "invalid regex '(unclosed'" in bad_regex.stderr

    assert debug.returncode == 2
    assert "Traceback (most recent call last)" in debug.stderr
    assert debug.stderr.rstrip().endswith("roles: ['sleeper']")


# -- what a user sees: output by default, apps inspectable after `run` exits -----------


def test_run_streams_replica_output_by_default_and_no_log_silences_it(
    cli: Cli,
) -> None:
    shown = cli(
        "run", "--replicas", "2", "--", "sh", "-c", "echo hello-$ASYNCSCHED_REPLICA_ID"
    )
    assert shown.returncode == 0, shown.stderr
    assert "sh/0 hello-0" in shown.stderr
    assert "sh/1 hello-1" in shown.stderr
    assert shown.stdout.startswith("local_cwd://asyncsched/sh-")

    quiet = cli("run", "--no-log", "--", "sh", "-c", "echo hello")
    assert quiet.returncode == 0, quiet.stderr
    assert "hello" not in quiet.stderr
    assert "SUCCEEDED" in quiet.stderr


def test_finished_app_stays_inspectable_after_run_exits(cli: Cli) -> None:
    ran = cli("run", "--no-log", "--", "sh", "-c", "echo out; echo oops >&2; exit 3")
    assert ran.returncode == 1
    handle = ran.stdout.strip()

    status, described, combined, stdout, stderr, listed = cli.each(
        ("status", "--json", handle),
        ("describe", "--json", handle),
        ("log", f"{handle}/sh/0"),
        ("log", "--streams", "stdout", f"{handle}/sh/0"),
        ("log", "--streams", "stderr", f"{handle}/sh/0"),
        ("list", "--json"),
    )
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    assert data["handle"] == handle
    assert data["state"] == "FAILED"
    [replica] = data["roles"][0]["replicas"]
    assert (replica["state"], replica["exit_code"]) == ("FAILED", 3)

    data = json.loads(described.stdout)
    assert data["roles"][0]["args"] == ["-c", "echo out; echo oops >&2; exit 3"]
    # combined: both lines (two pipes cannot order lines written in one instant)
    assert sorted(combined.stdout.splitlines()) == ["sh/0 oops", "sh/0 out"]
    assert stdout.stdout == "sh/0 out\n"
    assert stderr.stdout == "sh/0 oops\n"
    apps = json.loads(listed.stdout)
    assert {"app_handle": handle, "state": "FAILED"}.items() <= apps[0].items()


def test_prune_forgets_finished_apps(cli: Cli) -> None:
    handles = [cli("run", "--no-log", "--", "true").stdout.strip() for _ in range(2)]
    dry = cli("prune", "--keep", "1", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"would remove {handles[0].rsplit('/', 1)[1]}" in dry.stdout
    assert cli("status", handles[0]).returncode == 0

    done = json.loads(cli("prune", "--keep", "1", "--json").stdout)
    assert done["removed"] == [handles[0].rsplit("/", 1)[1]]
    assert done["kept"] == 1
    assert cli("status", handles[0]).returncode == 1
    assert cli("status", handles[1]).returncode == 0


def test_bool_run_option_must_be_true_or_false(cli: Cli) -> None:
    result = cli("run", "-cfg", "prepend_cwd=maybe", "--", "true")
    assert result.returncode == 2
    assert "'maybe' is not a boolean; use one of ['false', 'true']" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_dryrun_prints_the_app_then_the_request(cli: Cli) -> None:
    result = cli("run", "--dryrun", "--env", "SEED=7", "--cpu", "2", "--", "echo", "hi")
    assert result.returncode == 0, result.stderr
    app_part, request_part = result.stdout.split("=== SCHEDULER REQUEST ===")
    assert app_part.startswith("=== APPLICATION ===\nname: echo\n")
    for text in ("entrypoint: echo", "- hi", "SEED: '7'", "num_replicas: 1", "cpu: 2"):
        assert text in app_part
    assert "'args': ['echo', 'hi']" in request_part


def test_mounts_on_local_cwd_are_warned_about(cli: Cli) -> None:
    result = cli(
        "run", "--no-log", "--mounts", "type=bind,src=/tmp,dst=/data", "--", "true"
    )
    assert result.returncode == 0, result.stderr
    assert (
        "asyncsched: warning: roles[0].mounts: the local scheduler runs replicas"
        " on this host and ignores 1 mount(s): bind /tmp:/data"
    ) in result.stderr


def test_concurrent_runs_and_a_prune_leave_a_readable_state_dir(
    cli: Cli, tmp_path: Path
) -> None:
    runs = [cli.start("run", "--no-log", "--", "sh", "-c", "echo x") for _ in range(4)]
    pruner = cli.start("prune", "--keep", "2")
    for proc in [*runs, pruner]:
        proc.communicate(timeout=60)
        assert proc.returncode == 0
    assert "unreadable" not in cli("prune", "--keep", "100").stderr
    state = tmp_path / "state"
    for pointer in (state / "local" / "asyncsched").glob("*.json"):
        app_dir = Path(json.loads(pointer.read_text())["app_dir"])
        assert json.loads((app_dir / "app.json").read_text())["finished"] is True
    listed = cli("list", "--json")
    assert listed.returncode == 0
    assert listed.stderr == ""
    assert 2 <= len(json.loads(listed.stdout)) <= 4
