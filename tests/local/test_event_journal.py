"""The session's event journal: resumable across processes, private, bounded,
crash-safe, and never a silent gap (a lost write or trimmed history resyncs)."""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from asyncsched.errors import InvalidArgumentError
from asyncsched.schedulers.kit import AppEvent, EventKind, encode_cursor
from asyncsched.schedulers.local import (
    JournalBounds,
    LocalFaults,
    LocalScheduler,
    Retention,
    prune,
)
from asyncsched.specs import AppState

from ._helpers import killed_owner, until_gone
from .conftest import PY, app_of, py_role, sh_role

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


def journal_files(state_dir: Path, session: str) -> list[Path]:
    return sorted((state_dir / "events" / session).glob("seg-*.jsonl"))


async def until_terminal(
    stream: AsyncIterator[AppEvent],
    app_ids: set[str],
    timeout: float = 30,
    kinds: tuple[EventKind, ...] = (EventKind.APP, EventKind.CURRENT),
) -> list[AppEvent]:
    """Read ``stream`` until each of ``app_ids`` had a terminal event of ``kinds``."""
    got: list[AppEvent] = []
    left = set(app_ids)
    with anyio.fail_after(timeout):
        async for event in stream:
            got.append(event)
            if event.terminal and event.kind in kinds:
                left.discard(event.app_id)
            if not left:
                return got
    raise AssertionError(f"stream ended before {left} finished")


async def cursor_after(sched: LocalScheduler, app_id: str) -> str:
    """A cursor saved once ``app_id`` has ended (the CURRENT of a new stream)."""
    await sched.wait(app_id, timeout=30)
    async with sched.events([app_id]) as stream:
        event = await anext(stream)
    assert event.kind == EventKind.CURRENT
    assert event.terminal
    return event.cursor


