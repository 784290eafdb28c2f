"""Where asyncsched keeps state on this host (records, pointers, local logs).

Example:
    >>> import os
    >>> os.path.isabs(default_state_dir()) or "ASYNCSCHED_STATE_DIR" in os.environ
    True
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_state_dir"]


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
