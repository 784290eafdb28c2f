"""The event journal of a local session on disk: numbered JSON lines in segments.

Layout: ``<state_dir>/events/<session>/`` (``0700``; the empty session is
``@empty``) holds ``journal.lock`` and segments ``seg-<first seq>.jsonl``
(``0600``, created ``O_EXCL | O_NOFOLLOW``). Each segment starts with a header
line ``{"journal": ID, "first": N}``: ID is random, made when the journal is
created, and names this journal in cursors; every other line is one event with
its sequence number ``"s"`` (1, 2, 3... across segments). A writer appends under
an exclusive ``flock`` of ``journal.lock`` (writers of one session never
interleave or reuse a number), in ONE ``write()`` per batch; a segment past
``segment_bytes`` is closed and a new one started, and only the newest
``segments`` are kept. A writer that finds the last line torn (a writer died
mid-write) ends it first: readers skip it. A batch whose write failed leaves a
``{"s": N, "k": "gap"}`` line in front of the next batch, so readers know to
resync.

Example:
    >>> import tempfile
    >>> d = journal_dir(tempfile.mkdtemp(), "demo")
    >>> w = JournalFile(d)
    >>> w.append([{"k": "app", "a": "x"}])
    1
    >>> info = read_info(d)
    >>> (info.last, info.first)
    (1, 1)
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from asyncsched.schedulers.local._records import EMPTY_SESSION_DIR
from asyncsched.schedulers.shared.state_dir import PRIVATE_FILE_MODE, makedirs_private

__all__ = (
    "DEFAULT_SEGMENTS",
    "DEFAULT_SEGMENT_BYTES",
    "JournalFile",
    "JournalInfo",
    "journal_dir",
    "newest_size",
    "parse_line",
    "read_info",
    "segment_first",
    "segment_names",
)

#: a segment is closed once it holds this many bytes
DEFAULT_SEGMENT_BYTES = 4 << 20
#: segments kept (the oldest is removed when one more is started)
DEFAULT_SEGMENTS = 4
#: bytes read from a segment's end to find its last sequence number
_TAIL = 64 << 10

_OPEN_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC


def journal_dir(state_dir: str, session: str) -> str:
    """The journal directory of ``session``."""
    return os.path.join(state_dir, "events", session or EMPTY_SESSION_DIR)


def segment_name(first: int) -> str:
    return f"seg-{first:016d}.jsonl"


def segment_first(name: str) -> int | None:
    """The first sequence number a segment file holds, from its name."""
    if not (name.startswith("seg-") and name.endswith(".jsonl")):
        return None
    digits = name[4:-6]
    return int(digits) if digits.isdigit() else None


def segment_names(directory: str) -> list[str]:
    """The segments of a journal, oldest first (blocking; [] if none)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    found = [(segment_first(n), n) for n in names]
    return [n for first, n in sorted((f, n) for f, n in found if f is not None)]


def newest_size(directory: str) -> tuple[str, int] | None:
    """(name, size) of the newest segment (blocking); None when there is none."""
    names = segment_names(directory)
    if not names:
        return None
    try:
        return names[-1], os.stat(os.path.join(directory, names[-1])).st_size
    except OSError:
        return None


def parse_line(line: bytes) -> dict[str, Any] | None:
    """One journal line, or None if it is torn or not an object."""
    try:
        data = json.loads(line)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _dump(data: dict[str, Any]) -> bytes:
    return json.dumps(data, separators=(",", ":"), default=str).encode() + b"\n"


@dataclass(frozen=True, slots=True)
class JournalInfo:
    """Where a journal stands: its id, oldest kept and last sequence numbers."""

    journal_id: str
    #: the first sequence number still kept
    first: int
    #: the last sequence number written (first - 1 when empty)
    last: int


def _header(path: str, only: tuple[int, int] | None = None) -> dict[str, Any] | None:
    """A segment's header line; None if it has none (or ``only``, its
    (inode, size), differs)."""
    try:
        fd = os.open(path, os.O_RDONLY | _OPEN_FLAGS)
    except OSError:
        return None
    try:
        if only is not None:
            stat = os.fstat(fd)
            if (stat.st_ino, stat.st_size) != only:
                return None
        head = os.pread(fd, 4096, 0)
    finally:
        os.close(fd)
    data = parse_line(head.split(b"\n", 1)[0])
    if data is None or not isinstance(data.get("journal"), str):
        return None
    return data


