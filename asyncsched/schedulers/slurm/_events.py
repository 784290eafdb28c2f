"""Slurm's native event source: one batched status query per interval, diffed,
with cursors a new process resumes from.

Slurm has no push interface. Each reader polls the apps of the registry with
the backend's batched status query (one ``squeue`` for the jobs on the
controller, plus one ``sacct`` for those that left it; an app known to be
finished costs nothing), at most once per interval (short after a change,
backing off to ``max_interval`` while nothing changes; readers of one
scheduler share a poll), and diffs each poll against the last
(:class:`~asyncsched.schedulers.kit.SnapshotDiffer`).

A cursor holds the cluster's identity and an *anchor*: the time of a poll
by which every change before it was delivered (the previous poll, or the
poll before the one that first saw the current state of the oldest
unfinished app), and
without accounting the job completion log's offset and identity at that poll.
The events of one poll carry the anchor before it, except the last, which
carries the anchor after it: a reader killed half-way through a poll's events
gets them again. A reader resuming from it (any process) polls every app, then sends a
CURRENT event for each app that is not finished and for each finished app
that ended after the anchor: with accounting, ``sacct -X -S <anchor - 60 s>
-E now`` names them (the overlap covers accounting's lag and small clock
skew); without it, the completion log's lines after the offset do. Other
finished apps are remembered silently. A cursor that cannot be honoured
(another cluster, the log rotated or unreadable, no completion log) yields
RESYNC and CURRENT of every app.

Example:
    >>> async def follow(sched: SlurmScheduler, saved: str | None) -> None:
    ...     async with sched.events(since=saved) as stream:
    ...         async for event in stream:
    ...             print(event.kind, event.app_id, event.state, event.cursor)
"""

from __future__ import annotations

import functools
import logging
import random
import re
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Any, TypeVar

import anyio

from asyncsched.errors import InvalidArgumentError, SchedulerUnavailableError
from asyncsched.schedulers.kit import (
    DAYS_IN_2_WEEKS,
    AppEvent,
    AppSnapshot,
    ChangeNotifier,
    EventKind,
    SnapshotDiffer,
    decode_cursor,
    encode_cursor,
    stamp_burst,
)
from asyncsched.schedulers.shared.ratewindow import RateWindow
from asyncsched.schedulers.slurm._cluster import ClusterInfo, parse_config
from asyncsched.schedulers.slurm._commands import CommandFailed, SlurmCli
from asyncsched.schedulers.slurm._jobcomp import JobCompLog, LogPosition
from asyncsched.schedulers.slurm._registry import Registry
from asyncsched.specs import is_terminal

__all__ = [
    "ACCOUNTING_OVERLAP",
    "MAX_CURSOR_AGE",
    "MIN_EVENT_INTERVAL",
    "SlurmEvents",
    "check_cursor",
    "leader_of",
]

logger = logging.getLogger(__name__)

#: seconds before a cursor's anchor that a resume asks accounting about
ACCOUNTING_OVERLAP = 60.0
#: a cursor older than this (the registry's horizon, two weeks) gives RESYNC
MAX_CURSOR_AGE = DAYS_IN_2_WEEKS * 86400.0
#: a reader polls at most this often (seconds), whatever ``min_interval``
#: (the default of the scheduler's ``min_event_interval``)
MIN_EVENT_INTERVAL = 2.0

_T = TypeVar("_T")
_LEADER = re.compile(r"^(\d+)")


@dataclass(frozen=True)
class _Poll:
    """One batched status query: when it started, the completion log's end
    just before, and every app it saw."""

    seq: int
    started: float
    log: LogPosition | None
    snapshots: list[AppSnapshot]


@dataclass(frozen=True)
class _Anchor:
    started: float
    log: LogPosition | None


def check_cursor(cursor: str, source: str) -> dict[str, Any]:
    """The position in a Slurm cursor.

    Raises:
        InvalidArgumentError: not a Slurm events cursor.
    """
    where = decode_cursor(cursor, source)
    log = where.get("o")
    if (
        not isinstance(where.get("c"), str)
        or not isinstance(where.get("t"), int | float)
        or not (
            log is None
            or (
                isinstance(log, list)
                and len(log) == 2
                and isinstance(log[0], int)
                and isinstance(log[1], str)
            )
        )
    ):
        raise InvalidArgumentError(f"not a Slurm events cursor: {cursor[:40]!r}")
    return where


