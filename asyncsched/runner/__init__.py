"""Run apps on any registered scheduler and follow them by handle.

:class:`Runner` is the asynchronous entry point most programs use; the blocking
equivalent is :class:`asyncsched.sync.SyncRunner`.

Example:
    >>> from asyncsched.runner import get_runner
    >>> async def main() -> None:
    ...     async with get_runner() as runner:
    ...         print(runner.scheduler_backends())
"""

from __future__ import annotations

from asyncsched.runner._events import (
    EventHook as EventHook,
    RunnerEvent as RunnerEvent,
    get_session_id as get_session_id,
)
from asyncsched.runner._fanout import StatusEvent as StatusEvent
from asyncsched.runner._gc import defer_full_gc as defer_full_gc
from asyncsched.runner._progress import Progress as Progress
from asyncsched.runner._stream import RunnerEventStream as RunnerEventStream
from asyncsched.runner.api import (
    DEFAULT_SESSION_NAME as DEFAULT_SESSION_NAME,
    KEPT_APP_DEFINITIONS as KEPT_APP_DEFINITIONS,
    Runner as Runner,
    get_runner as get_runner,
)

__all__ = [
    "DEFAULT_SESSION_NAME",
    "EventHook",
    "KEPT_APP_DEFINITIONS",
    "Progress",
    "Runner",
    "RunnerEvent",
    "RunnerEventStream",
    "StatusEvent",
    "defer_full_gc",
    "get_runner",
    "get_session_id",
]