def _last_seq(fd: int, size: int, first: int) -> int:
    """The last sequence number in a segment (``first - 1`` if it has none)."""
    start = max(0, size - _TAIL)
    tail = os.pread(fd, size - start, start)
    for line in reversed(tail.split(b"\n")):
        data = parse_line(line)
        if data is not None and isinstance(data.get("s"), int):
            return int(data["s"])
    return first - 1


def read_info(directory: str) -> JournalInfo | None:
    """The journal's id and range (blocking); None when there is none yet."""
    names = segment_names(directory)
    if not names:
        return None
    header = _header(os.path.join(directory, names[0]))
    if header is None:
        return None
    newest = os.path.join(directory, names[-1])
    try:
        fd = os.open(newest, os.O_RDONLY | _OPEN_FLAGS)
    except OSError:
        return None
    try:
        last_first = segment_first(names[-1]) or 1
        last = _last_seq(fd, os.fstat(fd).st_size, last_first)
    finally:
        os.close(fd)
    return JournalInfo(str(header["journal"]), segment_first(names[0]) or 1, last)


@contextlib.contextmanager
def _locked(directory: str) -> Iterator[None]:
    makedirs_private(directory)
    fd = os.open(
        os.path.join(directory, "journal.lock"),
        os.O_RDWR | os.O_CREAT | _OPEN_FLAGS,
        PRIVATE_FILE_MODE,
    )
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _create_segment(directory: str, journal_id: str, first: int) -> None:
    fd = os.open(
        os.path.join(directory, segment_name(first)),
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | _OPEN_FLAGS,
        PRIVATE_FILE_MODE,
    )
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)  # whatever the umask
        _write_all(fd, _dump({"journal": journal_id, "first": first}))
    finally:
        os.close(fd)


def _write_all(fd: int, payload: bytes) -> None:
    view = memoryview(payload)
    while view:
        view = view[os.write(fd, view) :]


