"""What a replica's exit depends on in its files: the reply file, a cancel marker.

Blocking reads, run in a worker thread once a replica was reaped.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass

from asyncsched.schedulers.local._open_files import open_regular_file
from asyncsched.schedulers.local._records import CANCEL_MARKER
from asyncsched.schedulers.shared.state_dir import PRIVATE_FILE_MODE

__all__ = ("MAX_REPLY_BYTES", "ExitFacts", "read_exit_facts")


@dataclass(frozen=True)
class ExitFacts:
    """What a replica's exit depends on in its files, read in a worker thread."""

    error_text: str | None = None
    error_mtime: float | None = None
    cancel_requested: bool = False


#: the most of a reply file (``TORCHELASTIC_ERROR_FILE``) copied into the record
MAX_REPLY_BYTES = 64 * 1024
#: an error file outside the replica dir counts when written this close to
#: (or after) the attempt's start (file-system timestamps are coarse)
_MTIME_SLACK = 1.0


def _read_reply(path: str, *, private: bool) -> tuple[str, float] | None:
    """The first :data:`MAX_REPLY_BYTES` of a regular file and its mtime (blocking).

    None when ``path`` is missing, a symlink (never followed), not a regular
    file (a FIFO would block, a device never end) or unreadable. With
    ``private`` the file is made ``0600`` (it sits among the replica's logs),
    unless it has other names: a hardlink the replica made to another file
    keeps that file's mode.
    """
    opened = open_regular_file(path)
    if opened is None:
        return None
    fd, st = opened
    try:
        if private and st.st_nlink == 1:
            with contextlib.suppress(OSError):
                os.fchmod(fd, PRIVATE_FILE_MODE)
        chunks: list[bytes] = []
        got = 0
        while got <= MAX_REPLY_BYTES:
            chunk = os.read(fd, MAX_REPLY_BYTES + 1 - got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    text = data[:MAX_REPLY_BYTES].decode("utf-8", errors="replace")
    if len(data) > MAX_REPLY_BYTES:
        note = (
            f"[truncated: {path} holds {st.st_size} bytes, the first"
            f" {MAX_REPLY_BYTES} are kept]"
        )
        return f"{text}\n{note}", st.st_mtime
    with contextlib.suppress(ValueError):
        text = json.dumps(json.loads(text), separators=(",", ":"))
    return text, st.st_mtime


def _in_dir(path: str, directory: str) -> bool:
    """True when ``path``'s own directory is ``directory`` (same inode)."""
    try:
        return os.path.samestat(
            os.stat(os.path.dirname(os.path.abspath(path))), os.stat(directory)
        )
    except OSError:
        return False


def read_exit_facts(
    error_file: str,
    replica_dir: str,
    app_dir: str,
    rc: int | None,
    attempt: int,
    started: float = 0.0,
) -> ExitFacts:
    """Read the reply file of a failed exit and whether another process asked
    for a cancel (blocking).

    At most :data:`MAX_REPLY_BYTES` are read, a symlink is never followed and
    only a regular file is read. A reply file in the replica's own dir is kept
    as ``<file>.<attempt>`` (the next attempt may write its own); one the
    replica was pointed elsewhere with ``TORCHELASTIC_ERROR_FILE`` is never
    moved nor deleted, and is only taken when written since the attempt
    started.
    """
    cancel = os.path.exists(os.path.join(app_dir, CANCEL_MARKER))
    if rc == 0:
        return ExitFacts(cancel_requested=cancel)
    own = _in_dir(error_file, replica_dir)
    reply = _read_reply(error_file, private=own)
    if reply is None:
        return ExitFacts(cancel_requested=cancel)
    text, mtime = reply
    if own:
        with contextlib.suppress(OSError):
            os.replace(error_file, f"{error_file}.{attempt}")
    elif mtime < started - _MTIME_SLACK:  # left over from before this attempt
        return ExitFacts(cancel_requested=cancel)
    return ExitFacts(text, mtime, cancel)
