"""TorchX's ``WorkspaceMixin`` for schedulers that build a workspace into an image.

In asyncsched a scheduler supports workspaces when its ``capabilities`` say
``workspaces=True``; the :class:`~asyncsched.schedulers.api.Scheduler` base
already has ``workspace_opts()`` and ``build_workspace_and_update_role()``.
This mixin keeps TorchX code working on top of that:

- ``isinstance(sched, WorkspaceMixin)`` is True for every asyncsched
  scheduler that supports workspaces (the Docker backend included), whether or
  not it derives from this class, and False for the others (local), as in
  TorchX.
- Deriving from it (``class MySched(WorkspaceMixin[T], Scheduler[Opts])``)
  turns ``capabilities.workspaces`` on, so ``submit``/``Runner.run`` build the
  workspace for ``app.roles[0]``.
- The methods doing I/O are coroutines here: ``build_workspace_and_update_role``
  and ``push_images``. A subclass written for TorchX that defines them as
  plain (blocking) methods keeps working: they are run in a worker thread.
  ``dryrun_push_images`` does no I/O and stays synchronous.

Example:
    >>> from asyncsched.schedulers.local_scheduler import LocalScheduler
    >>> isinstance(LocalScheduler("demo"), WorkspaceMixin)
    False
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import inspect
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Generic, TypeVar

import anyio.to_thread

from asyncsched.errors import UnsupportedOperationError
from asyncsched.schedulers.api import Capabilities, Scheduler
from asyncsched.specs import AppDef, CfgVal, Role, Workspace, runopts

__all__ = ["WorkspaceMixin"]

T = TypeVar("T")

_ASYNC_HOOKS = ("build_workspace_and_update_role", "push_images")


def _in_worker_thread(
    func: Callable[..., Any],
) -> Callable[..., Coroutine[Any, Any, Any]]:
    @functools.wraps(func)
    async def run(*args: Any, **kwargs: Any) -> Any:
        return await anyio.to_thread.run_sync(functools.partial(func, *args, **kwargs))

    return run


class WorkspaceMixin(abc.ABC, Generic[T]):
    """A scheduler that can build a local workspace into what its roles run.

    ``T`` is what :meth:`dryrun_push_images` returns and :meth:`push_images`
    takes (e.g. a mapping of local image -> remote repository and tag).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        caps = getattr(cls, "capabilities", None)
        if isinstance(caps, Capabilities) and not caps.workspaces:
            cls.capabilities = dataclasses.replace(caps, workspaces=True)  # type: ignore[attr-defined]
        for name in _ASYNC_HOOKS:
            hook = cls.__dict__.get(name)
            if inspect.isfunction(hook) and not inspect.iscoroutinefunction(hook):
                setattr(cls, name, _in_worker_thread(hook))

    @classmethod
    def __subclasshook__(cls, subclass: type) -> bool | Any:
        if cls is not WorkspaceMixin:
            return NotImplemented
        caps = getattr(subclass, "capabilities", None)
        if (
            issubclass(subclass, Scheduler)
            and isinstance(caps, Capabilities)
            and caps.workspaces
        ):
            return True
        return NotImplemented

    def workspace_opts(self) -> runopts:
        """The run options the workspace build reads (none by default)."""
        return runopts()

    @abc.abstractmethod
    async def build_workspace_and_update_role(
        self, role: Role, workspace: str | Workspace, cfg: Any
    ) -> None:
        """Build ``workspace`` for ``role`` and point the role at the result.

        Mutates ``role`` (typically ``role.image``). ``workspace`` is a path
        (TorchX 0.7 passes only strings) or a multi-project
        :class:`~asyncsched.specs.Workspace`.
        """

    def dryrun_push_images(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> T:
        """Point ``app``'s roles at where their images will be pushed; return
        what :meth:`push_images` needs.

        Raises:
            UnsupportedOperationError: not implemented (the default; it is a
                ``NotImplementedError``, as TorchX raises).
        """
        raise UnsupportedOperationError("dryrun_push_images is not implemented")

    async def push_images(self, images_to_push: T) -> None:
        """Push what :meth:`dryrun_push_images` returned. Not implemented by default."""
        raise UnsupportedOperationError("push_images is not implemented")
