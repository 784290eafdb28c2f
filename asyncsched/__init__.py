"""asyncsched: an asyncio-native job scheduler SDK, compatible with TorchX.

Describe an app (roles x replicas, image, entrypoint, args, env, resources,
mounts, retries) and submit it to a backend -- local processes, Docker, ... --
then describe, list, cancel, wait for it and stream its logs, all with
``async def``.

Example:
    >>> import asyncsched
    >>> from asyncsched.specs import AppDef, Role
    >>> async def main() -> None:
    ...     async with asyncsched.get_scheduler("local_cwd", session_name="demo") as sched:
    ...         role = Role("hello", image="", entrypoint="echo", args=["hi"])
    ...         app_id = await sched.submit(AppDef("hello", roles=[role]))
    ...         print((await sched.wait(app_id)).state)

Importing this package never imports aiohttp, aiodocker or kubernetes_asyncio;
backends load lazily by name; ``asyncsched.__version__`` is read from the
installed distribution's metadata on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from asyncsched import errors
from asyncsched._version import version_getattr as _version_getattr
from asyncsched.errors import *  # the whole error tree, at the top level too
from asyncsched.schedulers import (
    get_default_scheduler_name,
    get_scheduler,
    get_scheduler_factories,
)
from asyncsched.schedulers.events import AppEvent, EventKind

if TYPE_CHECKING:
    __version__: str
else:
    __getattr__ = _version_getattr(__name__)  # ``__version__`` read when asked for


__all__ = [
    "AppEvent",
    "EventKind",
    "__version__",
    "get_default_scheduler_name",
    "get_scheduler",
    "get_scheduler_factories",
]
__all__ += errors.__all__
__all__.sort()
