"""Workspaces: local code built into what an app's roles run (TorchX's path).

Example:
    >>> from asyncsched.workspace import WorkspaceMixin
"""

from __future__ import annotations

from asyncsched.workspace.api import WorkspaceMixin

__all__ = ["WorkspaceMixin"]
