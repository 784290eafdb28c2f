"""Replica logs: the files a replica's output goes to, the line-time index, reading.

The scheduler's reaper (:mod:`~asyncsched.schedulers.local._reaper`) hands
each chunk a pipe yields to :meth:`ReplicaLog.write`, which copies it to
``stdout.log``/``stderr.log`` as it arrives and appends the *whole lines* it completes to ``combined.log``; so
``combined.log`` holds stdout and stderr lines in the order the supervisor
received them, never torn. Every write is recorded in ``<stream>.idx`` as a
16-byte ``(end_offset, epoch_seconds)`` entry (little-endian ``u64, f64``), so
the arrival time of any line is the time of the chunk that completed it:
``since``/``until`` work on real times.

Writes go straight to the files with ``os.write`` from the loop: each is one
page-cache copy of at most one pipe buffer (64 KiB), microseconds, far cheaper
than a thread hop per chunk; the per-line cost is zero (lines are only found
with ``bytes.rfind``). A replica holds no log or index file open: the scheduler
keeps a bounded set of recently written ones open
(:mod:`~asyncsched.schedulers.local._open_files`) and reopens any other
(``O_APPEND|O_NOFOLLOW``, checked to be the very file created), so a running
replica holds only its two pipe read ends and its pidfd in the scheduler
process.

While someone in this process follows a stream, each chunk appended to it
also goes to the stream's in-memory window
(:mod:`~asyncsched.schedulers.local._log_window`), where the follower takes
it without reading the file again.

Reading (:func:`read_line_batches`) is the other way round: the open, every
read and every index read run in a worker thread, never on the loop, and the
lines are cut by the shared, capped
:class:`~asyncsched.schedulers.shared.lines.LineAssembler`. With ``since``
the reader seeks: a binary search in the index finds the first chunk that
arrived at or after it, and reading starts at the line holding it; the index
is read a window at a time, so memory stays bounded whatever the log's age.

Example:
    >>> paths = log_paths("/logs/sess/app-x/trainer/0")
    >>> paths["combined"]
    '/logs/sess/app-x/trainer/0/combined.log'
"""

from __future__ import annotations

import array
import bisect
import contextlib
import logging
import os
import struct
import sys
import time
from collections.abc import AsyncGenerator, Iterator
from datetime import UTC, datetime

import anyio
import anyio.to_thread

from asyncsched.schedulers.kit import (
    DEFAULT_MAX_LINE_BYTES,
    ChangeSignal,
    Follow,
    LineAssembler,
    follow_file,
)
from asyncsched.schedulers.local._log_follow import Block, follow_replica_log
from asyncsched.schedulers.local._log_window import Chunk, LogWindow
from asyncsched.schedulers.local._open_files import (
    FileId,
    OpenFiles,
    open_regular_file,
)
from asyncsched.schedulers.shared.state_dir import PRIVATE_FILE_MODE, makedirs_private

__all__ = [
    "INDEX_ENTRY",
    "STREAMS",
    "FileId",
    "Follow",
    "LogFiles",
    "ReplicaLog",
    "create_log_files",
    "index_path",
    "log_paths",
    "read_line_batches",
]

logger = logging.getLogger(__name__)

STREAMS = ("stdout", "stderr", "combined")
INDEX_ENTRY = struct.Struct("<Qd")
_READ_SIZE = 1 << 20  # one read of a log file (a worker-thread hop each)
_FEED_SIZE = 1 << 16  # ...assembled in slices whose lines stay in the CPU cache
_COMBINED_PARTIAL_LIMIT = 1 << 16  # an unterminated line longer than this is flushed
#: a log or index file is always created here, never opened: a name a replica
#: planted first (a symlink, a hardlink, a FIFO) fails instead of being written
_CREATE = (
    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_APPEND | os.O_CLOEXEC
)

#: ``{stream: FileId}`` of a replica's log files
LogFiles = dict[str, FileId]


def log_paths(replica_dir: str) -> dict[str, str]:
    """``{stream: <replica_dir>/<stream>.log}`` for the three streams."""
    return {s: os.path.join(replica_dir, f"{s}.log") for s in STREAMS}


def index_path(replica_dir: str, stream: str) -> str:
    """The line-time index of ``stream``: ``<replica_dir>/<stream>.idx``."""
    return os.path.join(replica_dir, f"{stream}.idx")