@dataclass(eq=False)
class SlurmEvents:
    """The event source of one Slurm scheduler, shared by its readers.

    Args:
        source: The cursor prefix.
        cli: Runs the Slurm commands (``scontrol show config`` once per
            scheduler; ``sacct`` at a resume with accounting).
        window: The backend's ceiling on status commands, shared.
        registry: The jobs asyncsched submitted (maps the completion log's
            component ids to apps).
        list_apps: The registry's apps with their states: one batched query.
        changes: Woken by the backend's status poller when an app changes.
        min_interval: Shortest pause between two polls (at least
            ``min_event_interval``).
        max_interval: Longest pause while nothing changes.
        min_event_interval: The floor of the pause between two polls
            (default :data:`MIN_EVENT_INTERVAL`).

    Raises:
        InvalidArgumentError: ``min_event_interval`` is not above 0.
    """

    source: str
    _: KW_ONLY
    cli: SlurmCli
    window: RateWindow
    registry: Registry
    list_apps: Callable[[], Awaitable[list[AppSnapshot]]]
    changes: ChangeNotifier
    min_interval: float
    max_interval: float
    min_event_interval: float = MIN_EVENT_INTERVAL
    _lock: anyio.Lock = field(default_factory=anyio.Lock, init=False)
    _last: _Poll | None = field(default=None, init=False)
    _seq: int = field(default=0, init=False)
    _info: ClusterInfo | None = field(default=None, init=False)
    _log: JobCompLog | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if not self.min_event_interval > 0:
            raise InvalidArgumentError(
                f"min_event_interval must be above 0, got {self.min_event_interval}"
            )
        self.min_interval = max(self.min_event_interval, self.min_interval)
        self.max_interval = max(self.min_interval, self.max_interval)

    async def _cluster(self) -> ClusterInfo:
        """The cluster's identity and storage (``scontrol show config``, once)."""
        if self._info is None:
            info = parse_config(await self.cli.run(["scontrol", "show", "config"]))
            if info.jobcomp_path is not None and not info.accounting:
                self._log = JobCompLog(info.jobcomp_path)
            self._info = info
        return self._info

    async def _ended_since(self, start: float) -> set[str]:
        """Accounting's app ids of every job that existed after ``start``."""
        since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(start))
        await self.window.acquire()
        out = await self.cli.run(
            ["sacct", "-n", "-P", "-X", "-S", since, "-E", "now", "-o", "JobID"]
        )
        return {leader_of(line.strip()) for line in out.splitlines() if line.strip()}

    async def _leaders(self) -> dict[str, str]:
        """Each component's own job id -> its app id (the completion log
        names components by their own ids, consecutive from the leader's)."""
        out: dict[str, str] = {}
        for app_id, record in (await self.registry.all()).items():
            for k in range(record.num_components):
                out.setdefault(str(int(app_id) + k), app_id)
        return out

    # -- polls shared by the readers --------------------------------------------

    async def _poll(self, after: int) -> _Poll:
        """A poll newer than ``after`` (one another reader just ran, if any)."""
        async with self._lock:
            last = self._last
            if last is not None and last.seq > after:
                return last
            await self._cluster()
            log = None if self._log is None else await self._log.position()
            started = time.time()
            snapshots = await self.list_apps()
            self._seq += 1
            self._last = _Poll(self._seq, started, log, snapshots)
            return self._last

    # -- one reader ---------------------------------------------------------------

    async def follow(
        self, since: str | None, is_open: Callable[[], bool]
    ) -> AsyncGenerator[AppEvent, None]:
        """Every event after ``since`` (None: CURRENT of every app first)."""
        differ = SnapshotDiffer()
        # app -> the poll that first saw its current (unfinished) state
        state_since: dict[str, _Anchor] = {}
        poll = await self._retrying(functools.partial(self._poll, 0), is_open)
        if poll is None:
            return
        info = await self._cluster()
        changed: set[str] | None = None
        if since is not None:
            changed = await self._retrying(
                functools.partial(self._changed_since, since, info), is_open
            )
            if not is_open():
                return
        here = _Anchor(poll.started, poll.log)
        # the position before this first poll: the cursor resumed from, else
        # the start of the completion log
        if since is not None and changed is not None:
            previous = _resumed_anchor(since, self.source)
        else:
            previous = _Anchor(
                poll.started, None if poll.log is None else (0, poll.log[1])
            )
        _remember(differ, state_since, poll, previous)
        anchor = _anchor(poll, state_since)
        drafts: list[AppEvent] = []
        if since is not None and changed is None:
            drafts.append(
                AppEvent(
                    "",
                    EventKind.RESYNC,
                    observed=poll.started,
                    msg="cursor not honoured here (another cluster, or the record"
                    " of finished jobs is gone): current state follows",
                )
            )
        drafts.extend(
            e
            for e in differ.current()
            if changed is None or not is_terminal(e.state) or e.app_id in changed
        )
        # until the last of them is delivered, a resume sends them all again
        # (from the cursor resumed from, else a restart of the burst)
        last = self._cursor(info, anchor, here, max(0, len(drafts) - 1))
        resumed_from = since if changed is not None else None
        for event in stamp_burst(drafts, last, restart=resumed_from):
            yield event
        interval = self.min_interval
        while is_open():
            woken = self.changes.changed_any()
            # never sooner than the floor; a change signalled by the status
            # poller only cuts a longer (backed-off) pause short
            pause = max(self.min_interval, interval * random.uniform(0.9, 1.1))
            await anyio.sleep(self.min_interval)
            with anyio.move_on_after(pause - self.min_interval):
                await woken.wait()
            if not is_open():
                return
            newer = await self._retrying(
                functools.partial(self._poll, poll.seq), is_open
            )
            if newer is None:
                return
            previous, poll = here, newer
            here = _Anchor(poll.started, poll.log)
            drafts = differ.relist(poll.snapshots, observed=poll.started)
            _track(state_since, drafts, previous)
            # events of this poll resume from the anchor before it (a reader
            # killed half-way through them gets them again); once the last
            # is delivered, from the anchor after it
            before, anchor = anchor, _anchor(poll, state_since)
            for index, draft in enumerate(drafts):
                after = anchor if index == len(drafts) - 1 else before
                yield replace(draft, cursor=self._cursor(info, after, here, index))
            interval = (
                self.min_interval if drafts else min(interval * 1.5, self.max_interval)
            )

    async def _changed_since(self, since: str, info: ClusterInfo) -> set[str] | None:
        """App ids that may have changed after the cursor's anchor; None when
        that cannot be told (RESYNC)."""
        where = check_cursor(since, self.source)
        if where["c"] != info.identity:
            return None
        if where.get("a"):
            return {s.app_id for s in self._last.snapshots} if self._last else set()
        anchor = float(where["t"])
        if anchor < time.time() - MAX_CURSOR_AGE:
            return None  # older than the apps the registry lists
        if info.accounting:
            start = anchor - ACCOUNTING_OVERLAP
            # a job of the last few seconds may not be in accounting yet:
            # every app submitted since the start counts as changed too
            records = await self.registry.all()
            recent = {i for i, r in records.items() if r.submit >= start}
            return recent | await self._ended_since(start)
        log = where.get("o")
        if log is None or self._log is None:
            return None
        ended = await self._log.ended_after((int(log[0]), str(log[1])))
        if ended is None:
            return None
        leaders = await self._leaders()
        return {leaders.get(job_id, job_id) for job_id in ended}

    def _cursor(
        self,
        info: ClusterInfo,
        anchor: _Anchor,
        here: _Anchor,
        index: int,
    ) -> str:
        """The cursor resuming after the ``index``-th event of the poll at
        ``here``: from ``anchor``. ``e`` makes each event's cursor its own;
        resuming ignores it."""
        where: dict[str, Any] = {
            "c": info.identity,
            "t": round(anchor.started, 3),
            "e": [round(here.started, 3), index],
        }
        if anchor.log is not None:
            where["o"] = list(anchor.log)
        return encode_cursor(self.source, where)

    async def _retrying(
        self, call: Callable[[], Awaitable[_T]], is_open: Callable[[], bool]
    ) -> _T | None:
        """``call()`` until it answers (Slurm down or a command failing: back
        off and try again); None once the scheduler closed."""
        pause = self.min_interval
        while is_open():
            try:
                return await call()
            except (SchedulerUnavailableError, CommandFailed) as exc:
                logger.warning("slurm events: %s (retrying in %.0fs)", exc, pause)
                await anyio.sleep(pause)
                pause = min(pause * 2, self.max_interval)
        return None


