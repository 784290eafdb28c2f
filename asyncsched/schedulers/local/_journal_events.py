"""``events()`` of the local backend: follow the session's event journal.

A reader opens the journal segment holding its position and reads the lines
after it: woken by the in-process writer's signal (apps of this process,
whose lines it takes from memory) or by the process's watch of the journal
(apps of other processes: see ``_journal_watch``). New lines the page cache
holds are read in the loop without waiting for the disk (Linux); anything
else (a new segment, a cold cache) is read by a worker thread. Cursors name the
journal (its random id) and a sequence number, so they resume in any process
of the same user. A cursor of another journal (deleted, recreated) or older
than the oldest kept segment, a gap line (a batch its writer failed to
append) and a jump in the numbers each give RESYNC, then CURRENT of every
app (read from memory and the app records).

Example:
    >>> encode_position("ab12", 7) == encode_cursor("local", {"j": "ab12", "s": 7})
    True
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel

from asyncsched.errors import InvalidArgumentError
from asyncsched.schedulers.events import replica_from_json
from asyncsched.schedulers.kit import (
    AppEvent,
    AppSnapshot,
    EventKind,
    SnapshotDiffer,
    decode_cursor,
    encode_cursor,
    stamp_burst,
)
from asyncsched.schedulers.local._journal import (
    JournalFile,
    parse_line,
    segment_first,
    segment_names,
)
from asyncsched.schedulers.local._journal_writer import REPLICA_DEFAULTS
from asyncsched.specs import NONE, AppState, is_terminal

__all__ = ("decode_position", "encode_position", "follow_journal")

#: a reader looks again at least this often, whatever woke it (seconds)
SAFETY_INTERVAL = 1.0
#: bytes one read takes from a segment (about 500 events)
_CHUNK = 256 << 10
#: events yielded between two checkpoints (a reader catching up never
#: holds the loop for long)
_BATCH = 64
#: bytes one read in the loop takes at most (about 60 events)
_NOWAIT_CHUNK = 16 << 10
#: reads that never wait for the disk: a read in the loop of what the page
#: cache holds (``preadv2(RWF_NOWAIT)``, Linux)
_HAS_NOWAIT = hasattr(os, "RWF_NOWAIT") and hasattr(os, "preadv")


#: ``JournalTail.after``: this process's lines after a number, and where
#: they end in the file
Recent = Callable[[str, int], tuple[list[dict[str, Any]], tuple[str, int]] | None]


def encode_position(journal_id: str, seq: int) -> str:
    """The cursor right after event ``seq`` of journal ``journal_id``."""
    return encode_cursor("local", {"j": journal_id, "s": seq})


def decode_position(cursor: str) -> tuple[str, int]:
    """(journal id, sequence number) of a local cursor.

    Raises:
        InvalidArgumentError: not a local events cursor.
    """
    position = decode_cursor(cursor, "local")
    journal_id, seq = position.get("j"), position.get("s")
    if not isinstance(journal_id, str) or not isinstance(seq, int) or seq < 0:
        raise InvalidArgumentError(
            f"malformed local events cursor {cursor[:40]!r}: no journal position"
        )
    return journal_id, seq


@dataclass
class _Reader:
    """A position in the journal's segments (blocking reads, one thread at a time)."""

    directory: str
    journal_id: str
    fd: int = -1
    first: int = 0
    offset: int = 0
    partial: bytes = b""
    header_seen: bool = False
    done: bool = field(default=False)
    #: (segment, offset) to read on from: lines before it were delivered
    seek: tuple[str, int] | None = None
    #: reads in the loop are possible here (False once the file system said no)
    nowait: bool = _HAS_NOWAIT
    #: the watch's segment count when the directory was last listed (a read
    #: in the loop at a segment's end is final while it has not changed)
    listed: int = -1

    def open_at(self, seq: int) -> None:
        """Read from the segment that holds event ``seq + 1``."""
        names = segment_names(self.directory)
        firsts = [segment_first(n) or 0 for n in names]
        chosen = [n for n, f in zip(names, firsts, strict=True) if f <= seq + 1]
        self._open(chosen[-1] if chosen else (names[0] if names else None))

    def _open(self, name: str | None) -> bool:
        self.close()
        if name is None:
            return False
        try:
            self.fd = os.open(
                os.path.join(self.directory, name),
                os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC,
            )
        except OSError:
            return False
        self.first = segment_first(name) or 0
        self.offset = 0
        self.partial = b""
        self.header_seen = False
        return True

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def read_events(
        self, segments: int | None = None
    ) -> list[tuple[int, bool, AppEvent | None]]:
        """(number, gap mark?, event or None if unreadable) of each new line,
        built here, in the worker thread (``segments``: see :meth:`read`)."""
        return self.events_of(self.read(segments))

    def events_of(
        self, lines: list[dict[str, Any]]
    ) -> list[tuple[int, bool, AppEvent | None]]:
        """(number, gap mark?, event or None if unreadable) of each line."""
        out: list[tuple[int, bool, AppEvent | None]] = []
        for line in lines:
            event: AppEvent | None = None
            gap = line.get("k") == "gap"
            if not gap:
                # a line this release cannot read is skipped
                with contextlib.suppress(KeyError, ValueError, TypeError):
                    event = _event(self.journal_id, line)
            out.append((int(line["s"]), gap, event))
        return out

    def read_nowait(self, segments: int | None) -> list[dict[str, Any]] | None:
        """The complete lines written since the last read, read in the loop
        without waiting for the disk (what the page cache holds, a few at a
        time); None when only a blocking :meth:`read` can tell. ``segments``
        is the watch's segment count (None: unknown): unchanged since the
        last :meth:`read`, the open segment is still the newest, so its end
        means nothing new ([])."""
        if not self.nowait or self.fd < 0:
            return None
        if self.seek is not None:
            name, offset = self.seek
            if segment_first(name) != self.first:
                return None  # another segment: opened by a blocking read
            self.seek = None
            self.offset, self.partial, self.header_seen = offset, b"", True
        buffer = bytearray(_NOWAIT_CHUNK)
        try:
            size = os.preadv(self.fd, [buffer], self.offset, os.RWF_NOWAIT)
        except BlockingIOError:
            return None  # not cached: read by a worker thread
        except OSError:
            self.nowait = False  # this file system reads no other way
            return None
        if size:
            return self._lines(bytes(buffer[:size]))
        return [] if segments is not None and segments == self.listed else None

    def read(self, segments: int | None = None) -> list[dict[str, Any]]:
        """The complete lines written since the last read ([] when none).
        ``segments``: the watch's segment count, taken before this read (kept
        if this read finds the open segment is the newest)."""
        if self.seek is not None:
            name, offset = self.seek
            self.seek = None
            if self.fd < 0 or segment_first(name) != self.first:
                self._open(name)
            if self.fd >= 0 and segment_first(name) == self.first:
                self.offset, self.partial, self.header_seen = offset, b"", True
        if self.fd < 0:
            self.open_at(0)
            if self.fd < 0:
                return []
        data = os.pread(self.fd, _CHUNK, self.offset)
        if not data:
            newer = [
                n
                for n in segment_names(self.directory)
                if (segment_first(n) or 0) > self.first
            ]
            if not newer:
                if segments is not None:
                    self.listed = segments
                return []
            # the segment is final once a newer one exists: read what is left
            data = os.pread(self.fd, _CHUNK, self.offset)
            if not data:
                for name in newer:
                    if self._open(name):
                        break
                return self.read(segments) if self.fd >= 0 else []
        return self._lines(data)

    def _lines(self, data: bytes) -> list[dict[str, Any]]:
        """The complete lines of ``data``, read at the current offset."""
        self.offset += len(data)
        chunks = (self.partial + data).split(b"\n")
        self.partial = chunks.pop()
        out = []
        for raw in chunks:
            line = parse_line(raw)
            if line is None:
                continue  # a torn line: skipped
            if not self.header_seen and "journal" in line:
                self.header_seen = True
                continue
            if isinstance(line.get("s"), int):
                out.append(line)
        return out


