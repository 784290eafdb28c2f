"""On-disk app records, so that other processes can see local apps.

The supervisor writes ``<app_dir>/app.json`` at submit and on state changes
(compact JSON, atomically: temp file + rename, batched per scheduler in one
worker-thread hop), indexes it as
``<state_dir>/local/<session>/<app_id>.json`` (a small pointer naming the app
dir), and writes TorchX's ``SUCCESS`` file once the app is over. A
``CANCEL_REQUESTED`` file in the app dir is how another process asks the
supervisor to treat the signals it sends as a cancellation.

The empty session (TorchX's ``local:///app_id`` handles) keeps its pointers
in ``<state_dir>/local/@empty``: a name no valid session can have.

Example:
    >>> pointer_path("/state", "sess", "app-x")
    '/state/local/sess/app-x.json'
    >>> pointer_path("/state", "", "app-x")
    '/state/local/@empty/app-x.json'
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import stat
import threading
from typing import Any

from asyncsched.schedulers.shared.state_dir import (
    PRIVATE_FILE_MODE,
    default_state_dir,
    makedirs_private,
)

__all__ = [
    "CANCEL_MARKER",
    "EMPTY_SESSION_DIR",
    "RECORD_NAME",
    "RECORD_VERSION",
    "default_state_dir",
    "find_pointer",
    "is_app_id",
    "list_pointers",
    "pointer_path",
    "read_json",
    "remove_pointer",
    "session_dir",
    "write_json_atomic",
    "write_pointer",
]

logger = logging.getLogger(__name__)

RECORD_NAME = "app.json"
RECORD_VERSION = 1
CANCEL_MARKER = "CANCEL_REQUESTED"


#: the pointer dir of the empty session (not a valid session name)
EMPTY_SESSION_DIR = "@empty"
#: what ``make_unique(<valid app name>)`` gives: one plain path component
_APP_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}$")


def is_app_id(app_id: str) -> bool:
    """True when ``app_id`` could be a local app id (one safe path component).

    Anything else (``..``, a ``/``, a control character) names no local app.
    """
    return bool(_APP_ID.fullmatch(app_id))


def session_dir(state_dir: str, session: str) -> str:
    """The directory of the pointers of ``session``."""
    return os.path.join(state_dir, "local", session or EMPTY_SESSION_DIR)


def pointer_path(state_dir: str, session: str, app_id: str) -> str:
    """Where the pointer of ``app_id`` lives."""
    return os.path.join(session_dir(state_dir, session), f"{app_id}.json")


def _dump(data: Any) -> bytes:
    # default=str: role metadata may hold values JSON cannot represent
    return json.dumps(data, separators=(",", ":"), default=str).encode()


def write_json_atomic(path: str, data: Any) -> None:
    """Write ``data`` as compact JSON to ``path`` via a temp file and a rename (blocking).

    The temp file is named after this process and thread, so concurrent
    writers never share one; the rename makes readers see old or new, never
    a torn file. The file is private (``0600``, whatever the umask: records
    hold the apps' environments); missing parent directories are created
    ``0700``. The temp file is always created anew (``O_EXCL``, never through
    a symlink): a name planted in the app dir is removed, not written through.
    """
    directory, name = os.path.split(path)
    tmp = os.path.join(directory, f".tmp-{os.getpid()}-{threading.get_ident()}-{name}")
    payload = _dump(data)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, PRIVATE_FILE_MODE)
    except FileNotFoundError:
        makedirs_private(directory)
        fd = os.open(tmp, flags, PRIVATE_FILE_MODE)
    except FileExistsError:  # left by a crash, or planted: unlink only the name
        os.unlink(tmp)
        fd = os.open(tmp, flags, PRIVATE_FILE_MODE)
    try:
        try:
            os.fchmod(fd, PRIVATE_FILE_MODE)  # whatever the umask
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_json(path: str) -> dict[str, Any] | None:
    """Load a JSON object, or None when it is missing or unreadable (blocking).

    Only a regular file of this (effective) user is read: records and pointers
    are always written by their user, so one owned by someone else (planted
    in a ``log_dir`` others can write to) is ignored, with a warning; a FIFO
    never blocks the reader.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    with open(fd, encoding="utf-8", closefd=True) as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if st.st_uid != os.geteuid():
            logger.warning(
                "ignoring %s: it is owned by uid %d, not by you (uid %d)",
                path,
                st.st_uid,
                os.geteuid(),
            )
            return None
        try:
            data = json.load(f)
        except (OSError, ValueError):
            return None
    return data if isinstance(data, dict) else None


def write_pointer(state_dir: str, session: str, app_id: str, app_dir: str) -> None:
    """Index ``app_id`` of ``session`` under the state dir (blocking)."""
    write_json_atomic(
        pointer_path(state_dir, session, app_id),
        {
            "app_id": app_id,
            "session": session,
            "app_dir": app_dir,
            "version": RECORD_VERSION,
        },
    )


def remove_pointer(state_dir: str, session: str, app_id: str) -> None:
    """Forget ``app_id`` (its record and logs stay in the log dir)."""
    with contextlib.suppress(OSError):
        os.unlink(pointer_path(state_dir, session, app_id))


def find_pointer(state_dir: str, session: str, app_id: str) -> dict[str, Any] | None:
    """The pointer of ``app_id`` in ``session``, else in any session (blocking).

    None for an id that cannot be a local app's (``..``, a ``/``...): such an
    id never leads outside the state dir.
    """
    if not is_app_id(app_id):
        return None
    found = read_json(pointer_path(state_dir, session, app_id))
    if found is not None:
        return found
    root = os.path.join(state_dir, "local")
    own = os.path.basename(session_dir(state_dir, session))
    with contextlib.suppress(OSError):
        for other in os.listdir(root):
            if other != own:
                found = read_json(pointer_path(state_dir, other, app_id))
                if found is not None:
                    return found
    return None


def list_pointers(
    state_dir: str, session: str, *, prune: bool = False
) -> list[dict[str, Any]]:
    """Every pointer of ``session`` (blocking).

    With ``prune``, pointers whose app record no longer exists (the app dir
    was deleted) are removed and left out.
    """
    directory = session_dir(state_dir, session)
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    pointers = []
    for name in names:
        if name.endswith(".json") and not name.startswith("."):
            path = os.path.join(directory, name)
            data = read_json(path)
            if data is None or not isinstance(data.get("app_dir"), str):
                continue
            if prune and not os.path.exists(os.path.join(data["app_dir"], RECORD_NAME)):
                with contextlib.suppress(OSError):
                    os.unlink(path)
                continue
            pointers.append(data)
    return pointers