class JournalFile:
    """Append batches of events to one session's journal (blocking calls).

    Args:
        directory: The journal directory (:func:`journal_dir`).
        segment_bytes: Start a new segment once the current one is this big.
        segments: How many segments to keep.
        keep_open: Keep the segment appended to last open until :meth:`close`:
            while nobody else touched it, the next append checks it with one
            ``stat`` and writes to it, instead of listing the segments and
            reading a header first.
    """

    def __init__(
        self,
        directory: str,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        segments: int = DEFAULT_SEGMENTS,
        *,
        keep_open: bool = False,
    ) -> None:
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.segments = segments
        self._keep_open = keep_open
        #: the segment appended to last, kept open: (fd, device, inode)
        self._kept: tuple[int, int, int] | None = None
        #: appends (and close) of this object, one thread at a time
        self._lock = threading.Lock()
        #: a batch was lost since the last write: the next one starts with a gap
        self.lost = False
        #: after an append: (journal id, segment name, size after it)
        self.written: tuple[str, str, int] | None = None
        #: after an append: the segment's inode and the last number written
        self._left: tuple[int, int] | None = None

    def ensure(self) -> JournalInfo:
        """Create the journal if there is none; where it stands."""
        with _locked(self.directory):
            info = read_info(self.directory)
            if info is None:
                _create_segment(self.directory, secrets.token_hex(8), 1)
                info = read_info(self.directory)
            assert info is not None
            return info

    def append(self, events: Sequence[dict[str, Any]]) -> int:
        """Number ``events`` and append them in one write; the last number.

        An ``OSError`` (a full disk...) is raised after noting the loss: the
        next append starts with a gap line.
        """
        with self._lock:
            try:
                return self._append(events)
            except BaseException as exc:
                self._left = None  # what was written is not known
                self._drop_kept()
                if isinstance(exc, OSError):
                    self.lost = True
                raise

    def close(self) -> None:
        """Close the segment kept open; later appends open it each time."""
        with self._lock:
            self._keep_open = False
            self._drop_kept()

    def _drop_kept(self) -> None:
        if self._kept is not None:
            fd, self._kept = self._kept[0], None
            with contextlib.suppress(OSError):
                os.close(fd)

    def _append_kept(self, events: Sequence[dict[str, Any]]) -> int | None:
        """Append through the segment kept open, when nobody touched it since
        this writer's last append; the last number, else None (nothing done).

        The file at the segment's name is the one held open (an inode held
        open is never reused), as big as this writer left it: nobody
        appended since, nor started a newer segment (one starts only once
        the newest is full, and this one has room).
        """
        if self._kept is None or self.written is None or self._left is None:
            return None
        fd, device, inode = self._kept
        journal_id, segment, end = self.written
        if end >= self.segment_bytes:
            return None
        try:
            st = os.stat(os.path.join(self.directory, segment), follow_symlinks=False)
        except OSError:
            return None
        if (st.st_dev, st.st_ino, st.st_size) != (device, inode, end):
            return None
        where = (journal_id, segment, end, inode)
        return self._write_numbered(fd, where, b"", self._left[1], events)

    def _write_numbered(
        self,
        fd: int,
        where: tuple[str, str, int, int],
        prefix: bytes,
        last: int,
        events: Sequence[dict[str, Any]],
    ) -> int:
        """Append ``prefix`` then the events (a ``gap`` first when events were
        lost), numbered on from ``last``, to ``fd``, the segment ``where``
        names (journal id, segment, its size, its inode); note where this
        writer left the journal and return the last number."""
        parts = [prefix]
        if self.lost:
            last += 1
            parts.append(_dump({"s": last, "k": "gap"}))
        for event in events:
            last += 1
            parts.append(_dump({"s": last, **event}))
        payload = b"".join(parts)
        _write_all(fd, payload)
        journal_id, segment, size, inode = where
        self.lost = False
        self.written = (journal_id, segment, size + len(payload))
        self._left = (inode, last)
        return last

    def _known(self, names: list[str]) -> JournalInfo | None:
        """Where the journal stands, when nobody wrote since this writer's
        last append: the newest segment is the file it left, as big as it
        left it, and names the same journal (a journal made anew has another
        id, whatever inode and size its segment has). Four calls instead of
        reading the journal's ends."""
        if self._left is None or self.written is None or not names:
            return None
        journal_id, segment, end = self.written
        inode, last = self._left
        if names[-1] != segment:
            return None
        header = _header(os.path.join(self.directory, segment), (inode, end))
        if header is None or header.get("journal") != journal_id:
            return None
        return JournalInfo(journal_id, _first_of(names[0]), last)

    def _append(self, events: Sequence[dict[str, Any]]) -> int:
        with _locked(self.directory):
            last = self._append_kept(events)
            if last is not None:
                return last
            self._drop_kept()
            names = segment_names(self.directory)
            known = self._known(names)
            info = known or (read_info(self.directory) if names else None)
            if info is None:
                info = JournalInfo(secrets.token_hex(8), 1, 0)
                names = [segment_name(1)]
                with contextlib.suppress(FileNotFoundError):  # a headless leftover
                    os.unlink(os.path.join(self.directory, names[0]))
                _create_segment(self.directory, info.journal_id, 1)
            path = os.path.join(self.directory, names[-1])
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | _OPEN_FLAGS)
            try:
                stat = os.fstat(fd)
                size = stat.st_size
                # full, and holding an event (a segment holding only its
                # header would be made again under the same name)
                if size >= self.segment_bytes and info.last >= _first_of(names[-1]):
                    os.close(fd)
                    fd = -1
                    _create_segment(self.directory, info.journal_id, info.last + 1)
                    names.append(segment_name(info.last + 1))
                    for old in names[: -self.segments]:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(os.path.join(self.directory, old))
                    path = os.path.join(self.directory, names[-1])
                    fd = os.open(path, os.O_WRONLY | os.O_APPEND | _OPEN_FLAGS)
                    stat = os.fstat(fd)
                    size = stat.st_size
                torn = size and known is None and not _ends_line(path, size)
                # (a torn last line is ended: readers skip it)
                where = (info.journal_id, names[-1], size, stat.st_ino)
                prefix = b"\n" if torn else b""
                seq = self._write_numbered(fd, where, prefix, info.last, events)
                if self._keep_open:
                    self._kept = (fd, stat.st_dev, stat.st_ino)
                    fd = -1
                return seq
            finally:
                if fd >= 0:
                    os.close(fd)


def _first_of(name: str) -> int:
    first = segment_first(name)
    return 1 if first is None else first


def _ends_line(path: str, size: int) -> bool:
    fd = os.open(path, os.O_RDONLY | _OPEN_FLAGS)
    try:
        return os.pread(fd, 1, size - 1) == b"\n"
    finally:
        os.close(fd)