def _event(journal_id: str, line: dict[str, Any]) -> AppEvent:
    replicas = tuple(
        replica_from_json({**REPLICA_DEFAULTS, **r}) for r in line.get("rs", ())
    )
    role, index = line.get("r"), line.get("i")
    replica = next(
        (r for r in replicas if r.role == role and r.id == index),
        None,
    )
    return AppEvent(
        cursor=encode_position(journal_id, int(line["s"])),
        kind=EventKind(line["k"]),
        app_id=str(line.get("a", "")),
        state=AppState[line.get("st", "UNKNOWN")],
        observed=float(line.get("t", 0.0)),
        role=role,
        replica_id=index,
        replica=replica,
        msg=str(line.get("m", NONE)),
        num_restarts=int(line.get("n", 0)),
        replicas=replicas,
    )


def _older(event: AppEvent, floor: tuple[int, bool] | None) -> bool:
    """True when ``event`` is older than the CURRENT state ``floor`` gave."""
    if floor is None:
        return False
    restarts, terminal = floor
    return event.num_restarts < restarts or (terminal and not event.terminal)


async def follow_journal(
    journal: JournalFile,
    since: str | None,
    *,
    list_apps: Callable[[], Awaitable[list[AppSnapshot]]],
    appended: Callable[[], anyio.Event],
    is_open: Callable[[], bool],
    check: Callable[[], None] | None = None,
    recent: Recent | None = None,
    segments: Callable[[], int] | None = None,
) -> AsyncGenerator[AppEvent, None]:
    """Every journaled change after ``since`` (None: CURRENT of every app first).

    ``appended()`` is an event set at this process's next append and when
    the journal grew (the process's shared watch); ``recent(journal_id,
    seq)`` gives the lines after ``seq`` this process appended last and the
    file position after them (see ``JournalTail.after``), read without a
    worker-thread hop; ``segments()`` a count the process's watch raises
    whenever a segment may have been added (other lines are read in the loop
    while the page cache holds them: see ``_Reader.read_nowait``); ``check``
    (blocking, run in a worker thread) may refuse to read, before anything
    is read or created.
    """
    if check is not None:
        await anyio.to_thread.run_sync(check)
    info = await anyio.to_thread.run_sync(journal.ensure)
    journal_id, pos = info.journal_id, info.last
    # after CURRENT: lines appended before the list was read may be older
    # than what CURRENT said; those that would go back are left out
    floor: dict[str, tuple[int, bool]] = {}
    stale_until = 0

    async def current(kind_first: bool, msg: str) -> list[AppEvent]:
        nonlocal stale_until
        cursor = encode_position(journal_id, pos)
        out = []
        if kind_first:
            out.append(
                AppEvent(cursor, EventKind.RESYNC, observed=time.time(), msg=msg)
            )
        differ = SnapshotDiffer()
        now = time.time()
        for snapshot in await list_apps():
            differ.update(snapshot, observed=now)
        after = await anyio.to_thread.run_sync(journal.ensure)
        stale_until = after.last
        floor.clear()
        for draft in differ.current():
            floor[draft.app_id] = (draft.num_restarts, is_terminal(draft.state))
            out.append(draft)
        return stamp_burst(out, cursor)

    if since is None:
        for event in await current(False, ""):
            yield event
    else:
        want_id, seq = decode_position(since)
        if want_id == journal_id and info.first - 1 <= seq <= info.last:
            pos = seq
        else:
            why = (
                "the journal was recreated"
                if want_id != journal_id
                else "the journal no longer holds the events after the cursor"
            )
            for event in await current(True, f"{why}: current state follows"):
                yield event
    reader = _Reader(journal.directory, journal_id)
    try:
        await anyio.to_thread.run_sync(reader.open_at, pos)
        while is_open():
            woken = appended()
            kept = None if recent is None else recent(journal_id, pos)
            if kept is not None:  # this process's own lines: no read
                reader.seek = kept[1]
                lines = reader.events_of(kept[0])
            else:
                count = None if segments is None else segments()
                fresh = reader.read_nowait(count)
                if fresh is not None:  # no worker-thread hop
                    lines = reader.events_of(fresh)
                else:
                    lines = await anyio.to_thread.run_sync(reader.read_events, count)
            for count, (seq, lost, found) in enumerate(lines, 1):
                if count % _BATCH == 0:
                    await anyio.lowlevel.checkpoint()
                if seq <= pos:
                    continue  # before the cursor (the segment's start)
                if lost or seq != pos + 1:
                    pos = seq if lost else seq - 1
                    for resync in await current(
                        True, "events were lost (journal write failed or trimmed)"
                    ):
                        yield resync
                    if lost:
                        continue
                pos = seq
                if found is None:
                    continue
                if seq <= stale_until and _older(found, floor.get(found.app_id)):
                    continue
                yield found
            if not lines:
                with anyio.move_on_after(SAFETY_INTERVAL):
                    await woken.wait()
    finally:
        reader.close()