def create_log_files(replica_dir: str) -> LogFiles:
    """Create the replica dir and its three log files; return their identities.

    Blocking (runs in a worker thread). The files must not exist yet
    (``FileExistsError``): they are created, never opened through a name
    someone else made. Directories are created ``0700`` and files are
    ``0600``, whatever the umask: logs may hold secrets. No descriptor stays
    open: :class:`ReplicaLog` reopens a file when it writes to it (unless it
    is among the recently written ones kept open) and checks that it is
    still this one. The index files are created by :class:`ReplicaLog`
    on the first write of each stream (file creation is the expensive part of
    starting a replica), the same way.
    """
    makedirs_private(replica_dir)
    return {s: _create(os.path.join(replica_dir, f"{s}.log")) for s in STREAMS}


def _create(path: str) -> FileId:
    """Create ``path`` (0600, never through an existing name); its identity."""
    fd = os.open(path, _CREATE, PRIVATE_FILE_MODE)
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)  # whatever the umask (a new file)
        st = os.fstat(fd)
    finally:
        os.close(fd)
    return st.st_dev, st.st_ino


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class ReplicaLog:
    """The log files of one replica, written by the supervisor across attempts.

    It holds no descriptor of its own: its files are appended to through
    ``open_files``, shared by the scheduler's replicas and bounded, which
    reopens a file (checked to be the one created) when it is not among the
    recently written ones; so a running replica costs the scheduler only its
    pipes and pidfd. A file that is gone or no longer the one created (the
    replica replaced it) is dropped with a warning.
    """

    def __init__(
        self, replica_dir: str, files: LogFiles, open_files: OpenFiles
    ) -> None:
        self.dir = replica_dir
        self._open = open_files
        self.paths = log_paths(replica_dir)
        #: identity of each log file; None once dropped
        self._logs: dict[str, FileId | None] = dict(files)
        #: identity of each index; missing: not created yet; None: none
        self._index: dict[str, FileId | None] = {}
        self.sizes = dict.fromkeys(STREAMS, 0)  # the files were just created
        self._partial = {"stdout": b"", "stderr": b""}
        self._changes = ChangeSignal()
        #: set once no more data will ever be written (the replica is final)
        self.final = anyio.Event()
        self._closed = False
        #: the chunks of each stream someone in this process follows (made
        #: with the first follower: most replicas are never followed)
        self._windows: dict[str, LogWindow] | None = None

    def changed(self) -> anyio.Event:
        """An event set on the next write (or when the log becomes final)."""
        return self._changes.changed()

    def _append(self, stream: str, data: bytes, now: float) -> None:
        file_id = self._logs[stream]
        if file_id is None:
            return
        path = self.paths[stream]
        try:
            written = self._write(path, file_id, data)
        except BaseException:
            window = self._windows.pop(stream, None) if self._windows else None
            if window is not None:  # the file may hold part of it: read there
                window.stop()
            raise
        if not written:
            self._logs[stream] = None
            return
        self.sizes[stream] += len(data)
        if self._windows:
            window = self._windows.get(stream)
            if window is not None:
                window.add(data, now)
        entry = INDEX_ENTRY.pack(self.sizes[stream], now)
        if stream not in self._index:
            self._create_index(stream, entry)
            return
        idx_id = self._index[stream]
        if idx_id is None:
            return
        if not self._write(self._index_path(stream), idx_id, entry):
            self._index[stream] = None

    def _index_path(self, stream: str) -> str:
        """:func:`index_path` of ``stream`` (``<stream>.log`` -> ``.idx``, no path walk)."""
        return self.paths[stream][:-4] + ".idx"

    def _write(self, path: str, file_id: FileId, data: bytes) -> bool:
        """Append ``data`` to ``path`` if it is still the file created."""
        fd = self._open.get(path, file_id)
        if fd < 0:
            logger.warning("%s was removed or replaced: no longer written", path)
            return False
        try:
            _write_all(fd, data)
        except OSError:
            self._open.discard(path)
            raise
        return True

    def _create_index(self, stream: str, entry: bytes) -> None:
        """Create the index of ``stream`` on its first write, with its first entry.

        The replica runs by then and may write in its dir: a name it planted
        (a symlink, a hardlink to another file) makes the creation fail, and
        that stream goes without an index, rather than being followed.
        """
        path = self._index_path(stream)
        try:
            fd = os.open(path, _CREATE, PRIVATE_FILE_MODE)
        except OSError as exc:
            logger.warning("cannot create the index %s: %s", path, exc)
            self._index[stream] = None
            return
        try:
            os.fchmod(fd, PRIVATE_FILE_MODE)
            st = os.fstat(fd)
        except OSError:
            os.close(fd)
            raise
        file_id = self._index[stream] = (st.st_dev, st.st_ino)
        self._open.keep(path, fd)
        self._write(path, file_id, entry)

    def write(self, stream: str, data: bytes) -> None:
        """Record a chunk read from ``stream``'s pipe (stdout or stderr)."""
        if self._closed or not data:
            return
        now = time.time()
        self._append(stream, data, now)
        pending = self._partial[stream] + data if self._partial[stream] else data
        cut = pending.rfind(b"\n")
        if cut >= 0:
            self._append("combined", pending[: cut + 1], now)
            self._partial[stream] = pending[cut + 1 :]
        elif len(pending) > _COMBINED_PARTIAL_LIMIT:
            self._append("combined", pending, now)
            self._partial[stream] = b""
        else:
            self._partial[stream] = pending
        self._changes.notify()

    def end_stream(self, stream: str) -> None:
        """The pipe of ``stream`` closed: move its unterminated tail to combined."""
        tail, self._partial[stream] = self._partial[stream], b""
        if tail and not self._closed:
            self._append("combined", tail, time.time())
            self._changes.notify()

    def join_window(self, stream: str) -> tuple[LogWindow, int] | None:
        """Follow ``stream`` from memory: its window (made on the first
        follower, starting at the stream's current size) and a follower
        token for :meth:`LogWindow.take` and :meth:`leave_window`; None once
        the log is closed (read the file)."""
        if self._closed or self._logs.get(stream) is None:
            return None
        if self._windows is None:
            self._windows = {}
        window = self._windows.get(stream)
        if window is None:
            window = self._windows[stream] = LogWindow(self.sizes[stream])
        return window, window.join(window.end)

    def leave_window(self, stream: str, window: LogWindow, reader: int) -> None:
        """A follower is done; the window goes with its last follower."""
        window.leave(reader)
        windows = self._windows
        if not window.followers and windows and windows.get(stream) is window:
            del windows[stream]

    def offsets(self) -> dict[str, int]:
        """Current size of each stream's log (where the next attempt starts)."""
        return dict(self.sizes)

    def set_final(self) -> None:
        """No more data will come: wake and release every tailer."""
        self.final.set()
        self._changes.notify()

    def close(self) -> None:
        """Stop writing and close the files (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for stream in STREAMS:
            self._open.discard(self.paths[stream])
            self._open.discard(self._index_path(stream))
        self.set_final()


# -- reading -------------------------------------------------------------------


def _as_epoch(when: datetime | None) -> float | None:
    if when is None:
        return None
    if when.tzinfo is None:  # naive datetimes are UTC (the documented contract)
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


#: index entries loaded at a time (16 bytes each): memory does not grow with the log
_WINDOW_ENTRIES = 4096
#: bytes read at a time when looking back for the start of a line
_BACK_READ = 1 << 16


def _find_first(fd: int, lo: int, hi: int, at_least: float, field: int) -> int:
    """The first entry number in ``[lo, hi)`` whose ``field`` (0: end offset,
    1: time) is >= ``at_least`` (``hi`` if none): a binary search on the file."""
    size = INDEX_ENTRY.size
    while lo < hi:
        mid = (lo + hi) // 2
        raw = os.pread(fd, size, mid * size)
        if len(raw) < size:  # the file shrank: treat as the end
            hi = mid
            continue
        if INDEX_ENTRY.unpack(raw)[field] >= at_least:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _unpack(raw: bytes) -> tuple[list[int], list[float]]:
    """Whole ``(end_offset, time)`` entries of ``raw`` as two lists."""
    both = array.array("Q")
    both.frombytes(raw[: len(raw) - len(raw) % INDEX_ENTRY.size])
    if sys.byteorder != "little":  # pragma: no cover - the index is little-endian
        both.byteswap()
    times = array.array("d")
    times.frombytes(both[1::2].tobytes())
    return both[0::2].tolist(), times.tolist()


class _Index:
    """The ``(end_offset, time)`` entries of one stream, read on demand.

    Never loads the whole index: a binary search on the file (fixed-size
    entries, end offsets increasing) finds where to start, and a window of
    :data:`_WINDOW_ENTRIES` entries is kept in memory. Times are taken as
    increasing too (wall-clock arrival times); should the clock step back, a
    ``since`` bound is approximate around that step.
    """

    def __init__(self, path: str) -> None:
        self._path = path
        self._first = 0  # entry number of the window's first entry
        self.ends: list[int] = []
        self.times: list[float] = []

    def _open(self) -> int | None:
        """The index file, or None when missing or not a regular file of its own
        (a symlink or FIFO a replica put there is not read: no times)."""
        opened = open_regular_file(self._path)
        return None if opened is None else opened[0]

    def start_offset(self, since: float) -> int:
        """The log offset before which every line arrived before ``since``
        (blocking: a worker thread)."""
        fd = self._open()
        if fd is None:
            return 0
        try:
            count = os.fstat(fd).st_size // INDEX_ENTRY.size
            i = _find_first(fd, 0, count, since, 1)
            if i == 0:
                return 0
            raw = os.pread(fd, INDEX_ENTRY.size, (i - 1) * INDEX_ENTRY.size)
        finally:
            os.close(fd)
        if len(raw) < INDEX_ENTRY.size:
            return 0
        end: int = INDEX_ENTRY.unpack(raw)[0]
        return end

    def load_for(self, line_end: int) -> None:
        """Load the window that starts at the chunk completing the line ending
        at ``line_end`` (blocking: a worker thread)."""
        fd = self._open()
        if fd is None:
            return
        size = INDEX_ENTRY.size
        try:
            count = os.fstat(fd).st_size // size
            # the entries up to the window's end end before this line: the
            # one wanted is most often the next; else search the rest
            first = self._first + len(self.ends)
            raw = os.pread(fd, _WINDOW_ENTRIES * size, first * size)
            ends, times = _unpack(raw)
            if ends and ends[-1] < line_end:
                first = _find_first(fd, first + len(ends), count, line_end, 0)
                raw = os.pread(fd, _WINDOW_ENTRIES * size, first * size)
                ends, times = _unpack(raw)
            else:
                skip = bisect.bisect_left(ends, line_end)
                first += skip
                ends, times = ends[skip:], times[skip:]
        finally:
            os.close(fd)
        self._first, self.ends, self.times = first, ends, times

    def time_of(self, line_end: int) -> float | None:
        """Arrival time of the chunk that completed the line ending at
        ``line_end``; None when the window does not reach it (never reads)."""
        i = bisect.bisect_left(self.ends, line_end)
        if i == len(self.ends):
            return None
        return self.times[i]


def _line_start(fd: int, offset: int) -> int:
    """The start of the line holding byte ``offset`` of the file (blocking)."""
    pos = offset
    while pos > 0:
        size = min(_BACK_READ, pos)
        block = os.pread(fd, size, pos - size)
        cut = block.rfind(b"\n")
        if cut >= 0:
            return pos - size + cut + 1
        pos -= size
    return 0


def _seek_since(fd: int, idx: _Index, since: float) -> int:
    """Where the first line that may have arrived at or after ``since``
    starts (blocking: a worker thread)."""
    offset = idx.start_offset(since)
    return _line_start(fd, offset) if offset > 0 else 0


def _coalesced(chunks: list[Chunk]) -> Iterator[bytes]:
    """The bytes of ``chunks``, in order, consecutive small chunks joined into
    pieces of up to :data:`_FEED_SIZE` (a chunk as large is a piece of its own,
    not copied)."""
    group: list[bytes] = []
    size = 0
    for data, _, _ in chunks:
        if size and size + len(data) > _FEED_SIZE:
            yield group[0] if len(group) == 1 else b"".join(group)
            group, size = [], 0
        group.append(data)
        size += len(data)
    if group:
        yield group[0] if len(group) == 1 else b"".join(group)


async def read_line_batches(
    path: str,
    *,
    index: str | None,
    since: datetime | None,
    until: datetime | None,
    follow: Follow | None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    live: tuple[ReplicaLog, str] | None = None,
) -> AsyncGenerator[list[str], None]:
    """Yield the lines of ``path`` in batches (one per read of the file).

    Lines keep ``\\n`` and ``\\r``; bad UTF-8 is replaced; a line longer than
    ``max_line_bytes`` comes in pieces (see :mod:`~asyncsched.schedulers.shared.lines`).
    Without ``follow`` or ``live`` it reads what exists now and stops (a
    trailing partial line is yielded as is). With ``follow`` it reads again
    each time ``follow`` says more may come, and stops after draining once it
    says the log is final. With ``live=(log, stream)`` (the log this process
    supervises, ``path`` one of its files) it follows ``log`` instead,
    taking what the supervisor appends from memory
    (:func:`~asyncsched.schedulers.local._log_follow.follow_replica_log`).
    ``since``/``until`` keep lines whose arrival time lies within them.

    The open, every read and every index load run in a worker thread: the
    loop never waits for the disk. The file stays open while the generator
    lives (so a log deleted by its owner is still drained) and is closed when
    it ends or is closed: ``aclose()`` releases it at once.
    """
    t_since, t_until = _as_epoch(since), _as_epoch(until)
    timed = t_since is not None or t_until is not None
    idx = _Index(index) if timed and index is not None else None
    assembler = LineAssembler(max_line_bytes)
    line_end = 0  # file offset where the next item starts
    #: arrival time of the last chunk taken from memory (None: from the file)
    last_when: float | None = None

    async def time_of(line_end: int, window_tried: bool) -> tuple[float, bool]:
        """(arrival time, whether the index ran out) of the line ending there."""
        assert idx is not None
        when = idx.time_of(line_end)
        if when is None and not window_tried:
            await anyio.to_thread.run_sync(idx.load_for, line_end)
            when = idx.time_of(line_end)
        if when is None:  # the index lags the log: the line just arrived
            return time.time(), True
        return when, False

    def seek_since(fd: int) -> int:  # in a worker thread, before the first read
        nonlocal line_end
        assert idx is not None
        assert t_since is not None
        line_end = _seek_since(fd, idx, t_since)
        return line_end

    seek = seek_since if idx is not None and t_since is not None else None

    blocks: AsyncGenerator[Block, None]
    if live is not None:
        blocks = follow_replica_log(path, live[0], live[1], seek=seek)
    else:
        blocks = follow_file(path, follow=follow, seek=seek, chunk=_READ_SIZE)
    async with contextlib.aclosing(blocks):
        async for block in blocks:
            # a batch per slice of at most _FEED_SIZE bytes: its lines are
            # still in the CPU cache when the caller takes them
            if not isinstance(block, bytes) and not timed:
                # chunks from memory, their times not needed: many small
                # ones (a replica writing line by line) are fed together
                for piece in _coalesced(block):
                    lines = assembler.feed(piece)
                    if lines:
                        yield lines
                continue
            if not isinstance(block, bytes):  # chunks from memory, with times
                for data, end, arrived in block:
                    lines = assembler.feed(data)
                    if timed:
                        line_end, last_when = end - assembler.pending, arrived
                        if t_until is not None and arrived > t_until and lines:
                            return
                        if t_since is not None and arrived < t_since:
                            continue
                    if lines:
                        yield lines
                continue
            last_when = None
            for cut in range(0, len(block), _FEED_SIZE):
                piece = (
                    block[cut : cut + _FEED_SIZE] if len(block) > _FEED_SIZE else block
                )
                if idx is None:
                    lines = assembler.feed(piece)
                    if lines:
                        yield lines
                    continue
                batch: list[str] = []
                ran_out = False  # the index is re-read once per slice at most
                for raw in assembler.feed_raw(piece):
                    line_end += len(raw)
                    when = idx.time_of(line_end)
                    if when is None:  # past the window: read the next one
                        when, ran_out = await time_of(line_end, ran_out)
                    if t_until is not None and when > t_until:
                        if batch:
                            yield batch
                        return
                    if t_since is None or when >= t_since:
                        batch.append(raw.decode("utf-8", "replace"))
                if batch:
                    yield batch
    tail = assembler.flush_raw()
    if not tail:
        return
    tail_at = last_when
    if tail_at is None and idx is not None:
        tail_at, _ = await time_of(line_end + len(tail), False)
    if tail_at is not None and (
        (t_until is not None and tail_at > t_until)
        or (t_since is not None and tail_at < t_since)
    ):
        return
    yield [tail.decode("utf-8", "replace")]
