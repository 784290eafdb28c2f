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

from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING

__all__ = ["__version__", "installed_version", "version_getattr"]


@cache
def installed_version() -> str:
    """The version of the installed distribution (``0.0.0+unknown`` in a
    source tree that is not installed), read once."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("asyncsched")
    except PackageNotFoundError:
        return "0.0.0+unknown"


def version_getattr(module: str) -> Callable[[str], str]:
    """A module ``__getattr__`` that answers ``__version__`` on first access.

    Example:
        >>> version_getattr("demo")("__version__") == installed_version()
        True
    """

    def __getattr__(name: str) -> str:
        if name == "__version__":
            return installed_version()
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


if TYPE_CHECKING:
    __version__: str
else:
    __getattr__ = version_getattr(__name__)
