"""``asyncsched events`` through the real CLI process, on the local backend."""

from __future__ import annotations

import json
import signal

import pytest

from asyncsched import AppEvent, EventKind
from asyncsched.schedulers.kit import cursor_source
from asyncsched.specs import AppState

from .process import Cli, reaped

pytest.importorskip("asyncsched.schedulers.local_scheduler")


def _finished(cli: Cli, script: str) -> str:
    done = cli("run", "--wait", "--no-log", "--", "sh", "-c", script)
    assert done.stdout.strip(), done.stderr
    return done.stdout.strip()


def test_events_prints_the_current_state_with_a_cursor_per_line_and_exits(
    cli: Cli,
) -> None:
    ok = _finished(cli, "exit 0")
    failed = _finished(cli, "exit 3")
    result = cli("events")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    by_handle = {line.split()[2]: line.split() for line in lines}
    assert set(by_handle) == {ok, failed}
    assert by_handle[ok][1] == "current"
    assert by_handle[ok][3] == "SUCCEEDED"
    assert by_handle[failed][3] == "FAILED"
    assert all(cursor_source(fields[-1]) == "runner" for fields in by_handle.values())


def test_events_json_prints_one_app_event_per_line_for_a_handle(cli: Cli) -> None:
    mine = _finished(cli, "exit 0")
    _finished(cli, "exit 0")
    result = cli("events", "--json", mine)
    assert result.returncode == 0, result.stderr
    events = [
        AppEvent.from_json(json.loads(line)) for line in result.stdout.splitlines()
    ]
    assert [(e.handle, e.kind, e.state) for e in events] == [
        (mine, EventKind.CURRENT, AppState.SUCCEEDED)
    ]


def test_events_since_a_cursor_never_leaves_a_silent_gap(cli: Cli) -> None:
    _finished(cli, "exit 0")
    first = cli("events")
    cursor = first.stdout.split()[-1]
    later = _finished(cli, "exit 5")
    resumed = cli("events", "--since", cursor)
    assert resumed.returncode == 0, resumed.stderr
    lines = [line.split() for line in resumed.stdout.splitlines()]
    # the later app's change is there: resumed exactly, or after RESYNC
    assert any(fields[2] == later and fields[3] == "FAILED" for fields in lines)
    if lines[0][1] != "submitted":
        assert lines[0][1] == "resync", resumed.stdout


def test_events_of_an_unknown_app_exits_1(cli: Cli) -> None:
    result = cli("events", "local_cwd://asyncsched/never-was")
    assert result.returncode == 1, result.stderr
    assert "never-was" in result.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--since", "not-a-cursor"], "cursor"),
        (["--since", "local.1.e30"], "runner"),
        (["nope"], "nope"),
        (["local_cwd://a/x", "local_cwd://b/y"], "one session"),
    ],
)
def test_events_bad_arguments_give_one_line_and_exit_2(
    cli: Cli, args: list[str], words: str
) -> None:
    result = cli("events", *args)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("asyncsched events: error: ")
    assert words in line


def test_events_follow_streams_changes_from_another_process_then_ends_quietly(
    cli: Cli,
) -> None:
    sleeper = ("run", "--wait", "--no-log", "--name", "sleeper", "--", "sleep", "60")
    with reaped(cli.start(*sleeper)) as run:
        assert run.stdout is not None
        handle = run.stdout.readline().strip()
        with reaped(cli.start("events", "--follow", handle)) as follow:
            assert follow.stdout is not None
            first = follow.stdout.readline().split()  # ready: its current state
            assert first[1:3] == ["current", handle], first
            cancelled = cli("cancel", handle)
            assert cancelled.returncode == 0, cancelled.stderr
            seen = [first]
            while seen[-1][3] != "CANCELLED":
                line = follow.stdout.readline()
                assert line, follow.stderr and follow.stderr.read()
                seen.append(line.split())
            assert all(fields[2] == handle for fields in seen)
            follow.stdout.close()  # the reader goes away: a quiet exit 0
            _, stderr = follow.communicate(timeout=30)
            assert follow.returncode == 0
            assert stderr == ""


def test_events_follow_ends_on_ctrl_c_with_130(cli: Cli) -> None:
    handle = _finished(cli, "exit 0")
    # the child gets SIGINT as a terminal's Ctrl-C would reach it, even when
    # this test runs with SIGINT ignored (a background job, nohup, CI): a
    # handled signal is reset to its default in the child at exec
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        follow = cli.start("events", "--follow", handle)
    finally:
        signal.signal(signal.SIGINT, previous)
    with reaped(follow):
        assert follow.stdout is not None
        first = follow.stdout.readline().split()  # ready: it follows
        assert first[1:3] == ["current", handle], first
        follow.send_signal(signal.SIGINT)
        _, stderr = follow.communicate(timeout=30)
        assert follow.returncode == 130, stderr
        assert stderr == "asyncsched events: interrupted\n"
