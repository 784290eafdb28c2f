"""What a Slurm events cursor holds, without a cluster: a malformed or
foreign cursor is refused at the call; the job completion log resumes from
an offset and refuses a rotated or truncated file (the reader then gets
RESYNC, never a silent gap)."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import anyio
import pytest

from asyncsched.errors import InvalidArgumentError
from asyncsched.schedulers.kit import (
    AppEvent,
    AppSnapshot,
    ChangeNotifier,
    EventKind,
    ReplicaSnapshot,
    encode_cursor,
)
from asyncsched.schedulers.shared.ratewindow import RateWindow
from asyncsched.schedulers.slurm._cluster import parse_config
from asyncsched.schedulers.slurm._commands import SlurmCli
from asyncsched.schedulers.slurm._events import (
    MIN_EVENT_INTERVAL,
    SlurmEvents,
    leader_of,
)
from asyncsched.schedulers.slurm._jobcomp import JobCompLog
from asyncsched.schedulers.slurm._registry import JobRecord, Registry
from asyncsched.schedulers.slurm._state import AppView, Component
from asyncsched.schedulers.slurm_scheduler import SlurmScheduler
from asyncsched.specs import AppState

#: a cluster with accounting (slurmdbd)
ACCOUNTING = "ClusterName = a\nAccountingStorageType = accounting_storage/slurmdbd\n"

LINE = (
    "JobId={id} UserId=root(0) GroupId=root(0) Name=w-0 JobState=COMPLETED"
    " Partition=debug HetJobId={leader} HetJobOffset={off} ExitCode=0:0\n"
)


@pytest.mark.parametrize(
    "cursor",
    [
        "slurm.1.bm90LWpzb24",  # not JSON
        encode_cursor("slurm", {"t": 1.0}),  # no cluster
        encode_cursor("slurm", {"c": "x", "t": "yesterday"}),
        encode_cursor("slurm", {"c": "x", "t": 1.0, "o": "12"}),
        encode_cursor("docker", {"c": "x", "t": 1.0}),
    ],
)
def test_events_refuse_a_cursor_that_is_not_slurms_at_the_call(cursor: str) -> None:
    sched = SlurmScheduler("cursor")
    with pytest.raises(InvalidArgumentError):
        sched.events(since=cursor)


def test_cluster_identity_changes_with_the_controller_and_the_storage() -> None:
    base = "ClusterName = c\nSlurmctldPort = 6817\nJobCompType = jobcomp/filetxt\n"
    one = parse_config(base + "JobCompLoc = /a\n")
    assert one == parse_config(base + "JobCompLoc = /a\n")
    assert one.identity != parse_config(base + "JobCompLoc = /b\n").identity
    moved = base.replace("6817", "7000") + "JobCompLoc = /a\n"
    assert one.identity != parse_config(moved).identity
    dbd = parse_config(base + "AccountingStorageType = accounting_storage/slurmdbd\n")
    assert dbd.accounting
    assert one.identity != dbd.identity


def test_accounting_rows_name_their_app() -> None:
    assert [leader_of(i) for i in ("12", "12+1", "13+0")] == ["12", "12", "13"]


def test_completion_log_names_the_jobs_ended_after_a_position(tmp_path: Path) -> None:
    path = tmp_path / "jobcomp.txt"
    path.write_text(LINE.format(id=5, leader=5, off=0))
    log = JobCompLog(str(path))

    async def main() -> None:
        where = await log.position()
        assert where is not None
        with path.open("a") as fh:
            fh.write(LINE.format(id=7, leader=7, off=0))
            fh.write(LINE.format(id=8, leader=7, off=1))
            fh.write("JobId=9 UserId=root(0) Job")  # torn: still being written
        assert await log.ended_after(where) == {"7", "8", "9"}
        later = await log.position()
        assert later is not None
        assert later[0] < path.stat().st_size
        assert await log.ended_after(later) == {"9"}

    anyio.run(main)


def test_completion_log_started_empty_keeps_its_identity(tmp_path: Path) -> None:
    path = tmp_path / "jobcomp.txt"
    path.touch()
    log = JobCompLog(str(path))

    async def main() -> None:
        where = await log.position()
        assert where is not None
        path.write_text(LINE.format(id=5, leader=5, off=0))
        assert await log.ended_after(where) == {"5"}

    anyio.run(main)


@pytest.mark.parametrize("change", ["rotated", "truncated", "removed"])
def test_completion_log_replaced_cannot_honour_an_old_position(
    tmp_path: Path, change: str
) -> None:
    path = tmp_path / "jobcomp.txt"
    path.write_text(LINE.format(id=5, leader=5, off=0) * 3)
    log = JobCompLog(str(path))

    async def main() -> None:
        where = await log.position()
        assert where is not None
        if change == "rotated":
            os.rename(path, tmp_path / "jobcomp.txt.1")
            path.write_text(LINE.format(id=9, leader=9, off=0))
        elif change == "truncated":
            path.write_text(LINE.format(id=5, leader=5, off=0))
        else:
            path.unlink()
        assert await log.ended_after(where) is None

    anyio.run(main)


class _ConfigOnly:
    """A stand-in for the Slurm commands: ``scontrol show config``, and
    ``sacct -X -S`` answering ``accounted`` (the test's seam: no cluster)."""

    def __init__(self, config: str, accounted: tuple[str, ...] = ()) -> None:
        self.config = config
        self.accounted = accounted
        self.sacct: list[list[str]] = []

    async def run(self, argv: list[str], **_: object) -> str:
        if argv[0] == "sacct":
            self.sacct.append(list(argv))
            return "".join(f"{job}\n" for job in self.accounted)
        assert argv[:3] == ["scontrol", "show", "config"], argv
        return self.config


ListApps = Callable[[], Awaitable[list[AppSnapshot]]]


@dataclass
class Sources:
    """Builds event sources over a fake Slurm CLI (a config text, or a
    :class:`_ConfigOnly`) and one registry in the test's tmp dir, polling
    every 0.1 s (``min_event_interval=None``: the default floor, 2 s)."""

    state: Path

    def __call__(
        self,
        list_apps: ListApps,
        cli: str | _ConfigOnly = ACCOUNTING,
        *,
        registry: Registry | None = None,
        changes: ChangeNotifier | None = None,
        min_event_interval: float | None = 0.1,
    ) -> SlurmEvents:
        fake = cli if isinstance(cli, _ConfigOnly) else _ConfigOnly(cli)
        floor = (
            {}
            if min_event_interval is None
            else {"min_event_interval": min_event_interval}
        )
        return SlurmEvents(
            "slurm",
            cli=cast(SlurmCli, fake),
            window=RateWindow(60, 60.0),
            registry=registry or Registry(str(self.state)),
            list_apps=list_apps,
            changes=changes or ChangeNotifier(),
            min_interval=0.1,
            max_interval=0.1,
            **floor,
        )


@pytest.fixture
def sources(tmp_path: Path) -> Sources:
    return Sources(tmp_path / "state")


def _first_events(sources: Sources, config: str, since: str) -> list[AppEvent]:
    async def no_apps() -> list[AppSnapshot]:
        return []

    source = sources(no_apps, config)

    async def main() -> list[AppEvent]:
        stream = source.follow(since, lambda: True)
        return [await anext(stream)]

    return anyio.run(main)


def _cursor_of(config: str) -> str:
    now = time.time()
    return encode_cursor("slurm", {"c": parse_config(config).identity, "t": now})


def test_a_cursor_of_another_cluster_gives_resync(sources: Sources) -> None:
    mine = "ClusterName = a\nAccountingStorageType = accounting_storage/slurmdbd\n"
    other = "ClusterName = b\nAccountingStorageType = accounting_storage/slurmdbd\n"
    [event] = _first_events(sources, mine, _cursor_of(other))
    assert event.kind is EventKind.RESYNC


def test_without_accounting_or_completion_log_a_resume_gives_resync(
    sources: Sources,
) -> None:
    config = "ClusterName = a\nJobCompType = jobcomp/none\n"
    [event] = _first_events(sources, config, _cursor_of(config))
    assert event.kind is EventKind.RESYNC


def test_a_cursor_older_than_two_weeks_gives_resync(sources: Sources) -> None:
    config = "ClusterName = a\nAccountingStorageType = accounting_storage/slurmdbd\n"
    old = time.time() - 15 * 86400
    cursor = encode_cursor("slurm", {"c": parse_config(config).identity, "t": old})
    [event] = _first_events(sources, config, cursor)
    assert event.kind is EventKind.RESYNC


def _snap(app_id: str, state: AppState) -> AppSnapshot:
    code = 0 if state is AppState.SUCCEEDED else None
    return AppSnapshot(app_id, [ReplicaSnapshot("w", 0, state, exit_code=code)])


def test_a_reader_killed_mid_poll_gets_the_rest_of_that_poll_in_a_new_process(
    sources: Sources,
) -> None:
    """Poll 1: app 5 running. Poll 2: 5 succeeded, 6 submitted. The reader
    dies after 5's events of poll 2; a new source resumes from the last
    cursor it saved and sends 6 (unfinished) and 5 (accounting says it
    ended after the anchor) as CURRENT, and never app 4 (ended before)."""
    polls = [
        [_snap("4", AppState.SUCCEEDED), _snap("5", AppState.RUNNING)],
        [
            _snap("4", AppState.SUCCEEDED),
            _snap("5", AppState.SUCCEEDED),
            _snap("6", AppState.PENDING),
        ],
    ]

    def source(cli: _ConfigOnly, snapshots: list[list[AppSnapshot]]) -> SlurmEvents:
        async def list_apps() -> list[AppSnapshot]:
            return snapshots.pop(0) if len(snapshots) > 1 else snapshots[0]

        return sources(list_apps, cli)

    async def main() -> tuple[list[AppEvent], list[AppEvent], _ConfigOnly]:
        first = source(_ConfigOnly(ACCOUNTING), polls)
        stream = first.follow(None, lambda: True)
        seen = [await anext(stream) for _ in range(4)]  # 2 CURRENT, 5's 2 changes
        await stream.aclose()
        cli = _ConfigOnly(ACCOUNTING, accounted=("5+0", "6"))
        again = source(cli, [polls[-1]])
        resumed = again.follow(seen[-1].cursor, lambda: True)
        return seen, [await anext(resumed) for _ in range(2)], cli

    seen, resumed, cli = anyio.run(main)
    assert [(e.kind, e.app_id) for e in seen] == [
        (EventKind.CURRENT, "4"),
        (EventKind.CURRENT, "5"),
        (EventKind.REPLICA, "5"),
        (EventKind.APP, "5"),
    ]
    assert [(e.kind, e.app_id, e.state) for e in resumed] == [
        (EventKind.CURRENT, "5", AppState.SUCCEEDED),
        (EventKind.CURRENT, "6", AppState.PENDING),
    ]
    # one sacct of the allocations from a start time told which apps ended
    [argv] = cli.sacct
    assert {"-X", "-S", "-E"} <= set(argv)
    assert len({e.cursor for e in seen}) == len(seen)


@pytest.mark.parametrize(
    ("min_event_interval", "floor", "watched"),
    [(None, MIN_EVENT_INTERVAL, 5.0), (0.5, 0.5, 2.0)],
)
def test_a_reader_polls_at_most_once_per_two_seconds_while_all_changes(
    sources: Sources, min_event_interval: float | None, floor: float, watched: float
) -> None:
    """Every poll finds a change and the status poller signals changes all the
    time: the reader still runs one batched query per 2 s at most (by
    default; per ``min_event_interval`` when given)."""
    polls: list[float] = []
    changes = ChangeNotifier()

    async def list_apps() -> list[AppSnapshot]:
        polls.append(time.monotonic())
        state = AppState.RUNNING if len(polls) % 2 else AppState.PENDING
        return [_snap("5", state)]

    events = sources(list_apps, changes=changes, min_event_interval=min_event_interval)

    async def main() -> None:
        async def signal_changes() -> None:
            while True:
                changes.notify("5")
                await anyio.sleep(0.05)

        async def read() -> None:
            async for _ in events.follow(None, lambda: True):
                pass

        async with anyio.create_task_group() as tg:
            tg.start_soon(signal_changes)
            tg.start_soon(read)
            await anyio.sleep(watched)
            tg.cancel_scope.cancel()

    anyio.run(main)
    gaps = [b - a for a, b in itertools.pairwise(polls)]
    assert len(polls) >= 2
    assert min(gaps) >= floor - 0.05, gaps


@pytest.mark.parametrize("min_event_interval", [0, -1.0])
def test_a_floor_of_no_time_is_refused_at_construction(
    min_event_interval: float,
) -> None:
    with pytest.raises(InvalidArgumentError, match="min_event_interval"):
        SlurmScheduler("floor", min_event_interval=min_event_interval)


def _view(app_id: str, raw_state: str) -> AppSnapshot:
    row = Component(app_id, app_id, 0, "w-0", raw_state, 0, None)
    return AppView(app_id, [row], source="squeue").snapshot()


def test_a_job_completing_at_the_first_poll_is_not_lost_on_resume(
    tmp_path: Path, sources: Sources
) -> None:
    """Slurm writes a job's completion line when the job enters COMPLETING,
    which still reads as RUNNING: a reader that saw it so, then died, must
    get its end from the completion log after a resume."""
    log = tmp_path / "jobcomp.txt"
    log.write_text(
        LINE.format(id=4, leader=4, off=0) + LINE.format(id=5, leader=5, off=0)
    )
    config = f"ClusterName = a\nJobCompType = jobcomp/filetxt\nJobCompLoc = {log}\n"

    def source(snapshot: AppSnapshot) -> SlurmEvents:
        async def list_apps() -> list[AppSnapshot]:
            return [_view("4", "COMPLETED"), snapshot]

        return sources(list_apps, config)

    async def main() -> list[AppEvent]:
        with anyio.fail_after(30):
            return await read()

    async def read() -> list[AppEvent]:
        first = source(_view("5", "COMPLETING")).follow(None, lambda: True)
        seen = [await anext(first), await anext(first)]
        await first.aclose()
        assert [(e.app_id, e.state) for e in seen] == [
            ("4", AppState.SUCCEEDED),
            ("5", AppState.RUNNING),
        ]
        again = source(_view("5", "COMPLETED")).follow(seen[-1].cursor, lambda: True)
        return [await anext(again), await anext(again)]

    resumed = anyio.run(main)
    # (4 may come again: at-least-once at the resume boundary)
    assert (EventKind.CURRENT, "5", AppState.SUCCEEDED) in [
        (e.kind, e.app_id, e.state) for e in resumed
    ]


def test_a_job_not_yet_in_accounting_is_still_sent_on_resume(
    tmp_path: Path, sources: Sources
) -> None:
    """Accounting lags the controller: right after a job ended, ``sacct``
    may not list it yet. An app submitted since the cursor's anchor is sent
    on resume anyway; an older finished one is not."""
    registry = Registry(str(tmp_path / "state"))
    now = time.time()

    async def main() -> list[AppEvent]:
        await registry.add(JobRecord("4", now - 3600, "old", "/"))
        await registry.add(JobRecord("5", now, "new", "/"))

        async def list_apps() -> list[AppSnapshot]:
            return [_snap("4", AppState.SUCCEEDED), _snap("5", AppState.SUCCEEDED)]

        source = sources(list_apps, registry=registry)
        cursor = encode_cursor(
            "slurm", {"c": parse_config(ACCOUNTING).identity, "t": now - 5}
        )
        with anyio.fail_after(30):
            stream = source.follow(cursor, lambda: True)
            return [await anext(stream)]

    [event] = anyio.run(main)
    assert (event.kind, event.app_id, event.state) == (
        EventKind.CURRENT,
        "5",
        AppState.SUCCEEDED,
    )
