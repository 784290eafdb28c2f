"""Where asyncsched keeps state on this host (records, pointers, local logs),
and how it keeps it private.

Everything asyncsched writes there can hold secrets (an app's environment is
part of its record), so directories are created ``0700`` and files ``0600``,
whatever the umask. What it reads there is trusted (a record names the
processes ``cancel`` signals), so :func:`check_state_dir` refuses a state dir
that another user owns or may write to.

Example:
    >>> import os
    >>> os.path.isabs(default_state_dir()) or "ASYNCSCHED_STATE_DIR" in os.environ
    True
"""

from __future__ import annotations

import contextlib
import os
import pwd
import stat
from pathlib import Path

from asyncsched.errors import UnsafeStateDirError

__all__ = [
    "PRIVATE_DIR_MODE",
    "PRIVATE_FILE_MODE",
    "STATE_SUBDIRS",
    "check_state_dir",
    "default_state_dir",
    "makedirs_private",
    "tighten_dir",
]

#: mode of every directory asyncsched creates for state and logs
PRIVATE_DIR_MODE = 0o700
#: mode of every record, pointer and log file asyncsched creates
PRIVATE_FILE_MODE = 0o600


#: the folders asyncsched keeps in the state dir (checked with it)
STATE_SUBDIRS = ("local", "logs", "slurm")


def _user(uid: int) -> str:
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


_OWN_DIR = "set ASYNCSCHED_STATE_DIR to a directory of your own"
_PLANT = "could plant app records (a record says which processes cancel signals)"


def _problem(path: str, st: os.stat_result) -> tuple[str, str] | None:
    """(what is wrong, how to fix it) for the directory ``path``, or None."""
    me = os.geteuid()
    mode = stat.S_IMODE(st.st_mode)
    if not stat.S_ISDIR(st.st_mode):
        reason = f"{path} is not a directory (mode {mode:04o})"
        hint = f"remove it, or {_OWN_DIR}"
    elif st.st_uid != me:
        reason = (
            f"{path} is owned by {_user(st.st_uid)}, not by you ({_user(me)}),"
            f" mode {mode:04o}: its owner {_PLANT}"
        )
        hint = f"{_OWN_DIR}, or, if this one is yours, `chown -R {me} {path}`"
    elif mode & 0o022:
        who = {0o022: "its group and others", 0o020: "its group", 0o002: "others"}
        reason = (
            f"{path} (owner {_user(st.st_uid)}) is writable by {who[mode & 0o022]},"
            f" mode {mode:04o}: they {_PLANT}"
        )
        hint = (
            f"`chmod go-w {path}` (asyncsched creates its dirs 0700), or set"
            " ASYNCSCHED_STATE_DIR to a directory only you can write"
        )
    else:
        return None
    return reason, hint


def check_state_dir(state_dir: str) -> bool:
    """Refuse a state dir that is not private to this user (blocking: a thread).

    The state dir and the folders asyncsched keeps in it (:data:`STATE_SUBDIRS`),
    where they exist, must be directories owned by the effective user and not
    writable by group or others (the sticky bit does not make them so).
    Symlinks are followed: their target is checked. The folders above the
    state dir are not. Returns True when the state dir exists (and passed),
    False when it does not exist yet (it is created ``0700`` when needed).

    Raises:
        UnsafeStateDirError: names the path, its owner and mode, and the fix.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:  # 0700, yours
        ...     check_state_dir(d)
        True
    """
    for path in (state_dir, *(os.path.join(state_dir, s) for s in STATE_SUBDIRS)):
        try:
            st = os.stat(path)
        except FileNotFoundError:
            if path == state_dir:
                return False
            continue
        except OSError as exc:  # no search permission, a file on the way...
            raise UnsafeStateDirError(
                state_dir, f"{path} cannot be examined: {exc.strerror}", _OWN_DIR
            ) from exc
        problem = _problem(path, st)
        if problem is not None:
            raise UnsafeStateDirError(state_dir, *problem)
    return True


def default_state_dir() -> str:
    """``$ASYNCSCHED_STATE_DIR``, else ``$XDG_STATE_HOME/asyncsched``, else
    ``~/.local/state/asyncsched``."""
    explicit = os.environ.get("ASYNCSCHED_STATE_DIR")
    if explicit:
        return explicit
    xdg = os.environ.get("XDG_STATE_HOME")
    if xdg:
        return os.path.join(xdg, "asyncsched")
    return os.path.join(Path.home(), ".local", "state", "asyncsched")


def makedirs_private(path: str) -> None:
    """Create ``path`` and its missing parents with mode ``0700`` exactly (blocking).

    Directories that exist are left as they are; one created concurrently by
    another process is fine.
    """
    missing: list[str] = []
    current = os.path.abspath(path)
    while not os.path.isdir(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, PRIVATE_DIR_MODE)
        except FileExistsError:
            if os.path.isdir(directory):  # made by a concurrent writer
                continue
            raise
        # mkdir's mode is masked by the umask (never widened): set it exactly
        os.chmod(directory, PRIVATE_DIR_MODE)


def tighten_dir(path: str) -> None:
    """Make an existing directory of ours ``0700`` (blocking; best effort).

    Directories created by older versions (``0755``) stop exposing what they
    hold. Only a directory owned by this user is changed.
    """
    with contextlib.suppress(OSError):
        st = os.stat(path, follow_symlinks=False)
        if (
            stat.S_ISDIR(st.st_mode)
            and st.st_uid == os.getuid()
            and stat.S_IMODE(st.st_mode) & 0o077
        ):
            os.chmod(path, PRIVATE_DIR_MODE)
