"""Sub-commands and the options several of them share, declared once.

A verb's help is its handler's docstring: the first paragraph is the
one-line ``help`` of ``asyncsched --help``, the rest the ``description`` of
``asyncsched VERB --help``.

Example:
    >>> import argparse
    >>> async def hello(args: argparse.Namespace) -> int:
    ...     '''say hello
    ...
    ...     Print a greeting.'''
    ...     return 0
    >>> sub = argparse.ArgumentParser(prog="demo").add_subparsers()
    >>> p = add_verb(sub, hello)
    >>> add_switch(p, "--loud", help="shout")
    >>> p.description, p.parse_args(["--loud"]).loud
    ('Print a greeting.', True)
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from asyncsched.schedulers import get_default_scheduler_name

__all__ = [
    "Handler",
    "add_scheduler_options",
    "add_session_option",
    "add_switch",
    "add_verb",
]

Handler = Callable[[argparse.Namespace], Awaitable[int]]


def add_verb(sub: Any, handler: Handler, name: str | None = None) -> Any:
    """Add the sub-command ``name`` (default: the handler's name) running
    ``handler``, documented by the handler's docstring; return its parser."""
    summary, _, details = inspect.cleandoc(handler.__doc__ or "").partition("\n\n")
    p = sub.add_parser(
        name or handler.__name__,
        help=" ".join(summary.split()),
        description=" ".join(details.split()) or None,
    )
    p.set_defaults(func=handler)
    return p


def add_switch(p: Any, *flags: str, help: str) -> None:
    """An on/off option (``store_true``)."""
    p.add_argument(*flags, action="store_true", help=help)


def add_scheduler_options(p: Any, *, cfg_metavar: str, cfg_help: str) -> None:
    """``-s/--scheduler`` (default: the default scheduler) and
    ``-cfg/--scheduler_args`` (run options, ``K=V,...``)."""
    p.add_argument(
        "-s",
        "--scheduler",
        default=get_default_scheduler_name(),
        help="scheduler name (default: %(default)s)",
    )
    p.add_argument(
        "-cfg", "--scheduler_args", default="", metavar=cfg_metavar, help=cfg_help
    )


def add_session_option(p: Any, default: str | None, help: str) -> None:
    """``--session``: the session whose apps (or handles) the verb uses."""
    p.add_argument("--session", default=default, help=help)