async def test_a_new_process_resumes_from_a_saved_cursor_without_gap_or_resync(
    sched: LocalScheduler,
) -> None:
    saved = await cursor_after(sched, await sched.submit(app_of(sh_role("exit 0")), {}))
    later = await sched.submit(app_of(sh_role("exit 4")), {})
    await sched.wait(later, timeout=30)
    # a scheduler of a fresh process reads the journal from disk only
    code = (
        "import anyio, json, sys\n"
        "from asyncsched.schedulers.local import LocalScheduler\n"
        "async def main():\n"
        "    async with LocalScheduler('test') as s:\n"
        "        async with s.events(since=sys.argv[1]) as st:\n"
        "            async for e in st:\n"
        "                print(json.dumps(e.to_json()), flush=True)\n"
        "                if e.terminal and e.kind == 'app': return\n"
        "anyio.run(main)\n"
    )
    with anyio.fail_after(60):
        out = await anyio.run_process(
            [PY, "-c", code, saved],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    got = [json.loads(line) for line in out.stdout.decode().splitlines()]
    assert [e["kind"] for e in got] == ["submitted", "replica", "app"]
    assert {e["app_id"] for e in got} == {later}
    assert got[1]["replica"]["exit_code"] == 4
    assert got[-1]["state"] == "FAILED"


async def test_replica_exit_codes_and_restarts_are_events_in_order(
    sched: LocalScheduler, tmp_path: Path
) -> None:
    marker = tmp_path / "tried"
    role = py_role(
        f"import os, sys\np = {str(marker)!r}\n"
        "if os.path.exists(p): sys.exit(0)\nopen(p, 'w').close(); sys.exit(3)",
        max_retries=1,
    )
    # a stream without ``since`` starts at its first read: resume from a
    # cursor taken before the submit, so no change can fall before the start
    # (into the CURRENT burst) however late the first read comes
    warm_up = await sched.submit(app_of(py_role("pass")), {})
    start = await cursor_after(sched, warm_up)
    async with sched.events(since=start) as stream:
        app_id = await sched.submit(app_of(role), {})
        events = await until_terminal(stream, {app_id})
    replica = [
        (e.replica.state, e.replica.exit_code, e.replica.num_restarts)
        for e in events
        if e.kind == EventKind.REPLICA and e.replica is not None
    ]
    assert replica == [
        (AppState.PENDING, 3, 0),  # the failed attempt, with its exit code
        (AppState.RUNNING, None, 1),  # the restart
        (AppState.SUCCEEDED, 0, 1),
    ]
    assert events[-1].state == AppState.SUCCEEDED
    assert events[-1].num_restarts == 1
    cursors = [e.cursor for e in events if e.kind != EventKind.CURRENT]
    assert len(set(cursors)) == len(cursors)


async def test_journal_files_are_private_whatever_the_umask(
    sched: LocalScheduler, state_dir: Path
) -> None:
    old = os.umask(0)
    try:
        app_id = await sched.submit(app_of(sh_role("exit 0")), {})
        await sched.wait(app_id, timeout=30)
    finally:
        os.umask(old)
    events_dir = state_dir / "events"
    assert stat.S_IMODE(events_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((events_dir / "test").stat().st_mode) == 0o700
    files = list((events_dir / "test").iterdir())
    assert journal_files(state_dir, "test")
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


async def test_a_torn_last_line_is_skipped_and_the_journal_goes_on(
    sched: LocalScheduler, state_dir: Path
) -> None:
    saved = await cursor_after(sched, await sched.submit(app_of(sh_role("exit 0")), {}))
    # a writer killed in the middle of its write
    [segment] = journal_files(state_dir, "test")
    with segment.open("ab") as f:
        f.write(b'{"s":99,"k":"app","a":"torn-app","st":"RUNN')
    later = await sched.submit(app_of(sh_role("exit 0")), {})
    async with sched.events(since=saved) as stream:
        events = await until_terminal(stream, {later})
    assert EventKind.RESYNC not in {e.kind for e in events}, events
    assert "torn-app" not in {e.app_id for e in events}
    assert [e.kind for e in events] == [
        EventKind.SUBMITTED,
        EventKind.REPLICA,
        EventKind.APP,
    ]


async def test_history_beyond_the_bound_resyncs_and_disk_use_stays_bounded(
    state_dir: Path,
) -> None:
    bounds = JournalBounds(segment_bytes=2000, segments=2)
    async with LocalScheduler("small", journal_bounds=bounds) as sched:
        first = await sched.submit(app_of(sh_role("exit 0")), {})
        saved = await cursor_after(sched, first)
        ids = {first}
        for _ in range(12):
            app_id = await sched.submit(app_of(sh_role("exit 0")), {})
            await sched.wait(app_id, timeout=30)
            ids.add(app_id)
        files = journal_files(state_dir, "small")
        assert len(files) <= 2
        # a segment ends at the first batch past its bound
        assert sum(f.stat().st_size for f in files) <= 2 * (2000 + 2000)
        async with sched.events(since=saved) as stream:
            events = await until_terminal(stream, set(ids))
    assert events[0].kind == EventKind.RESYNC
    current = {e.app_id: e.state for e in events[1:] if e.kind == EventKind.CURRENT}
    assert current == dict.fromkeys(ids, AppState.SUCCEEDED)


async def test_a_failed_journal_write_keeps_the_app_right_and_the_reader_resyncs() -> (
    None
):
    disk = {"full": False}

    def disk_full(path: str) -> None:
        if disk["full"]:
            raise OSError(errno.ENOSPC, "No space left on device")

    async with LocalScheduler(
        "full", faults=LocalFaults(before_journal=disk_full)
    ) as s:
        async with s.events() as stream:
            first = await s.submit(app_of(sh_role("exit 0")), {})
            await until_terminal(stream, {first})
            disk["full"] = True
            lost = await s.submit(app_of(sh_role("exit 5")), {})
            desc = await s.wait(lost, timeout=30)
            assert desc is not None
            assert desc.state == AppState.FAILED  # supervised all the same
            disk["full"] = False  # the disk has room again
            after = await s.submit(app_of(sh_role("exit 0")), {})
            events = await until_terminal(stream, {lost, after})
    # nothing of the lost batch went missing silently: RESYNC comes first
    later = [e for e in events if e.app_id in (lost, after) or not e.app_id]
    assert later[0].kind == EventKind.RESYNC, later
    current = {e.app_id: e.state for e in events if e.kind == EventKind.CURRENT}
    assert current[lost] == AppState.FAILED


async def test_pruning_an_app_tells_readers_it_is_forgotten(
    sched: LocalScheduler, state_dir: Path
) -> None:
    kept = await sched.submit(app_of(sh_role("exit 0")), {})
    saved = await cursor_after(sched, kept)
    pruned = await sched.submit(app_of(sh_role("exit 1")), {})
    await sched.wait(pruned, timeout=30)
    report = await anyio.to_thread.run_sync(
        prune, str(state_dir), Retention(max_apps=1, max_age_days=None)
    )
    assert report.removed == [kept]
    async with sched.events(since=saved) as stream:
        with anyio.fail_after(30):
            events = [await anext(stream) for _ in range(4)]
    assert [(e.kind, e.app_id) for e in events] == [
        (EventKind.SUBMITTED, pruned),
        (EventKind.REPLICA, pruned),
        (EventKind.APP, pruned),
        (EventKind.FORGOTTEN, kept),
    ]
    assert events[-1].state == AppState.SUCCEEDED


async def test_a_cursor_of_another_journal_resyncs(sched: LocalScheduler) -> None:
    app_id = await sched.submit(app_of(sh_role("exit 0")), {})
    await sched.wait(app_id, timeout=30)
    other = encode_cursor("local", {"j": "0123456789abcdef", "s": 3})
    async with sched.events(since=other) as stream:
        events = await until_terminal(stream, {app_id})
    assert [e.kind for e in events] == [EventKind.RESYNC, EventKind.CURRENT]


async def test_a_cursor_without_a_journal_position_is_refused_at_the_call(
    sched: LocalScheduler,
) -> None:
    with pytest.raises(InvalidArgumentError, match="journal position"):
        sched.events(since=encode_cursor("local", {"seq": 3}))


async def test_two_sessions_write_their_own_journals(state_dir: Path) -> None:
    async with (
        LocalScheduler("one") as one,
        LocalScheduler("two") as two,
        one.events() as ones,
        two.events() as twos,
    ):
        a = await one.submit(app_of(sh_role("exit 0")), {})
        b = await two.submit(app_of(sh_role("exit 0")), {})
        got_one = await until_terminal(ones, {a})
        got_two = await until_terminal(twos, {b})
    assert {e.app_id for e in got_one} == {a}
    assert {e.app_id for e in got_two} == {b}
    assert journal_files(state_dir, "one")
    assert journal_files(state_dir, "two")


WRITER = """
import sys
from asyncsched.schedulers.local._journal import JournalFile
journal = JournalFile(sys.argv[1], segment_bytes=20000, segments=1000)
for i in range(int(sys.argv[3])):
    journal.append([{"k": "app", "a": f"{sys.argv[2]}-{i}-{j}", "pad": "x" * 300}
                    for j in range(3)])
"""


async def test_concurrent_writers_of_one_session_never_tear_or_reuse_numbers(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "journal"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    async def writer(name: str) -> None:
        command = [sys.executable, "-c", WRITER, str(directory), name, "200"]
        await anyio.run_process(command, env=env)

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            for name in ("a", "b", "c"):
                tg.start_soon(writer, name)
    seqs: list[int] = []
    apps: set[str] = set()
    for segment in sorted(directory.glob("seg-*.jsonl")):
        lines = segment.read_bytes().split(b"\n")
        assert lines.pop() == b""
        header = json.loads(lines[0])
        assert "journal" in header
        for line in lines[1:]:
            data = json.loads(line)  # never torn
            seqs.append(data["s"])
            apps.add(data["a"])
    assert seqs == list(range(1, 3 * 200 * 3 + 1))
    assert len(apps) == 3 * 200 * 3
    assert len(list(directory.glob("seg-*.jsonl"))) > 1  # rotated meanwhile


def test_journal_bounds_are_checked() -> None:
    with pytest.raises(InvalidArgumentError, match="segments"):
        JournalBounds(segments=1)
    with pytest.raises(InvalidArgumentError, match="tail_batches"):
        JournalBounds(tail_batches=0)
    # the documented defaults
    assert (JournalBounds().segments, JournalBounds().tail_batches) == (4, 256)
    with pytest.raises(InvalidArgumentError, match="journal_bounds"):
        LocalScheduler("x", journal_bounds=4096)  # type: ignore[arg-type]


async def test_the_end_of_an_app_whose_supervisor_was_killed_is_journaled_once(
    log_dir: Path,
) -> None:
    async with LocalScheduler("owned") as sched:
        saved = await cursor_after(
            sched, await sched.submit(app_of(sh_role("exit 0")), {})
        )
        # killed (SIGKILL): the app never journals its end
        async with killed_owner("_owner", str(log_dir), "sleep 60", "1") as (_, line):
            info = json.loads(line)  # its replica runs
        app_id = info["app_id"]
        await until_gone(info["pids"], timeout=30)  # the guardian takes it down
        for _ in range(2):  # a second reader finds it journaled already
            async with sched.events(since=saved) as stream:
                events = await until_terminal(stream, {app_id})
            assert EventKind.RESYNC not in {e.kind for e in events}
            ends = [e for e in events if e.app_id == app_id and e.terminal]
            assert [(e.kind, e.state) for e in ends] == [
                (EventKind.APP, AppState.FAILED)
            ]
            assert ends[0].replicas[0].reason is not None
            assert ends[0].replicas[0].reason.name == "NODE_FAILURE"
