"""A replica may write in its own log dir while the supervisor works there: a
symlink or hardlink it plants where the supervisor creates or reads a file
never makes the supervisor write to, or change the mode of, the file it
points at."""

from __future__ import annotations

import logging
import os
import stat
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from asyncsched.schedulers.local._logs import ReplicaLog, create_log_files
from asyncsched.schedulers.local._open_files import OpenFiles
from asyncsched.schedulers.local._records import read_json, write_json_atomic
from asyncsched.schedulers.local_scheduler import LocalScheduler
from asyncsched.specs import AppState

from .conftest import app_of, sh_role

VICTIM_TEXT = b"the user's own file\n"


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(VICTIM_TEXT)
    victim.chmod(0o644)
    return victim


def _untouched(victim: Path) -> None:
    assert victim.read_bytes() == VICTIM_TEXT
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644


async def test_index_files_planted_as_links_are_not_written_through(
    tmp_path: Path,
) -> None:
    victim = _victim(tmp_path)
    # before its first output, the replica plants its three index names
    script = (
        'd=$(dirname "$TORCHELASTIC_ERROR_FILE");'
        f' ln -s {victim} "$d/stdout.idx"; ln -s {victim} "$d/combined.idx";'
        f' ln {victim} "$d/stderr.idx";'
        " echo out; echo err >&2"
    )
    async with LocalScheduler("s") as sched:
        app_id = await sched.submit(app_of(sh_role(script)), {})
        desc = await sched.wait(app_id, timeout=60)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
        _untouched(victim)
        # the logs are whole; only the times of its lines are unknown
        lines = [x async for x in sched.log_iter(app_id, "worker")]
        assert sorted(lines) == ["err\n", "out\n"]
        since = datetime.now(UTC) - timedelta(hours=1)
        stdout = [
            x
            async for x in sched.log_iter(
                app_id, "worker", since=since, streams="stdout"
            )
        ]
        assert stdout == ["out\n"]  # without an index, a line counts as just arrived
    _untouched(victim)


@pytest.mark.timeout(60)
async def test_a_fifo_planted_as_an_index_neither_freezes_the_supervisor_nor_log_iter(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # opening a FIFO with no reader for writing blocks: on the event loop, it
    # would freeze the scheduler
    script = 'mkfifo "$(dirname "$TORCHELASTIC_ERROR_FILE")/stdout.idx"; echo out'
    async with LocalScheduler("s") as sched:
        with caplog.at_level(logging.WARNING):
            app_id = await sched.submit(app_of(sh_role(script)), {})
            desc = await sched.wait(app_id, timeout=30)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
        assert any(
            "cannot create the index" in r.getMessage()
            and "stdout.idx" in r.getMessage()
            for r in caplog.records
        )
        since = datetime.now(UTC) - timedelta(hours=1)
        with anyio.fail_after(10):
            stdout = [
                x
                async for x in sched.log_iter(
                    app_id, "worker", since=since, streams="stdout"
                )
            ]
        assert stdout == ["out\n"]


@pytest.mark.timeout(60)
async def test_log_files_a_replica_replaces_while_running_are_not_written_through(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # once the first lines are in, the replica swaps its files for a symlink,
    # hardlinks and a FIFO (the unit case below forces every write to reopen)
    victim = _victim(tmp_path)
    script = (
        'd=$(dirname "$TORCHELASTIC_ERROR_FILE"); echo first; echo first >&2;'
        ' until [ -e "$d/stdout.idx" ] && [ -e "$d/stderr.idx" ]; do sleep 0.01; done;'
        " for f in stdout.log stderr.log combined.log stdout.idx; do"
        ' mv "$d/$f" "$d/moved-$f"; done;'
        ' ln -s "$VICTIM" "$d/stdout.log"; ln "$VICTIM" "$d/stderr.log";'
        ' ln "$VICTIM" "$d/stdout.idx"; mkfifo "$d/combined.log";'
        " echo second; echo second >&2"
    )
    role = sh_role(script)
    role.env["VICTIM"] = str(victim)
    async with LocalScheduler("s") as sched:
        app_id = await sched.submit(app_of(role), {})
        desc = await sched.wait(app_id, timeout=30)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED  # a FIFO froze nothing
    _untouched(victim)


@pytest.mark.timeout(30)
async def test_log_files_replaced_before_a_reopen_are_dropped_not_written_through(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    victim = _victim(tmp_path)
    d = tmp_path / "replica"
    # one file kept open: every write to another file reopens it
    log = ReplicaLog(str(d), create_log_files(str(d)), OpenFiles(1))
    log.write("stdout", b"first\n")
    log.write("stderr", b"first\n")
    for name in ("stdout.log", "stderr.log", "combined.log", "stdout.idx"):
        (d / name).rename(d / f"moved-{name}")
    (d / "stdout.log").symlink_to(victim)
    os.link(victim, d / "stderr.log")
    os.mkfifo(d / "combined.log")  # opening it for writing would block
    os.link(victim, d / "stdout.idx")
    with caplog.at_level(logging.WARNING):
        log.write("stdout", b"second\n")
        log.write("stderr", b"second\n")
    log.close()
    _untouched(victim)
    replaced = {
        os.path.basename(r.getMessage().split()[0])
        for r in caplog.records
        if "was removed or replaced" in r.getMessage()
    }
    assert replaced == {"stdout.log", "stderr.log", "combined.log"}
    assert (d / "moved-stdout.log").read_bytes() == b"first\n"
    assert (d / "moved-combined.log").read_bytes() == b"first\nfirst\n"


async def test_a_hardlinked_error_reply_keeps_the_linked_files_mode(
    tmp_path: Path,
) -> None:
    victim = _victim(tmp_path)
    script = 'ln "$VICTIM" "$TORCHELASTIC_ERROR_FILE"; exit 3'
    role = sh_role(script)
    role.env["VICTIM"] = str(victim)
    async with LocalScheduler("s") as sched:
        app_id = await sched.submit(app_of(role), {})
        desc = await sched.wait(app_id, timeout=60)
        assert desc is not None
        assert desc.state == AppState.FAILED
        # the reply is still read (its text is the victim's), only not chmodded
        replica = desc.roles_statuses[0].replicas[0]
        assert "the user's own file" in replica.structured_error_msg
    _untouched(victim)


def test_a_symlink_planted_at_the_records_temp_name_is_not_written_through(
    tmp_path: Path,
) -> None:
    victim = _victim(tmp_path)
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    record = app_dir / "app.json"
    tmp = app_dir / f".tmp-{os.getpid()}-{threading.get_ident()}-app.json"
    tmp.symlink_to(victim)
    write_json_atomic(str(record), {"app_id": "x"})
    _untouched(victim)
    assert read_json(str(record)) == {"app_id": "x"}
    assert not record.is_symlink()
    assert not tmp.exists()
    assert not tmp.is_symlink()
