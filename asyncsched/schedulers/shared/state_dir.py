"""Where asyncsched keeps state on this host (records, pointers, local logs),
and how it keeps it private.

Everything asyncsched writes there can hold secrets (an app's environment is
part of its record), so directories are created ``0700`` and files ``0600``,
whatever the umask.

Example:
    >>> import os
    >>> os.path.isabs(default_state_dir()) or "ASYNCSCHED_STATE_DIR" in os.environ
    True
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

__all__ = [
    "PRIVATE_DIR_MODE",
    "PRIVATE_FILE_MODE",
    "default_state_dir",
    "makedirs_private",
    "tighten_dir",
]

#: mode of every directory asyncsched creates for state and logs
PRIVATE_DIR_MODE = 0o700
#: mode of every record, pointer and log file asyncsched creates
PRIVATE_FILE_MODE = 0o600


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