def _resumed_anchor(cursor: str, source: str) -> _Anchor:
    where = check_cursor(cursor, source)
    log = where.get("o")
    return _Anchor(
        float(where["t"]), None if log is None else (int(log[0]), str(log[1]))
    )


def leader_of(job_id: str) -> str:
    """The app id of an accounting row id (``12+1`` -> ``12``)."""
    match = _LEADER.match(job_id)
    return match.group(1) if match else job_id


def _remember(
    differ: SnapshotDiffer,
    state_since: dict[str, _Anchor],
    poll: _Poll,
    previous: _Anchor,
) -> None:
    for snapshot in poll.snapshots:
        differ.update(snapshot, observed=poll.started)
        if not is_terminal(snapshot.state):
            state_since[snapshot.app_id] = previous


def _track(
    state_since: dict[str, _Anchor], drafts: list[AppEvent], previous: _Anchor
) -> None:
    """Each unfinished app's anchor: the poll *before* the one that first saw
    its current state. A job may read as unfinished after Slurm recorded its
    end (COMPLETING; the state slurmctld recovers after a restart), so only
    the poll before is sure to precede that record."""
    for draft in drafts:
        if draft.kind is EventKind.FORGOTTEN or is_terminal(draft.state):
            state_since.pop(draft.app_id, None)
        elif draft.kind in (EventKind.SUBMITTED, EventKind.APP):
            state_since[draft.app_id] = previous


def _anchor(poll: _Poll, state_since: dict[str, _Anchor]) -> _Anchor:
    """The oldest of this poll and the unfinished apps' anchors."""
    return min([_Anchor(poll.started, poll.log), *state_since.values()], key=_age)


def _age(anchor: _Anchor) -> tuple[float, int]:
    return anchor.started, 0 if anchor.log is None else anchor.log[0]
