"""An optional hook that sees one :class:`RunnerEvent` per runner API call.

The fields are the ones TorchX records for its telemetry (session, scheduler,
api, app id and image, run config, timings, and the exception if the call
failed). Nothing is sent anywhere: events go to the ``asyncsched.events``
logger at DEBUG level and to the ``event_hook`` given to the runner, if any.

Example:
    >>> events: list[RunnerEvent] = []
    >>> runner = Runner("demo", event_hook=events.append)  # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import os
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

__all__ = ["EventHook", "RunnerEvent", "get_session_id"]

logger = logging.getLogger("asyncsched.events")

_SESSION_ID = str(uuid.uuid4())


def get_session_id() -> str:
    """The id of this process's session: one uuid4 per process, shared by all runners."""
    return _SESSION_ID


@dataclass
class RunnerEvent:
    """What happened during one runner call (TorchX's telemetry fields)."""

    session: str
    scheduler: str
    api: str
    app_id: str | None = None
    app_image: str | None = None
    app_metadata: dict[str, str] = field(default_factory=dict)
    runcfg: str | None = None
    workspace: str | None = None
    start_epoch_time_usec: int = 0
    cpu_time_usec: int = 0
    wall_time_usec: int = 0
    exception_type: str | None = None
    exception_message: str | None = None
    exception_source_location: str | None = None

    def serialize(self) -> str:
        """The event as one JSON object."""
        return json.dumps(asdict(self), sort_keys=True, default=str)


EventHook = Callable[[RunnerEvent], None]


@contextmanager
def record_event(
    hook: EventHook | None,
    api: str,
    scheduler: str,
    app_id: str | None = None,
    runcfg: object = None,
    workspace: object = None,
) -> Iterator[RunnerEvent]:
    """Time the block and deliver its event (also when it raises).

    The block may fill in more fields (``app_id``, ``app_image``...) on the
    yielded event. A failing hook is logged and never breaks the call.
    """
    if hook is None and not logger.isEnabledFor(logging.DEBUG):
        # nobody observes it: no clocks, no JSON (they cost a few percent of
        # a 10,000-app fan-out's CPU)
        yield RunnerEvent(session=_SESSION_ID, scheduler=scheduler, api=api)
        return
    event = RunnerEvent(
        session=_SESSION_ID,
        scheduler=scheduler,
        api=api,
        app_id=app_id,
        runcfg=json.dumps(runcfg, default=str) if runcfg else None,
        workspace=str(workspace) if workspace is not None else None,
        start_epoch_time_usec=int(time.time() * 1_000_000),
    )
    wall0, cpu0 = time.perf_counter_ns(), time.process_time_ns()
    try:
        yield event
    except BaseException as exc:
        event.exception_type = type(exc).__name__
        event.exception_message = str(exc)
        frames = traceback.extract_tb(exc.__traceback__)
        if frames:
            last = frames[-1]
            event.exception_source_location = (
                f"{os.path.basename(last.filename)}:{last.lineno}"
            )
        raise
    finally:
        event.wall_time_usec = (time.perf_counter_ns() - wall0) // 1000
        event.cpu_time_usec = (time.process_time_ns() - cpu0) // 1000
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("%s", event.serialize())
        if hook is not None:
            try:
                hook(event)
            except Exception:
                logger.exception("runner event hook failed for %s", api)
