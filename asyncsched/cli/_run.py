"""``asyncsched run``: submit an app (a command or an AppDef file), optionally wait."""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
from typing import Any

import anyio

from asyncsched.cli._common import (
    EXIT_OK,
    UsageError,
    err,
    exit_code_for,
    make_runner,
    use_color,
)
from asyncsched.cli._log import stream_logs
from asyncsched.cli._options import (
    add_scheduler_options,
    add_session_option,
    add_switch,
    add_verb,
)
from asyncsched.cli._progress import ProgressDisplay
from asyncsched.errors import InvalidMountError, InvalidRunConfigException
from asyncsched.runner import Runner
from asyncsched.specs import (
    MAX_NAME_LENGTH,
    NULL_RESOURCE,
    AppDef,
    AppDryRunInfo,
    AppStatus,
    CfgVal,
    Resource,
    Role,
    is_started,
    named_resources,
    parse_mounts,
    to_dict,
)
from asyncsched.specs.serialize import app_to_dict, load_app_file

__all__ = ["add_parser", "run"]

_EXIT_ON_SIGNAL = {signal.SIGINT: 130, signal.SIGTERM: 143}

#: schedulers whose replicas are children of this process: ``run`` stays to
#: supervise them (other ones, ``local_docker`` included, run without it)
_SUPERVISED = frozenset({"local_cwd", "local_dir"})


