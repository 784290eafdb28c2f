"""One list+watch cache of one resource type, namespace and label selector.

The informer lists the objects, then watches from the list's
``resourceVersion`` with bookmarks, keeping a local copy that ``describe``
and ``wait`` read, so waiting on N apps costs one open watch, not N polls:

* BOOKMARK events only advance the resourceVersion;
* a 410 Gone (an HTTP 410 or an ERROR event) or any other ERROR event means
  the version is too old: list again, never retry the stale version;
* a stream that drops (a payload error, a reset, an early clean EOF)
  reconnects from the last version seen, after a jittered backoff;
* a watch that ends at its ``timeoutSeconds`` reconnects at once;
* a watch whose answer (its status and headers) does not come within
  ``answer_timeout`` seconds is dropped and reconnected (an API server
  starting up can take a watch and hold it unanswered: until then the cache
  would miss every change with nothing telling it so);
* every ``resync`` seconds the cache is rebuilt by a fresh list;
* lists are paginated (``limit``/``continue``, ``page_size`` objects a
  page); a 410 on a continue token (its version was compacted meanwhile)
  restarts the list from its first page;
* what is stored is ``slim(obj)`` (only the fields the readers need), and
  only objects ``admit`` accepts;
* a re-list that fails (whatever the status) keeps the cache, marked
  ``stale``, and is retried with backoff: it is never emptied by a refusal.

Objects are indexed by name and by a key (e.g. the app id); every change is
signalled on a :class:`ChangeNotifier` under the object's key (a re-list
wakes every waiter).

Example:
    >>> async def main(api: KubeApi) -> None:
    ...     pods = Informer(api, "/api/v1/namespaces/ns/pods", "a=b", key=lambda o: "x")
    ...     async with anyio.create_task_group() as tg:
    ...         await tg.start(pods.run)
    ...         print(len(pods.objects))
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskStatus

from asyncsched.schedulers.kit import ChangeNotifier
from asyncsched.schedulers.kubernetes._client import KubeApi
from asyncsched.schedulers.kubernetes._gate import KubernetesApiError, aiohttp_module
from asyncsched.schedulers.kubernetes._json import JSON

__all__ = ["ANSWER_TIMEOUT", "DEFAULT_PAGE_SIZE", "Informer"]

logger = logging.getLogger(__name__)

_RELIST, _DROPPED, _ENDED = "relist", "dropped", "ended"
#: objects per page of a list: each page is decoded in one event-loop
#: callback (pages of 500 pods with ``managedFields``, ~5 MB of JSON, took up
#: to 0.3 s of CPU each on a 2-vCPU machine)
DEFAULT_PAGE_SIZE = 100
#: watch events (or listed objects) handled between two yields to the event
#: loop: a burst of 1,000 pod events read in one chunk is ~0.1 s of decoding
_BATCH = 64
#: seconds a watch request waits for its answer's status and headers: a
#: healthy server sends them at once, the events come later
ANSWER_TIMEOUT = 30.0


def _rv(obj: JSON) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


@dataclass(eq=False, repr=False)
class Informer:
    """List+watch cache of ``path`` (a collection URL) filtered by ``selector``.

    Args:
        api: The connection.
        path: Collection path, e.g. ``/api/v1/namespaces/ns/pods``.
        selector: Label selector sent with every list and watch.
        key: Maps an object to its key (e.g. its app id).
        changes: Where changes are signalled, by key (default: a new one).
        resync: Seconds between full re-lists.
        watch_timeout: ``timeoutSeconds`` of each watch request.
        backoff: First reconnect delay (doubles, jittered, capped at 30 s).
        answer_timeout: Seconds a watch request may wait for its answer (the
            status and headers; the events then come as they may).
        optional: A refused first list (401/403) leaves the cache empty (and
            retried every ``resync``) instead of failing.
        slim: What is kept of each object (default: all of it).
        admit: Objects it returns False for are not kept (default: all are).
        page_size: ``limit`` of each list request (``0``: unpaginated).
        keep_deleted: How many deleted objects to remember as the watch last
            showed them (:meth:`deleted_with_key`), oldest forgotten first: a
            pod's final status (its exit code) arrives a moment before its
            deletion, and a reader that comes later still finds it.

    Once a list has succeeded, no answer empties the cache: a failed re-list
    (any status, a 401/403/404 included) keeps the last objects, sets
    :attr:`stale` and is retried with backoff.
    """

    api: KubeApi
    path: str
    selector: str
    _: KW_ONLY
    key: Callable[[JSON], str]
    changes: ChangeNotifier = field(default_factory=ChangeNotifier)
    resync: float = 600.0
    watch_timeout: int = 290
    backoff: float = 0.1
    answer_timeout: float = ANSWER_TIMEOUT
    optional: bool = False
    slim: Callable[[JSON], JSON] | None = None
    admit: Callable[[JSON], bool] | None = None
    page_size: int = DEFAULT_PAGE_SIZE
    keep_deleted: int = 0
    objects: dict[str, JSON] = field(default_factory=dict, init=False)
    by_key: dict[str, dict[str, JSON]] = field(default_factory=dict, init=False)
    #: the last seen version of deleted objects, oldest first, by name
    deleted: dict[str, JSON] = field(default_factory=dict, init=False)
    _deleted_by_key: dict[str, dict[str, JSON]] = field(
        default_factory=dict, init=False
    )
    resource_version: str = field(default="", init=False)
    #: the server does not serve this type (404 on list, e.g. no Volcano
    #: CRD), or, when ``optional``, does not let us list it (401/403)
    absent: bool = field(default=False, init=False)
    denied: bool = field(default=False, init=False)
    #: a list succeeded once (later refusals keep the cache, stale)
    listed: bool = field(default=False, init=False)
    #: the last re-list failed: the cache may miss changes; look objects up
    stale: bool = field(default=False, init=False)
    lists: int = field(default=0, init=False)
    #: list requests, pages included
    pages: int = field(default=0, init=False)
    watches: int = field(default=0, init=False)

    # -- reading ---------------------------------------------------------------

    def get(self, name: str) -> JSON | None:
        """The cached object named ``name``."""
        return self.objects.get(name)

    def with_key(self, key: str) -> list[JSON]:
        """The cached objects whose key is ``key``."""
        return list(self.by_key.get(key, {}).values())

    def deleted_with_key(self, key: str) -> list[JSON]:
        """The remembered deleted objects whose key is ``key`` (see
        ``keep_deleted``)."""
        return list(self._deleted_by_key.get(key, {}).values())

    def forget_deleted(self, key: str) -> None:
        """Forget the deleted objects whose key is ``key``."""
        for name in list(self._deleted_by_key.get(key, {})):
            self._forget_deleted(name)

    def upsert(self, obj: JSON) -> None:
        """Store ``obj`` unless the cache holds a newer version of it."""
        name = obj["metadata"]["name"]
        old = self.objects.get(name)
        if old is not None and _newer(old, obj):
            return
        self._store(name, obj)

    def put(self, name: str, obj: JSON) -> None:
        """Store ``obj`` as it is (not slimmed, not filtered): e.g. a stub."""
        old = self.objects.get(name)
        if old is not None:
            self._unindex(name, old)
        self.objects[name] = obj
        self.by_key.setdefault(self.key(obj), {})[name] = obj

    def discard(self, name: str) -> None:
        """Forget ``name`` (a GET answered 404 while the cache was stale)."""
        self._delete(name)

    # -- the loop --------------------------------------------------------------

    async def run(
        self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """List, report started, then watch forever (until cancelled).

        An error of the first list is raised to the starter; later errors are
        logged and retried with backoff.
        """
        started = False
        failures = relists = 0
        while True:
            try:
                await self._list()
            except Exception as exc:
                if (
                    not self.listed
                    and isinstance(exc, KubernetesApiError)
                    and (_refused(exc, self.optional))
                ):
                    self.absent = True
                    self.denied = exc.status != 404
                    if self.denied:
                        logger.info("not allowed to list %s: %s", self.path, exc)
                    self._replace({}, "")
                    if not started:
                        task_status.started()
                        started = True
                    await anyio.sleep(self.resync)
                    continue
                if not started:
                    raise
                failures += 1
                if self.listed:
                    # a list succeeded before: whatever this answer (a 401
                    # during a token rotation, a 403 from an authorizer blip,
                    # a 404 during a CRD re-install), keep what is known,
                    # marked stale; lookups GET the objects meanwhile
                    self.stale = True
                    self.changes.notify_all()
                logger.warning("listing %s failed: %s", self.path, exc)
                await anyio.sleep(self._delay(failures))
                continue
            self.absent = self.denied = self.stale = False
            self.listed = True
            failures = 0
            if not started:
                task_status.started()
                started = True
            began = time.monotonic()
            await self._watch_until(began + self.resync)
            if time.monotonic() - began < 1.0:
                # the watch asked for a re-list at once: do not hammer the server
                relists += 1
                await anyio.sleep(self._delay(relists))
            else:
                relists = 0

    async def _watch_until(self, deadline: float) -> None:
        failures = 0
        while (left := deadline - time.monotonic()) > 0:
            timeout = max(1, min(self.watch_timeout, int(left)))
            began = time.monotonic()
            outcome, events = await self._watch_once(timeout)
            if outcome == _RELIST:
                return
            early = time.monotonic() - began < timeout - 1
            if outcome == _DROPPED or (early and events == 0):
                failures += 1
                await anyio.sleep(self._delay(failures))
            else:
                failures = 0

    async def _list(self) -> None:
        restarts = 0
        while True:
            try:
                items, rv = await self._list_pages()
            except KubernetesApiError as exc:
                # a continue token whose version was compacted meanwhile:
                # start over (a fresh, consistent list), a few times at most
                if exc.status != 410 or restarts >= 3:
                    raise
                restarts += 1
                logger.info("list of %s expired mid-way; listing again", self.path)
                continue
            self.lists += 1
            self._replace(items, rv)
            return

    async def _list_pages(self) -> tuple[dict[str, JSON], str]:
        items: dict[str, JSON] = {}
        token = ""
        while True:
            query: dict[str, Any] = {"labelSelector": self.selector}
            if self.page_size > 0:
                query["limit"] = self.page_size
            if token:
                query["continue"] = token
            else:
                query.update(self._first_page_query())
            data = await self.api.request(
                "GET", self.path, query=query, map_denied=not self.optional
            )
            self.pages += 1
            for count, item in enumerate((data or {}).get("items") or [], 1):
                if self._admitted(item):
                    items[item["metadata"]["name"]] = self._slimmed(item)
                if count % _BATCH == 0:
                    await anyio.lowlevel.checkpoint()
            meta = (data or {}).get("metadata") or {}
            rv = str(meta.get("resourceVersion") or "")
            token = str(meta.get("continue") or "")
            if not token or self.page_size <= 0:
                return items, rv

    def _first_page_query(self) -> dict[str, Any]:
        """Hook: more query of a list's first page (none: the latest version)."""
        return {}

    async def _watch_once(self, seconds: int) -> tuple[str, int]:
        http = aiohttp_module()
        query = {
            "watch": True,
            "labelSelector": self.selector,
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": True,
            "timeoutSeconds": seconds,
        }
        events = 0
        self.watches += 1
        try:
            async with contextlib.AsyncExitStack() as stack:
                with anyio.fail_after(self.answer_timeout):
                    resp = await stack.enter_async_context(
                        self.api.stream(
                            self.path, query=query, read_timeout=seconds + 30
                        )
                    )
                buffer = b""
                async for chunk in resp.content.iter_any():
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        if not line.strip():
                            continue
                        events += 1
                        if not self._apply(json.loads(line)):
                            return _RELIST, events
                        if events % _BATCH == 0:  # a long burst: let others run
                            await anyio.lowlevel.checkpoint()
        except KubernetesApiError as exc:
            if exc.status == 410:
                return _RELIST, events
            logger.warning("watch of %s refused: %s", self.path, exc)
            return _DROPPED, events
        except (http.ClientError, TimeoutError, ValueError) as exc:
            logger.info("watch of %s dropped: %r", self.path, exc)
            return _DROPPED, events
        except Exception as exc:  # noqa: BLE001 -- denied, unreachable: keep going
            logger.warning("watch of %s failed: %s", self.path, exc)
            return _DROPPED, events
        return _ENDED, events

    def _apply(self, event: JSON) -> bool:
        """Apply one watch event; False when a re-list is needed."""
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            logger.info("watch of %s: %s; re-listing", self.path, obj.get("message"))
            return False
        rv = _rv(obj)
        if kind == "BOOKMARK":
            self.resource_version = rv or self.resource_version
            return True
        name = obj.get("metadata", {}).get("name")
        if name is None:
            return True
        if kind == "DELETED":
            self._remember_deleted(name, obj)
            self._delete(name)
        else:
            self._store(name, obj)
        if rv:
            self.resource_version = rv
        return True

    # -- the cache -------------------------------------------------------------

    def _slimmed(self, obj: JSON) -> JSON:
        return obj if self.slim is None else self.slim(obj)

    def _admitted(self, obj: JSON) -> bool:
        return self.admit is None or self.admit(obj)

    def _remember_deleted(self, name: str, obj: JSON) -> None:
        if self.keep_deleted <= 0 or not self._admitted(obj):
            return
        self._forget_deleted(name)
        obj = self._slimmed(obj)
        self.deleted[name] = obj
        self._deleted_by_key.setdefault(self.key(obj), {})[name] = obj
        while len(self.deleted) > self.keep_deleted:
            self._forget_deleted(next(iter(self.deleted)))

    def _forget_deleted(self, name: str) -> None:
        old = self.deleted.pop(name, None)
        if old is not None:
            _drop(self._deleted_by_key, self.key(old), name)

    def _store(self, name: str, obj: JSON) -> None:
        if self.deleted:
            self._forget_deleted(name)  # created again under the same name
        old = self.objects.get(name)
        if not self._admitted(obj):
            if old is not None:
                self._delete(name)
            return
        obj = self._slimmed(obj)
        if old is not None:
            self._unindex(name, old)
        self.objects[name] = obj
        key = self.key(obj)
        self.by_key.setdefault(key, {})[name] = obj
        self.changes.notify(key)
        if old is not None and self.key(old) != key:
            self.changes.notify(self.key(old))

    def _delete(self, name: str) -> None:
        old = self.objects.pop(name, None)
        if old is not None:
            self._unindex(name, old)
            self.changes.notify(self.key(old))

    def _unindex(self, name: str, obj: JSON) -> None:
        _drop(self.by_key, self.key(obj), name)

    def _replace(self, items: dict[str, JSON], rv: str) -> None:
        self.objects = items
        self.by_key = {}
        for name, obj in items.items():
            self.by_key.setdefault(self.key(obj), {})[name] = obj
        self.resource_version = rv
        self.changes.notify_all()

    def _delay(self, failures: int) -> float:
        delay: float = min(self.backoff * 2 ** (failures - 1), 30.0)
        return delay * random.uniform(0.5, 1.5)


def _drop(index: dict[str, dict[str, JSON]], key: str, name: str) -> None:
    """Take ``name`` out of ``index[key]`` (and the key, once empty)."""
    bucket = index.get(key)
    if bucket is not None:
        bucket.pop(name, None)
        if not bucket:
            del index[key]


def _refused(exc: Exception, optional: bool) -> bool:
    """A list answer meaning "not served here" (404) or, when optional, "not
    allowed" (401/403)."""
    if not isinstance(exc, KubernetesApiError):
        return False
    return exc.status == 404 or (optional and exc.status in (401, 403))


def _newer(a: JSON, b: JSON) -> bool:
    """True when ``a`` is a strictly newer version than ``b`` (numeric versions)."""
    try:
        return int(_rv(a)) > int(_rv(b))
    except ValueError:
        return False
