"""The ``asyncsched`` command line (also ``python -m asyncsched``).

Verbs: ``run``, ``status``, ``describe``, ``log``, ``events``, ``cancel``,
``list``, ``runopts``, ``schedulers`` and ``prune``; see ``docs/cli.md``.

Exit status: 0 on success (for waits: only when the app SUCCEEDED), 1 when the
app did not succeed or is unknown, 2 for bad arguments (one line on stderr),
130/143 when ``run`` is interrupted by SIGINT/SIGTERM; 0, silently, when the
reader of the output goes away (``asyncsched log H | head -2``).

Example:
    >>> from asyncsched.cli import main
    >>> main(["schedulers"])  # doctest: +SKIP
    local_cwd  (default)
    local_dir
    0
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import traceback
import warnings
from collections.abc import Sequence
from typing import TextIO

import anyio

from asyncsched._version import installed_version
from asyncsched.cli import (
    _events as cmd_events,
    _log as cmd_log,
    _prune as cmd_prune,
    _query as cmd_query,
    _run as cmd_run,
)
from asyncsched.cli._common import EXIT_FAILED, EXIT_USAGE, ArgumentParser, UsageError
from asyncsched.cli._pipes import closed_pipe_only, silence
from asyncsched.errors import (
    AppFileError,
    AsyncschedError,
    InvalidArgumentError,
    InvalidRunConfigException,
    MalformedAppHandleException,
    SchedulerUnavailableError,
    SpecError,
    UnknownSchedulerException,
)

__all__ = ["main"]

_USAGE_ERRORS = (
    UsageError,
    InvalidArgumentError,
    AppFileError,
    SpecError,
    InvalidRunConfigException,
    MalformedAppHandleException,
    UnknownSchedulerException,
    SchedulerUnavailableError,
)


class _VersionAction(argparse.Action):
    """``--version``: reads the installed version only when asked (reading it
    at start-up would slow every command down)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        with contextlib.suppress(OSError):  # as argparse's own version action
            sys.stdout.write(f"asyncsched {installed_version()}\n")
        parser.exit()


def _parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="asyncsched",
        description="Run and follow apps on local processes and clusters.",
    )
    parser.add_argument(
        "--version",
        action=_VersionAction,
        nargs=0,
        help="show the program's version number and exit",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        default=bool(os.environ.get("ASYNCSCHED_DEBUG")),
        help="print the full traceback of an error (default: one line;"
        " also $ASYNCSCHED_DEBUG)",
    )
    parser.add_argument(
        "--log_level",
        default=os.environ.get("LOGLEVEL", "WARNING"),
        help="Python log level (default: $LOGLEVEL or WARNING)",
    )
    sub = parser.add_subparsers(
        dest="verb", metavar="VERB", parser_class=ArgumentParser
    )
    sub.required = True
    cmd_run.add_parser(sub)
    cmd_query.add_parsers(sub)
    cmd_log.add_parser(sub)
    cmd_events.add_parser(sub)
    cmd_prune.add_parser(sub)
    return parser


def _one_line_warnings(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    print(f"asyncsched: warning: {message}", file=sys.stderr)


def _describe_error(exc: BaseException) -> str:
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    return " ".join(text.split()) or type(exc).__name__


def _unwrap(exc: Exception) -> Exception:
    """The one error inside (nested) single-error groups from task groups."""
    while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _flush_stdout() -> None:
    """Flush stdout now, not at the interpreter's exit where a closed pipe
    would print a traceback and change the exit status."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        silence()


def _without_closed_pipes(exc: Exception) -> Exception:
    """``exc`` without the BrokenPipeErrors that other tasks saw beside it."""
    if isinstance(exc, ExceptionGroup):
        _, rest = exc.split(BrokenPipeError)
        if rest is not None:
            return rest
    return exc


def _report(verb: str, exc: Exception, *, debug: bool) -> int:
    """Print ``exc`` as one line (and its traceback with ``--debug``); exit status."""
    if debug:
        traceback.print_exception(exc, file=sys.stderr)
    if isinstance(exc, _USAGE_ERRORS):
        code = EXIT_USAGE
    elif isinstance(exc, AsyncschedError):
        code = EXIT_FAILED
    else:  # a bug: still one line, with the way to see more
        print(
            f"asyncsched {verb}: internal error: {type(exc).__name__}:"
            f" {_describe_error(exc)}"
            + ("" if debug else " (run with --debug for the traceback)"),
            file=sys.stderr,
        )
        return EXIT_FAILED
    print(f"asyncsched {verb}: error: {_describe_error(exc)}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit:  # --help, --version, usage errors: their text too
        _flush_stdout()
        raise
    try:
        level: int | str = int(args.log_level)
    except ValueError:
        level = args.log_level.upper()
    try:
        logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    except ValueError:
        parser.error(f"--log_level: unknown level {args.log_level!r}")
    warnings.showwarning = _one_line_warnings

    async def dispatch() -> int:
        code: int = await args.func(args)
        return code

    try:
        code = anyio.run(dispatch)
        _flush_stdout()
        return code
    except KeyboardInterrupt:
        print(f"asyncsched {args.verb}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 -- one line per error; --debug for more
        if closed_pipe_only(exc):  # the reader went away (`| head`): stop quietly
            silence()
            return 0
        _flush_stdout()
        return _report(args.verb, _unwrap(_without_closed_pipes(exc)), debug=args.debug)
    except BaseExceptionGroup as group:  # KeyboardInterrupt inside a task group
        if group.subgroup(KeyboardInterrupt) is not None:
            print(f"asyncsched {args.verb}: interrupted", file=sys.stderr)
            return 130
        raise
