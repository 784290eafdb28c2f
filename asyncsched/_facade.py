"""The machinery of the sync facades: one event loop in a background thread
per facade object, and blocking calls and iterators into it.

See :mod:`asyncsched.sync` for the public facades.
"""

from __future__ import annotations

import atexit
import builtins
import inspect
import threading
import warnings
import weakref
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Iterator,
)
from concurrent.futures import CancelledError, Future
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    contextmanager,
    suppress,
)
from functools import partial
from types import TracebackType
from typing import Any, Concatenate, Literal, ParamSpec, Self, TypeVar, final

import anyio
import sniffio
from anyio.from_thread import BlockingPortal

from asyncsched.errors import (
    BlockingCallWarning,
    SchedulerClosedError,
)
from asyncsched.schedulers.events import AppEvent

__all__ = ("EventLoopName", "SyncEventStream")

T = TypeVar("T")
_P = ParamSpec("_P")
EventLoopName = Literal["asyncio", "trio"]

_open_facades: weakref.WeakSet[_Facade] = weakref.WeakSet()


@atexit.register
def _close_open_facades() -> None:
    # The loop threads are daemons; close what is still open so that no app
    # process outlives the interpreter.
    for facade in builtins.list(_open_facades):
        with suppress(Exception):
            facade.close()


def _result(future: Future[T]) -> T:
    try:
        return future.result()
    except BaseException:
        # KeyboardInterrupt (or another interruption) in the calling thread:
        # cancel the task in the loop rather than leave it running.
        future.cancel()
        raise


class _LoopThread:
    """One daemon thread running one event loop with a BlockingPortal in it."""

    def __init__(self, event_loop: str) -> None:
        started: Future[BlockingPortal] = Future()

        async def main() -> None:
            async with BlockingPortal() as portal:
                started.set_result(portal)
                await portal.sleep_until_stopped()

        def run() -> None:
            try:
                anyio.run(main, backend=event_loop)
            except BaseException as exc:  # noqa: BLE001 -- reported to the creator
                if not started.done():
                    started.set_exception(exc)

        self.thread = threading.Thread(target=run, name="asyncsched-loop", daemon=True)
        self.thread.start()
        self.portal = started.result()

    def stop(self) -> None:
        """Cancel the calls still in flight, stop the loop and join its thread."""
        with suppress(RuntimeError):  # already stopped
            self.portal.call(self.portal.stop, True)
        self.thread.join()


class _Facade:
    """What the sync facades share: the loop thread, calls into it, closing."""

    _kind = "facade"

    def __init__(
        self, build: Callable[[], AbstractAsyncContextManager[Any]], event_loop: str
    ) -> None:
        self._closed = True
        self._close_lock = threading.Lock()
        self._warned = False
        self._loop = _LoopThread(event_loop)
        portal = self._loop.portal
        try:
            target = portal.call(build)
            self._cm = portal.wrap_async_context_manager(target)
            self._target = self._cm.__enter__()
        except BaseException:
            self._loop.stop()
            raise
        self._closed = False
        _open_facades.add(self)

    # -- lifecycle -------------------------------------------------------------

    def __enter__(self) -> Self:
        self._check_open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        _open_facades.discard(self)
        try:
            # runs the async __aexit__ (aclose: stops the apps it supervises)
            self._cm.__exit__(exc_type, exc, tb)
        finally:
            self._loop.stop()

    def close(self) -> None:
        """Close the wrapped object, then stop the loop thread; idempotent.

        Calls still running in other threads are cancelled.
        """
        self.__exit__(None, None, None)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._closed

    def __del__(self) -> None:
        if getattr(self, "_closed", True):
            return
        warnings.warn(
            f"unclosed {type(self).__name__}; use 'with' or call close()",
            ResourceWarning,
            stacklevel=1,
        )
        if threading.current_thread() is not self._loop.thread:
            with suppress(Exception):
                self.close()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, attr in vars(cls).items():  # the mirrored methods: see _delegate
            if inspect.isfunction(attr) and attr.__qualname__.startswith("_delegate"):
                attr.__qualname__ = f"{cls.__qualname__}.{name}"

    def _check_open(self) -> None:
        if self._closed:
            raise SchedulerClosedError(
                f"{type(self).__name__} is closed; create a new one "
                f"(e.g. 'with {type(self).__name__}(...) as {self._kind}:')"
            )

    # -- calls into the loop ---------------------------------------------------

    def _warn_if_in_loop(self) -> None:
        if self._warned:
            return
        try:
            library = sniffio.current_async_library()
        except sniffio.AsyncLibraryNotFoundError:
            return
        self._warned = True
        warnings.warn(
            f"{type(self).__name__} blocks the {library} event loop running in this "
            "thread; use the async API (asyncsched.runner.Runner / Scheduler) here",
            BlockingCallWarning,
            stacklevel=4,  # the caller of the facade method
        )

    def _call(self, func: Callable[[], Awaitable[T]]) -> T:
        """Run the coroutine function ``func`` in the loop; block for its result."""
        self._check_open()
        self._warn_if_in_loop()
        return _result(self._loop.portal.start_task_soon(func))

    def _call_sync(self, func: Callable[[], T]) -> T:
        """Run the plain function ``func`` in the loop thread; return its result."""
        self._check_open()
        self._warn_if_in_loop()
        return _result(self._loop.portal.start_task_soon(func))

    def _iterate(self, make: Callable[[], AsyncIterator[T]]) -> Iterator[T]:
        """Create the async iterator in the loop now (errors surface here)."""
        iterator = self._call_sync(make)
        return self._drain(iterator)

    def _drain(self, iterator: AsyncIterator[T]) -> Generator[T, None, None]:
        try:
            while True:
                try:
                    item = self._call(iterator.__anext__)
                except StopAsyncIteration:
                    return
                yield item
        finally:
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None and not self._closed:
                with suppress(Exception):
                    self._call(aclose)


