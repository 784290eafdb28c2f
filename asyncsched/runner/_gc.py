"""Keep CPython's full garbage collections out of a large fan-out.

While 10,000 apps are submitted and awaited the process holds a few hundred
thousand container objects (the apps' definitions, their handles and final
statuses), and CPython's cyclic collector runs a *full* (generation-2)
collection each time that number grew by a quarter: each one scans every
tracked object while holding the event loop, 0.1 to 0.2 s at that size on a
2-vCPU machine. :func:`defer_full_gc` postpones those collections for a block;
young objects are still collected as usual.

Example:
    >>> async def sweep(runner, apps):
    ...     with defer_full_gc():
    ...         handles = await runner.run_many(apps, "local_cwd")
    ...         return await runner.wait_all(handles)
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["defer_full_gc"]

#: a generation-2 threshold the collector's counter never reaches
_NEVER = 2**31 - 1

_lock = threading.Lock()
_depth = 0
_saved_threshold2 = 0


@contextmanager
def defer_full_gc() -> Iterator[None]:
    """Postpone CPython's automatic full (generation-2) collections in the block.

    Generation 0 and 1 collections go on, so short-lived cycles are still
    freed; only the full scans of every long-lived object wait until the
    outermost block ends (blocks nest and may overlap across tasks or
    threads: the collector's setting is process-wide, restored when the last
    one exits). Cyclic garbage that reached the oldest generation meanwhile
    is freed by the first full collection after the block. An explicit
    ``gc.collect()`` still runs a full collection. On interpreters whose
    collector is incremental (CPython 3.14) this is harmless and not needed.

    Example:
        >>> with defer_full_gc():
        ...     pass  # submit and await thousands of apps here
    """
    global _depth, _saved_threshold2
    with _lock:
        if _depth == 0:
            young, middle, _saved_threshold2 = gc.get_threshold()
            gc.set_threshold(young, middle, _NEVER)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                # young thresholds changed meanwhile by someone else are kept
                young, middle, _ = gc.get_threshold()
                gc.set_threshold(young, middle, _saved_threshold2)
