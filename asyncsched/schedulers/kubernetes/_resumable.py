"""An informer that can start its watch from a saved resourceVersion.

:class:`ResumableInformer` is the :class:`~._informer.Informer` the event
source runs. It differs in three ways:

* ``resume_from``: its first list reads the objects as they were at that
  version (``resourceVersionMatch=Exact``) and its watch starts from there,
  so the server replays every change made since; a version the server no
  longer has (410, on the list or the watch) makes it list the latest
  (:attr:`ResumableInformer.expired_at_start`, or a ``gone`` re-list);
* ``gate``: its watch waits until the gate is set, so the source can take
  the state of every cache before the first change is applied;
* ``listener``: told of every applied change (with the version before it),
  of every bookmark, and of every re-list, and whether that re-list followed
  a 410 (a gap).

Example:
    >>> async def main(api: KubeApi, listener: InformerListener) -> None:
    ...     pods = ResumableInformer(api, "/api/v1/namespaces/ns/pods", "a=b",
    ...                              key=lambda o: "x")
    ...     pods.resume_from, pods.listener = "1234", listener
    ...     await anyio.create_task_group().start(pods.run)  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any, Protocol

import anyio

from asyncsched.schedulers.kubernetes._client import KubeApi
from asyncsched.schedulers.kubernetes._gate import KubernetesApiError
from asyncsched.schedulers.kubernetes._informer import Informer
from asyncsched.schedulers.kubernetes._json import JSON

__all__ = ["InformerListener", "ResumableInformer", "version_number"]

_CHANGES = ("ADDED", "MODIFIED", "DELETED")


class InformerListener(Protocol):
    """What a :class:`ResumableInformer` tells of its changes."""

    def changed(self, informer: ResumableInformer, key: str, before: str) -> None:
        """The object of ``key`` changed; the informer was at ``before``."""

    def relisted(self, informer: ResumableInformer, gone: bool) -> None:
        """The informer listed again; ``gone``: its version was too old (410)."""

    def advanced(self, informer: ResumableInformer) -> None:
        """The informer's version moved on without a change (a bookmark)."""


def version_number(rv: str) -> int | None:
    """A resourceVersion as a number (etcd's revision), None when it is not one."""
    try:
        return int(rv)
    except ValueError:
        return None


class ResumableInformer(Informer):
    """An :class:`Informer` resumable from a version, gated, with a listener."""

    def __init__(self, api: KubeApi, path: str, selector: str, **kwargs: Any) -> None:
        super().__init__(api, path, selector, **kwargs)
        #: the version the first watch starts from (None: the first list's)
        self.resume_from: str | None = None
        #: set when the watch may start
        self.gate = anyio.Event()
        self.listener: InformerListener | None = None
        self._gone = False
        self._first = True
        #: the saved version was compacted away before the first list
        self.expired_at_start = False
        #: the version before the last list (a RESYNC's position)
        self.before_relist = ""

    async def _list(self) -> None:
        if self._first and self.resume_from is not None:
            # the objects as they were at the saved version (etcd keeps
            # them until it compacts), then a watch from there
            try:
                items, rv = await self._list_pages()
            except KubernetesApiError as exc:
                if exc.status != 410:
                    raise
                self.resume_from = None  # compacted: the latest, and a RESYNC
                self.expired_at_start = True
            else:
                self.lists += 1
                self._replace(items, rv or self.resume_from)
                return
        await super()._list()

    def _first_page_query(self) -> dict[str, Any]:
        if self._first and self.resume_from is not None:
            return {
                "resourceVersion": self.resume_from,
                "resourceVersionMatch": "Exact",
            }
        return {}

    def _replace(self, items: dict[str, JSON], rv: str) -> None:
        first, self._first = self._first, False
        self.before_relist = self.resource_version
        super()._replace(items, rv)
        gone, self._gone = self._gone, False
        if not first and self.listener is not None:
            self.listener.relisted(self, gone)

    async def _watch_until(self, deadline: float) -> None:
        await self.gate.wait()
        await super()._watch_until(deadline)

    async def _watch_once(self, seconds: int) -> tuple[str, int]:
        outcome, events = await super()._watch_once(seconds)
        if outcome == "relist":  # a 410 (an ERROR event or the answer)
            self._gone = True
        return outcome, events

    def _apply(self, event: JSON) -> bool:
        before = self.resource_version
        if not super()._apply(event):
            return False
        obj = event.get("object") or {}
        listener = self.listener
        if listener is not None and event.get("type") == "BOOKMARK":
            listener.advanced(self)
        if (
            listener is not None
            and event.get("type") in _CHANGES
            and (obj.get("metadata") or {}).get("name") is not None
        ):
            listener.changed(self, self.key(obj), before)
        return True