@final
class SyncEventStream(Iterator[AppEvent]):
    """A blocking iterator over an event stream read on a facade's loop.

    Returned by ``SyncScheduler.events`` and ``SyncRunner.events``. Each
    ``next()`` blocks until the next event; iteration ends when the facade
    closes (also when another thread closes it). Close the stream with
    :meth:`close` or ``with`` as soon as you stop reading, to release it on
    the loop.

    Example:
        >>> def follow(sched: SyncScheduler, saved: str | None) -> None:
        ...     with sched.events(since=saved) as events:
        ...         for event in events:
        ...             print(event.kind, event.app_id, event.state)
        ...             saved = event.cursor
    """

    def __init__(self, facade: _Facade, stream: AsyncIterator[AppEvent]) -> None:
        self._facade = facade
        self._stream: Any = stream
        self._events = facade._drain(stream)

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> AppEvent:
        try:
            return next(self._events)
        except (CancelledError, SchedulerClosedError):
            if self._facade.closed:  # closed by another thread: the end
                raise StopIteration from None
            raise

    def close(self) -> None:
        """Stop reading and release the stream; idempotent."""
        self._events.close()
        if not self._facade.closed:  # also when it was never read
            with suppress(Exception):
                self._facade._call(self._stream.aclose)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _delegate(
    method: Callable[..., Any],
    via: Callable[[_Facade, Callable[[], Any]], Any],
    note: str,
    returns: str | None = None,
) -> Callable[..., Any]:
    """A facade method that hands ``method`` of the wrapped object to ``via``.

    It keeps ``method``'s name, parameters and docstring (with ``note`` added),
    so the facade cannot drift from the async API it mirrors. A one-shot
    iterator argument (a generator of apps or handles) is read into a list in
    the caller's thread first, not on the loop.
    """
    name = method.__name__

    def call(self: _Facade, /, *args: Any, **kwargs: Any) -> Any:
        args = tuple(_read_now(a) for a in args)
        kwargs = {key: _read_now(value) for key, value in kwargs.items()}
        return via(self, partial(getattr(self._target, name), *args, **kwargs))

    signature = inspect.signature(method)
    owner = method.__qualname__.rsplit(".", 1)[0]
    call.__name__ = name
    call.__doc__ = (
        f"{inspect.cleandoc(method.__doc__ or '')}\n\n"
        f"Blocking form of ``{owner}.{name}``: {note}"
    )
    call.__signature__ = signature.replace(  # type: ignore[attr-defined]
        return_annotation=returns or signature.return_annotation
    )
    return call


def _read_now(value: object) -> object:
    return builtins.list(value) if isinstance(value, Iterator) else value


def _blocking(
    method: Callable[Concatenate[Any, _P], Awaitable[T]],
) -> Callable[Concatenate[_Facade, _P], T]:
    """Mirror the coroutine method ``method``: the call blocks for its result."""
    return _delegate(method, _Facade._call, "blocks until it is done.")


def _in_loop(
    method: Callable[Concatenate[Any, _P], T],
) -> Callable[Concatenate[_Facade, _P], T]:
    """Mirror the plain method ``method``: it runs in the loop thread."""
    return _delegate(method, _Facade._call_sync, "runs in the loop thread.")


def _blocking_iter(
    method: Callable[Concatenate[Any, _P], AsyncIterator[T]],
    returns: str = "Iterator[str]",
) -> Callable[Concatenate[_Facade, _P], Iterator[T]]:
    """Mirror ``method`` returning an async iterator: a plain iterator of the
    same items (``returns`` names its type for the signature)."""
    return _delegate(method, _Facade._iterate, "returns a plain iterator.", returns)


def _stream(
    facade: _Facade, make: Callable[[], AsyncIterator[AppEvent]]
) -> SyncEventStream:
    return SyncEventStream(facade, facade._call_sync(make))


def _blocking_events(
    method: Callable[Concatenate[Any, _P], Any],
) -> Callable[Concatenate[_Facade, _P], SyncEventStream]:
    """Mirror an ``events`` method: a blocking :class:`SyncEventStream`, its
    arguments checked at the call; close it (``with``) when you stop reading."""
    return _delegate(
        method, _stream, "a blocking iterator (close it).", "SyncEventStream"
    )


def _blocking_context(
    method: Callable[Concatenate[Any, _P], AbstractAsyncContextManager[T]],
    returns: str,
) -> Callable[Concatenate[_Facade, _P], AbstractContextManager[T]]:
    """Mirror ``method`` returning an async context manager: a plain one whose
    entry and exit block for the async one's (``returns`` names its type)."""
    return _delegate(method, _context, "a plain context manager.", returns)


@contextmanager
def _context(
    facade: _Facade, make: Callable[[], AbstractAsyncContextManager[T]]
) -> Iterator[T]:
    manager = facade._call_sync(make)
    value = facade._call(manager.__aenter__)
    try:
        yield value
    except BaseException as exc:
        # a facade closed meanwhile has no loop left to run the exit in
        exit_ = partial(manager.__aexit__, type(exc), exc, exc.__traceback__)
        if facade.closed or not facade._call(exit_):
            raise
    else:
        if not facade.closed:
            facade._call(partial(manager.__aexit__, None, None, None))
