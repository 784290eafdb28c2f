"""A faithful fake Kubernetes API server, a fixture controller, and helpers.

* :class:`~.server.FakeKubeServer` -- the API server (aiohttp, real HTTP);
  :mod:`.store`, :mod:`.admission`, :mod:`.schema`, :mod:`.patches`,
  :mod:`.selectors`, :mod:`.logs` are its parts;
* :class:`~.faults.Faults` / :class:`~.faults.RequestLog` -- fault hooks
  and request counters (``server.faults``, ``server.requests``);
* :class:`~.controller.FakeController` -- plays Volcano's and the Job
  controller's part (and the scheduler's and kubelet's), only through the
  Kubernetes API; :mod:`.busybox` is what a pod's container "runs";
* :class:`~.env.KubeEnv` -- what the ``kube_env`` fixture yields;
  :mod:`.untyped` -- kubernetes_asyncio API classes typed ``Any``;
* :func:`wait_until` -- poll a predicate with a deadline (no fixed sleeps).

Example::

    await wait_until(lambda: server.store.rv > 5, timeout=5)
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

from .faults import Faults, RequestLog
from .server import FakeKubeServer

T = TypeVar("T")

__all__ = ["FakeKubeServer", "Faults", "RequestLog", "wait_until"]


@overload
async def wait_until(
    predicate: Callable[[], Awaitable[T]],
    timeout: float = ...,
    interval: float = ...,
    message: str = ...,
) -> T: ...


@overload
async def wait_until(
    predicate: Callable[[], T],
    timeout: float = ...,
    interval: float = ...,
    message: str = ...,
) -> T: ...


async def wait_until(
    predicate: Callable[[], Any],
    timeout: float = 10.0,
    interval: float = 0.02,
    message: str = "",
) -> Any:
    """Poll ``predicate`` (sync or async) until it returns a truthy value.

    Returns that value; raises ``TimeoutError`` after ``timeout`` seconds.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = predicate()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        if loop.time() >= deadline:
            raise TimeoutError(message or f"condition not met within {timeout}s")
        await asyncio.sleep(interval)
