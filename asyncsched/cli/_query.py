"""``status``, ``describe``, ``cancel``, ``list``, ``runopts`` and ``schedulers``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from asyncsched.cli._common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    err,
    make_runner,
)
from asyncsched.cli._json import list_json, status_json
from asyncsched.cli._options import (
    add_scheduler_options,
    add_session_option,
    add_switch,
    add_verb,
)
from asyncsched.cli._run import parse_cfg
from asyncsched.errors import AsyncschedError, UnknownAppException
from asyncsched.runner import DEFAULT_SESSION_NAME, Runner
from asyncsched.schedulers import get_default_scheduler_name, get_scheduler_factories
from asyncsched.specs import AppStatus, deciding_reason, parse_app_handle
from asyncsched.specs.serialize import app_to_dict

__all__ = ["add_parsers"]

_T = TypeVar("_T")


def add_parsers(sub: Any) -> None:
    p = add_verb(sub, status)
    p.add_argument("handle", metavar="HANDLE", help="SCHEDULER://SESSION/APP_ID")
    p.add_argument("--roles", default=None, metavar="A,B", help="only these roles")
    add_switch(p, "--json", help="print JSON")

    p = add_verb(sub, describe)
    p.add_argument("handle", metavar="HANDLE")
    add_switch(p, "--json", help="print JSON instead of YAML")

    p = add_verb(sub, cancel)
    p.add_argument("handle", metavar="HANDLE")

    p = add_verb(sub, list_apps, "list")
    add_scheduler_options(
        p,
        cfg_metavar="namespace=NS",
        cfg_help="run options that pick what is listed (only: namespace)",
    )
    add_session_option(p, DEFAULT_SESSION_NAME, "session (default: %(default)s)")
    p.add_argument(
        "--namespace",
        default=None,
        help="Kubernetes: the namespace to list (default: the kubeconfig's)",
    )
    add_switch(p, "--json", help="print JSON")

    p = add_verb(sub, runopts)
    p.add_argument(
        "scheduler", nargs="?", default=None, help="one scheduler (default: all)"
    )

    p = add_verb(sub, schedulers)
    add_switch(p, "--json", help="print JSON")


async def _known(
    handle: str, query: Callable[[Runner, str], Awaitable[_T | None]]
) -> _T:
    """``query``'s answer about the app ``handle`` names (unknown apps raise)."""
    async with make_runner(parse_app_handle(handle).session_name) as runner:
        result = await query(runner, handle)
    if result is None:
        raise UnknownAppException(handle)
    return result


async def status(args: argparse.Namespace) -> int:
    """print an app's status

    Print the status of an app.
    """
    result = await _known(args.handle, Runner.status)
    roles = [r for r in args.roles.split(",") if r] if args.roles else None
    if args.json:
        print(json.dumps(status_json(args.handle, result, roles), indent=2))
    else:
        print(result.format(roles), end="")
        print(_reason_line(result), end="")
    return EXIT_OK


def _reason_line(result: AppStatus) -> str:
    """``    Reason: EXIT_CODE: <engine's words>`` when the app's reason is known."""
    if result.reason is None:
        return ""
    _, message = deciding_reason(result.state, result.roles)
    first = message.splitlines()[0] if message else ""
    return f"    Reason: {result.reason.value}" + (f": {first}" if first else "") + "\n"


async def describe(args: argparse.Namespace) -> int:
    """print an app's definition (AppDef file schema)"""
    data = app_to_dict(await _known(args.handle, Runner.describe))
    if args.json:
        print(json.dumps(data, indent=2, default=str))
    else:
        import yaml  # not at start-up: loading PyYAML slows every command

        print(yaml.safe_dump(data, sort_keys=False), end="")
    return EXIT_OK


async def cancel(args: argparse.Namespace) -> int:
    """cancel an app"""
    parsed = parse_app_handle(args.handle)
    async with make_runner(parsed.session_name) as runner:
        current = await runner.status(args.handle)
        if current is None:
            err(f"{args.handle} is unknown; nothing to cancel")
            return EXIT_OK
        if current.is_terminal():
            err(f"{args.handle} already {current.state}")
            return EXIT_OK
        await runner.cancel(args.handle)
    err(f"cancel requested for {args.handle}")
    return EXIT_OK


#: run options that choose which apps ``list`` shows (given to the factory)
_LIST_OPTIONS = ("namespace",)


async def _list_params(args: argparse.Namespace) -> dict[str, Any]:
    """``--namespace`` and ``-cfg`` of ``list``, checked against the scheduler."""
    literal = args.scheduler_args
    if args.namespace is not None:
        literal = ",".join(x for x in (literal, f"namespace={args.namespace}") if x)
    if not literal:
        return {}
    async with make_runner(args.session) as runner:
        cfg = await parse_cfg(runner, args.scheduler, literal)
    for key in cfg:
        if key not in _LIST_OPTIONS:
            raise UsageError(f"-cfg {key}: list takes only {', '.join(_LIST_OPTIONS)}")
    return dict(cfg)


async def list_apps(args: argparse.Namespace) -> int:
    """list the apps a scheduler knows"""
    params = await _list_params(args)
    async with Runner(args.session, scheduler_params=params) as runner:
        apps = await runner.list(args.scheduler)
    if args.json:
        print(json.dumps(list_json(apps), indent=2))
        return EXIT_OK
    table = [("APP HANDLE", "APP NAME", "APP STATUS")]
    table += [(a.app_handle, a.name, str(a.state)) for a in apps]
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    for row in table:
        print(
            "  ".join(
                cell.ljust(w) for cell, w in zip(row, widths, strict=True)
            ).rstrip()
        )
    return EXIT_OK


async def runopts(args: argparse.Namespace) -> int:
    """print the run options (-cfg) of schedulers"""
    names = [args.scheduler] if args.scheduler else list(get_scheduler_factories())
    code = EXIT_OK
    async with make_runner(None) as runner:
        for name in names:
            try:
                opts = await runner.scheduler_run_opts(name)
            except AsyncschedError as exc:
                if args.scheduler:
                    raise
                print(f"{name}:\n    (unavailable: {exc})\n")
                code = EXIT_FAILED
                continue
            print(f"{name}:\n{opts!r}\n")
    return code if args.scheduler else EXIT_OK


async def schedulers(args: argparse.Namespace) -> int:
    """list the registered schedulers"""
    names = list(get_scheduler_factories())
    default = get_default_scheduler_name()
    if args.json:
        print(json.dumps({"default": default, "schedulers": names}, indent=2))
        return EXIT_OK
    for name in names:
        print(f"{name}{'  (default)' if name == default else ''}")
    sys.stdout.flush()
    return EXIT_OK