def add_parser(sub: Any) -> None:
    p = add_verb(sub, run)
    add_scheduler_options(p, cfg_metavar="K=V,...", cfg_help="scheduler run options")
    add_session_option(p, None, "session name used in the handle (default: asyncsched)")
    add_switch(p, "--dryrun", help="print what would be submitted, submit nothing")
    add_switch(
        p, "--wait", help="wait for the app to finish; exit 0 only if it SUCCEEDED"
    )
    p.add_argument(
        "--log",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="stream the app's output to stderr, each line prefixed with"
        " role/replica (implies --wait; default: on for local schedulers)",
    )
    add_switch(
        p,
        "--detach",
        help="leave the app running: return after submit where no supervisor is"
        " needed (all but local_cwd/local_dir), and on Ctrl-C/SIGTERM while waiting",
    )
    p.add_argument(
        "--parent_run_id", default=None, help="set TORCHX_PARENT_RUN_ID in every role"
    )
    p.add_argument(
        "--workspace",
        default=None,
        help="workspace to build into role 0 (schedulers that build images)",
    )
    p.add_argument(
        "-f",
        "--file",
        default=None,
        metavar="APP.yaml",
        help="AppDef file (YAML or JSON)",
    )
    role = p.add_argument_group("role options (with a command after --)")
    role.add_argument(
        "--name", default=None, help="app and role name (default: the command's name)"
    )
    role.add_argument(
        "--replicas", type=int, default=1, help="number of replicas (default: 1)"
    )
    role.add_argument(
        "--image", default=None, help="image (default: the current directory)"
    )
    role.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="K=V",
        help="environment variable (repeatable)",
    )
    role.add_argument("--cpu", type=int, default=None, help="cpus per replica")
    role.add_argument("--gpu", type=int, default=None, help="gpus per replica")
    role.add_argument(
        "--memMB", type=int, default=None, help="memory per replica in MB"
    )
    role.add_argument(
        "--resource",
        default=None,
        metavar="NAME",
        help="named resource, e.g. cpu.small",
    )
    role.add_argument(
        "--max_retries", type=int, default=0, help="retries on failure (default: 0)"
    )
    role.add_argument(
        "--mounts",
        action="append",
        default=[],
        metavar="type=bind,src=A,dst=B[,readonly]",
        help="mount (repeatable)",
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")


def _role_name(text: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", os.path.basename(text)) or "app"
    name = name if not name.startswith((".", "-")) else f"app{name}"
    return name[:MAX_NAME_LENGTH]


def build_app(args: argparse.Namespace) -> AppDef:
    """The AppDef from ``-f`` or from the command and role flags.

    Raises:
        UsageError: neither or both given, or a bad role flag.
        AppFileError: an invalid AppDef file.
    """
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if args.file:
        if command:
            raise UsageError("give either -f FILE or a command after --, not both")
        return load_app_file(args.file)
    if not command:
        raise UsageError(
            "nothing to run: give a command after -- or an AppDef file with -f"
        )
    env: dict[str, str] = {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--env {item!r}: expected K=V")
        env[key] = value
    if args.resource:
        try:
            resource = named_resources[args.resource]
        except KeyError as exc:
            raise UsageError(f"--resource: {exc.args[0]}") from None
    elif args.cpu is None and args.gpu is None and args.memMB is None:
        resource = NULL_RESOURCE
    else:
        resource = Resource(
            cpu=args.cpu or 1, gpu=args.gpu or 0, memMB=args.memMB or 1024
        )
    tokens = [t for m in args.mounts for t in m.split(",") if t]
    try:
        mounts = parse_mounts(tokens)
    except InvalidMountError as exc:
        raise UsageError(f"--mounts: {exc.message}") from None
    name = args.name or _role_name(command[0])
    role = Role(
        name=name,
        image=args.image or os.getcwd(),
        entrypoint=command[0],
        args=command[1:],
        env=env,
        num_replicas=args.replicas,
        max_retries=args.max_retries,
        resource=resource,
        mounts=mounts,
    )
    return AppDef(name=name, roles=[role])


async def parse_cfg(runner: Runner, scheduler: str, literal: str) -> dict[str, CfgVal]:
    """Parse ``-cfg``; unknown keys and bad values are usage errors."""
    if not literal:
        return {}
    opts = await runner.scheduler_run_opts(scheduler)
    try:
        raw = to_dict(literal)
    except ValueError as exc:
        raise UsageError(f"-cfg: {exc}") from None
    cfg: dict[str, CfgVal] = {}
    for key, value in raw.items():
        opt = opts.get(key)
        if opt is None:
            known = ", ".join(k for k, _ in opts) or "none"
            raise InvalidRunConfigException(
                f"Unknown run option: {key} for {scheduler} (known: {known})", key, raw
            )
        try:
            cfg[key] = opt.cast_to_type(value)
        except (ValueError, TypeError, IndexError) as exc:
            raise UsageError(f"-cfg {key}={value!r}: {exc}") from None
    return cfg


async def run(args: argparse.Namespace) -> int:
    """submit an app: a command after `--`, or an AppDef file (-f)

    Submit an app and print its handle. Give either a command after `--` (one
    role; shape it with --name/--replicas/--env/...) or an AppDef file with
    -f. The local process schedulers (local_cwd, local_dir) supervise the app
    from this process, so `run` waits for them.
    """
    app = build_app(args)
    async with make_runner(args.session) as runner:
        cfg = await parse_cfg(runner, args.scheduler, args.scheduler_args)
        if args.dryrun:
            info = await runner.dryrun(
                app, args.scheduler, cfg, args.workspace, args.parent_run_id
            )
            print(format_dryrun(app, info))
            return EXIT_OK
        handle = await runner.run(
            app, args.scheduler, cfg, args.workspace, args.parent_run_id
        )
        print(handle, flush=True)
        supervised = args.scheduler in _SUPERVISED
        if args.log is None:  # local apps show their output, unless detached
            local = args.scheduler.startswith("local")
            args.log = local and (supervised or not args.detach)
        if not (args.wait or args.log or supervised):
            return EXIT_OK
        return await _supervise(runner, handle, args)


def format_dryrun(app: AppDef, info: AppDryRunInfo[Any]) -> str:
    """What ``--dryrun`` prints: the app as YAML (the AppDef file format), then
    the backend's request."""
    import yaml  # not at start-up: loading PyYAML slows every command

    text = yaml.safe_dump(app_to_dict(app), sort_keys=False).rstrip()
    return f"=== APPLICATION ===\n{text}\n=== SCHEDULER REQUEST ===\n{info!r}"


async def _supervise(runner: Runner, handle: str, args: argparse.Namespace) -> int:
    """Wait for the app with progress or logs; signals cancel it unless --detach."""
    received: list[int] = []
    final: list[AppStatus | None] = []

    async with anyio.create_task_group() as tg:

        async def on_signals() -> None:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for signum in signals:
                    received.append(signum)
                    tg.cancel_scope.cancel()
                    return

        async def watch() -> None:
            if args.log:
                await _wait_started(runner, handle)
                await stream_logs(
                    runner,
                    handle,
                    None,
                    None,
                    follow=True,
                    out=sys.stderr,
                    color=use_color(sys.stderr),
                )
                final.append(await runner.wait(handle))
            else:
                final.append(await _wait_with_progress(runner, handle))
            tg.cancel_scope.cancel()

        tg.start_soon(on_signals)
        tg.start_soon(watch)

    if received:
        signum = received[0]
        name = signal.Signals(signum).name
        if args.detach:
            err(f"received {name}; leaving {handle} running (--detach)")
        else:
            err(f"received {name}; cancelling {handle}")
            with anyio.CancelScope(shield=True), anyio.move_on_after(30):
                await runner.cancel(handle)
                status = await runner.wait(handle)
                if status is not None:
                    err(f"{handle} {status.state}")
        return _EXIT_ON_SIGNAL.get(signal.Signals(signum), 128 + signum)

    status = final[0] if final else None
    if status is None:
        err(f"{handle} is no longer known to its scheduler")
        return exit_code_for(None)
    msg = f" ({status.msg})" if status.msg and status.msg != "<NONE>" else ""
    err(f"{handle} {status.state}{msg}")
    return exit_code_for(status.state)


async def _wait_started(runner: Runner, handle: str) -> None:
    while True:
        status = await runner.status(handle)
        if status is None or is_started(status.state):
            return
        with anyio.move_on_after(0.5):
            await runner.wait(handle)


async def _wait_with_progress(runner: Runner, handle: str) -> AppStatus | None:
    live = sys.stderr.isatty()
    display = ProgressDisplay(sys.stderr, handle, live=live)
    tick = 0.5 if live else 1.0
    while True:
        status = await runner.status(handle)
        if status is None:
            return None
        display.update(status)
        if status.is_terminal():
            return status
        with anyio.move_on_after(tick):
            await runner.wait(handle)
