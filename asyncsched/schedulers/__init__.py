"""Scheduler registry: built-in backends by name, plus plugins.

Built-ins are imported only when first used, so ``import asyncsched`` never
imports aiohttp, aiodocker or kubernetes_asyncio. Plugins come from the
entry-point group ``asyncsched.schedulers`` and are *added* to the built-ins; a
plugin whose name clashes with a built-in is ignored with a warning unless it is
registered in ``asyncsched.schedulers.overrides``, which replaces built-ins
explicitly.

Example:
    >>> sorted(get_scheduler_factories())[:2]
    ['local_cwd', 'local_dir']
    >>> get_default_scheduler_name()
    'local_cwd'
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any, Protocol

from asyncsched.errors import (
    AsyncschedWarning,
    SchedulerUnavailableError,
    UnknownSchedulerException,
)

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from asyncsched.schedulers.api import Scheduler

__all__ = [
    "DEFAULT_SCHEDULER",
    "PLUGIN_GROUP",
    "PLUGIN_OVERRIDE_GROUP",
    "SchedulerFactory",
    "get_default_scheduler_name",
    "get_scheduler",
    "get_scheduler_factories",
]

PLUGIN_GROUP = "asyncsched.schedulers"
PLUGIN_OVERRIDE_GROUP = "asyncsched.schedulers.overrides"
DEFAULT_SCHEDULER = "local_cwd"


class SchedulerFactory(Protocol):
    """``factory(session_name, **params) -> Scheduler``; must accept unknown params.

    A factory may also have a ``preload()`` method that does its blocking
    imports and returns the factory to call; the runner calls it in a worker
    thread first, so that importing a backend does not stall the event loop.
    """

    def __call__(self, session_name: str, **kwargs: Any) -> Scheduler[Any]: ...


class _BuiltinFactory:
    """Import ``module:function`` on first call; map a missing extra to a hint."""

    def __init__(self, name: str, target: str, extra: str | None = None) -> None:
        self.name = name
        self.target = target
        self.extra = extra

    def preload(self) -> SchedulerFactory:
        """Import the backend's module (blocking) and return its factory function.

        Importing a backend can take a few tenths of a second of CPU
        (aiohttp, aiodocker); :class:`~asyncsched.runner.Runner` calls this
        in a worker thread before it creates the scheduler in the event loop.
        """
        module_name, func_name = self.target.split(":")
        try:
            module = importlib.import_module(module_name)
            # a TorchX-path module may import its backend on attribute access
            factory: SchedulerFactory = getattr(module, func_name)
        except ImportError as exc:
            if self.extra is None or module_name.startswith(exc.name or "\0"):
                raise
            raise SchedulerUnavailableError(
                self.name,
                f"{exc.name} is not installed",
                f"pip install 'asyncsched[{self.extra}]'",
            ) from exc
        return factory

    def __call__(self, session_name: str, **kwargs: Any) -> Scheduler[Any]:
        return self.preload()(session_name, **kwargs)

    def __repr__(self) -> str:
        return f"<builtin scheduler {self.name!r} from {self.target}>"


class _PluginFactory:
    """Load an entry point on first call; a module target uses its create_scheduler."""

    def __init__(self, entry_point: EntryPoint) -> None:
        self.entry_point = entry_point

    def preload(self) -> SchedulerFactory:
        """Load the entry point (blocking: imports the plugin) and return its factory."""
        loaded = self.entry_point.load()
        factory: SchedulerFactory = getattr(loaded, "create_scheduler", loaded)
        return factory

    def __call__(self, session_name: str, **kwargs: Any) -> Scheduler[Any]:
        return self.preload()(session_name, **kwargs)

    def __repr__(self) -> str:
        return (
            f"<plugin scheduler {self.entry_point.name!r} = {self.entry_point.value}>"
        )


_BUILTINS: dict[str, tuple[str, str | None]] = {
    "local_cwd": ("asyncsched.schedulers.local_scheduler:create_cwd_scheduler", None),
    "local_dir": ("asyncsched.schedulers.local_scheduler:create_dir_scheduler", None),
    "local_docker": (
        "asyncsched.schedulers.docker_scheduler:create_scheduler",
        "docker",
    ),
    "kubernetes": (
        "asyncsched.schedulers.kubernetes_scheduler:create_scheduler",
        "kubernetes",
    ),
    "slurm": ("asyncsched.schedulers.slurm_scheduler:create_scheduler", None),
}


def get_scheduler_factories(
    group: str = PLUGIN_GROUP, skip_defaults: bool = False
) -> dict[str, SchedulerFactory]:
    """Return name -> factory for the built-ins and the installed plugins.

    Built-ins come first (so the default stays ``local_cwd``); plugins add new
    names; only the ``<group>.overrides`` entry points replace built-ins.
    """
    # importlib.metadata is imported on first use, not with this package:
    # ``asyncsched --help`` and the commands that name no backend skip its cost
    from importlib.metadata import entry_points

    factories: dict[str, SchedulerFactory] = {}
    if not skip_defaults:
        factories.update(
            {
                name: _BuiltinFactory(name, t, extra)
                for name, (t, extra) in _BUILTINS.items()
            }
        )
    for ep in entry_points(group=group):
        if ep.name in factories:
            warnings.warn(
                f"plugin scheduler {ep.name!r} ({ep.value}) clashes with a built-in "
                f"and is ignored; register it in {group}.overrides to replace it",
                AsyncschedWarning,
                stacklevel=2,
            )
            continue
        factories[ep.name] = _PluginFactory(ep)
    for ep in entry_points(group=f"{group}.overrides"):
        factories[ep.name] = _PluginFactory(ep)
    return factories


def get_default_scheduler_name() -> str:
    """The scheduler used when none is named: ``local_cwd``."""
    return DEFAULT_SCHEDULER


def get_scheduler(
    name: str, session_name: str = "default", **params: Any
) -> Scheduler[Any]:
    """Create the scheduler registered as ``name``.

    Raises:
        UnknownSchedulerException: no such scheduler (lists the known names).
        SchedulerUnavailableError: its extra is not installed (says what to install).

    Example:
        >>> sched = get_scheduler("local_cwd", session_name="demo")
    """
    factories = get_scheduler_factories()
    try:
        factory = factories[name]
    except KeyError:
        raise UnknownSchedulerException(name, list(factories)) from None
    sched = factory(session_name, **params)
    sched.handle_name = name  # errors name handles of this registry name
    return sched
