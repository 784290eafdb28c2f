"""Building blocks every backend shares (public for scheduler plugin authors).

Modules: ``lines`` (linear line assembly, regex filter), ``identity`` (the
replica identity environment variables), ``ids`` (unique app ids),
``taskhost`` (a task group owned by a scheduler).
"""

from __future__ import annotations

__all__: list[str] = []
