"""The installed version of asyncsched, read when first asked for.

Reading it goes through :mod:`importlib.metadata`, whose imports (zipfile,
email, pathlib, ...) cost a fifth of the CLI's start-up; so the package and
the CLI do not read it at import, only on first access of ``__version__``
(``asyncsched --version``, a backend labelling what it made).

Example:
    >>> from asyncsched._version import installed_version
    >>> installed_version() == installed_version()
    True
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

__all__ = ["__version__", "installed_version"]


@cache
def installed_version() -> str:
    """The version of the installed distribution (``0.0.0+unknown`` in a
    source tree that is not installed), read once."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("asyncsched")
    except PackageNotFoundError:
        return "0.0.0+unknown"


if TYPE_CHECKING:
    __version__: str
else:

    def __getattr__(name: str) -> str:
        if name == "__version__":
            return installed_version()
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
