"""Keep CPython's full garbage collections short or out of a large fan-out.

While 10,000 apps are submitted and awaited the process holds about a
hundred thousand container objects (the apps' definitions, their handles and final
statuses), and CPython's cyclic collector runs a *full* (generation-2)
collection each time that number grew by a quarter: each one scans every
tracked object while holding the event loop, 0.1 to 0.2 s at that size on a
2-vCPU machine. Two remedies:

* :func:`fanout_heap` (what ``Runner.run_many`` and ``wait_all`` do, by
  default): the objects that exist when the fan-out starts -- the caller's
  ``AppDef`` objects, the imports, everything long-lived -- leave the collector's
  scans until it ends (``gc.freeze()``, then ``gc.unfreeze()``), so a full
  collection meanwhile walks only what the fan-out made: tens of
  milliseconds at most instead of hundreds;
* :func:`defer_full_gc` (opt-in) postpones full collections for a block;
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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import anyio
import anyio.lowlevel

from asyncsched.specs import AppDef

__all__ = ["defer_full_gc", "fanout_heap", "make_attribute_dicts"]

#: apps whose attribute dicts are made per loop turn
_APPS_PER_TURN = 1000

#: a generation-2 threshold the collector's counter never reaches
_NEVER = 2**31 - 1

_lock = threading.Lock()
_depth = 0
_saved_threshold2 = 0

# fan-outs in progress (any thread), and whether the first one froze the heap
_fanouts = 0
_froze = False


@contextmanager
def fanout_heap() -> Iterator[None]:
    """Keep the objects that exist now out of full collections in the block.

    The outermost block freezes the heap (``gc.freeze()``: every object the
    collector tracks now moves to its permanent generation) and unfreezes it
    when it ends, so full collections inside walk only the objects made
    since, however large the heap was. Memory stays bounded: nothing made in
    the block is frozen, and what was frozen is scanned again once it ends
    (the first full collection after it walks the whole heap, as it would
    have anyway). Blocks nest and may overlap across tasks and threads. When
    the heap is frozen already by someone else (a pre-forking server, your
    own ``gc.freeze()``), or the collector is disabled, nothing is changed.

    Example:
        >>> import gc
        >>> with fanout_heap():
        ...     pass  # submit and await thousands of apps here
        >>> gc.get_freeze_count()
        0
    """
    global _fanouts, _froze
    with _lock:
        if _fanouts == 0 and gc.isenabled() and gc.get_freeze_count() == 0:
            gc.freeze()
            _froze = True
        _fanouts += 1
    try:
        yield
    finally:
        with _lock:
            _fanouts -= 1
            if _fanouts == 0 and _froze:
                _froze = False
                gc.unfreeze()


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


async def make_attribute_dicts(apps: Sequence[object]) -> None:
    """Make the attribute dicts of ``apps`` and of their roles now, 1,000
    apps per loop turn.

    CPython makes an object's ``__dict__`` only when something asks for it,
    as copying an ``AppDef`` or a ``Role`` does: made during a fan-out, the
    dicts of the caller's apps would pile up among what full collections
    walk (two per app); made before :func:`fanout_heap` freezes the heap,
    they are frozen with their objects.
    """
    for start in range(0, len(apps), _APPS_PER_TURN):
        if start:
            await anyio.lowlevel.checkpoint()
        for app in apps[start : start + _APPS_PER_TURN]:
            if isinstance(app, AppDef) and isinstance(app.roles, list):
                getattr(app, "__dict__", None)
                for role in app.roles:
                    getattr(role, "__dict__", None)
