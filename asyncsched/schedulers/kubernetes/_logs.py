"""Pod logs as whole lines: read, follow, resume without duplicates.

Logs are always requested with ``timestamps=true``: the timestamp of each
line filters ``since``/``until`` exactly (the API's ``sinceTime`` has whole
seconds only) and lets a dropped follow stream resume at the last line seen,
skipping the lines already yielded. Timestamps are stripped from the output;
every yielded line ends in ``\\n``.

A follow ends once the pod is terminal and its log is drained. While the
container has not started, a follow waits on ``wait_started`` (the pods
cache) instead of asking the server again and again. A 429 or a 5xx answer
is retried a bounded number of times (after its ``Retry-After``, else with
jittered exponential backoff). Closing the iterator (``aclose()``) releases
the HTTP response.

Example:
    >>> async def main(api: KubeApi, pod_done: Callable[[], Awaitable[bool]]) -> None:
    ...     query = LogQuery("trainer", 0, should_tail=True)
    ...     async for line in iter_pod_log(api, "ns", "pod-0", query, pod_done=pod_done):
    ...         print(line, end="")
"""

from __future__ import annotations

import codecs
import logging
import random
from collections.abc import AsyncGenerator, Awaitable, Callable
from datetime import UTC, datetime

import anyio

from asyncsched.schedulers.kit import DEFAULT_MAX_LINE_BYTES, LineSplitter, LogQuery
from asyncsched.schedulers.kubernetes._client import KubeApi
from asyncsched.schedulers.kubernetes._gate import KubernetesApiError, aiohttp_module
from asyncsched.schedulers.kubernetes._json import JSON

__all__ = ["RETRY_STATUSES", "has_log", "iter_pod_log", "parse_timestamp"]

logger = logging.getLogger(__name__)

_NS = 1_000_000_000
#: answers to a log request that are retried (overload, a restarting server)
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


def parse_timestamp(stamp: str) -> int:
    """RFC 3339 (nano) timestamp -> nanoseconds since the epoch.

    Example:
        >>> parse_timestamp("1970-01-01T00:00:01.5Z")
        1500000000
    """
    base, _, frac = stamp.rstrip("Z").partition(".")
    frac, _, _ = frac.partition("+")
    seconds = int(datetime.fromisoformat(base).replace(tzinfo=UTC).timestamp())
    return seconds * _NS + int((frac + "000000000")[:9] or 0)


def has_log(pod: JSON, container: str | None) -> bool:
    """The API can serve ``container``'s log: it runs, ran, or ran before.

    A container waiting to start (pulling, being created, a pod not yet
    scheduled) has none: the server answers 400 until it starts.

    Example:
        >>> has_log({"status": {"phase": "Pending"}}, "main")
        False
    """
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    for status in statuses:
        if container is not None and status.get("name") != container:
            continue
        state = status.get("state") or {}
        last = status.get("lastState") or {}
        return bool(state.get("running") or state.get("terminated")) or bool(
            last.get("terminated")
        )
    return False


def _to_ns(when: datetime | None) -> int | None:
    if when is None:
        return None
    return int(when.timestamp()) * _NS + when.microsecond * 1000


def _since_time(ns: int) -> str:
    return datetime.fromtimestamp(ns // _NS, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Position:
    """Where the reader is: the last timestamp yielded and how many lines had it.

    A resumed stream starts at the second of the last line (``sinceTime`` has
    whole seconds): :meth:`begin` marks the point, and :meth:`accept` drops
    the lines before it and as many lines *at* it as were yielded already.
    """

    def __init__(self, since: int | None) -> None:
        self.since = since
        self.last = -1
        self.at_last = 0
        self._resume = -1
        self._skip = 0

    def query_since(self) -> str | None:
        start = self.last if self.last >= 0 else self.since
        return _since_time(start) if start is not None else None

    def begin(self) -> None:
        """A new stream starts (from :meth:`query_since`)."""
        self._resume, self._skip = self.last, self.at_last

    def accept(self, ns: int) -> bool:
        """True when the line is new (not yielded before) and within ``since``."""
        if self.since is not None and ns < self.since:
            return False
        if ns < self._resume:
            return False
        if ns == self._resume and self._skip > 0:
            self._skip -= 1
            return False
        if ns == self.last:
            self.at_last += 1
        else:
            self.last, self.at_last = ns, 1
        return True


async def iter_pod_log(
    api: KubeApi,
    namespace: str,
    pod: str,
    query: LogQuery,
    *,
    pod_done: Callable[[], Awaitable[bool]] | None = None,
    wait_started: Callable[[], Awaitable[bool]] | None = None,
    container: str | None = None,
    idle_timeout: float | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> AsyncGenerator[str]:
    """Yield the lines of ``pod``'s log (one container) between ``query``'s
    ``since`` and ``until``, timestamps stripped.

    With ``query.should_tail`` the stream is re-opened after a drop from the last line
    seen, until ``pod_done()`` is true and the log is drained. A followed
    stream silent for ``idle_timeout`` seconds counts as dropped (a dead
    connection is noticed), and is re-opened the same way. A line longer
    than ``max_line_bytes`` comes in pieces of at most that size.

    ``wait_started()`` returns once the container has a log to read (True)
    or never will (False: the pod ended or is gone); a follow awaits it
    before each request instead of polling the server. A 429/5xx answer is
    retried up to ``api.max_retries`` times in a row.

    Raises:
        KubernetesApiError: the server kept answering 429/5xx, or refused
            the request otherwise (400 and 404 end the log instead).
    """
    pos = _Position(_to_ns(query.since))
    end = _to_ns(query.until)
    follow = query.should_tail
    path = f"/api/v1/namespaces/{namespace}/pods/{pod}/log"
    failures = 0
    refusals = 0  # 429/5xx answers in a row
    while True:
        if follow and wait_started is not None and not await wait_started():
            follow = False  # it never ran: one plain read says what there is
        params: dict[str, object] = {"timestamps": True, "follow": follow}
        if container:
            params["container"] = container
        params["sinceTime"] = pos.query_since()
        pos.begin()
        splitter = LineSplitter(max_line_bytes)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        got_any = False
        # a line over the cap comes in pieces: only the first has a timestamp,
        # the others follow its fate (yielded or skipped) and invent no "\n"
        continuing = keep = False
        try:
            async with api.stream(
                path, query=params, read_timeout=idle_timeout if follow else None
            ) as resp:
                async for chunk in resp.content.iter_any():
                    for raw in splitter.feed(decoder.decode(chunk)):
                        got_any = True
                        if continuing:
                            text = raw
                        else:
                            stamp, _, text = raw.partition(" ")
                            try:
                                ns = parse_timestamp(stamp)
                            except ValueError:
                                ns = max(pos.last, 0)
                            if end is not None and ns > end:
                                return
                            keep = pos.accept(ns)
                        continuing = not raw.endswith("\n")
                        if keep:
                            yield text
            tail = splitter.flush()
            if tail and not follow:
                text = tail if continuing else tail.partition(" ")[2]
                if keep or not continuing:
                    yield text + "\n"
        except KubernetesApiError as exc:
            if exc.status in RETRY_STATUSES and refusals < api.max_retries:
                delay = exc.retry_after
                if delay is None:
                    delay = min(api.backoff * 2**refusals, 10.0) * random.uniform(
                        0.5, 1.0
                    )
                refusals += 1
                logger.info("log of %s: %s; retrying in %.2fs", pod, exc, delay)
                await anyio.sleep(delay)
                continue
            # 400: the container has not started (or the pod is gone)
            if exc.status not in (400, 404) or not follow:
                if exc.status in (400, 404):
                    return
                raise
        except Exception as exc:
            if not follow or not _is_drop(exc):
                raise
            logger.info("log stream of %s dropped: %r; resuming", pod, exc)
        else:
            if not follow:
                return
        refusals = 0
        if pod_done is None or await pod_done():
            follow = False  # one last plain read drains what the stream missed
            continue
        failures = 0 if got_any else failures + 1
        await anyio.sleep(min(0.05 * 2**failures, 2.0) * random.uniform(0.5, 1.5))


def _is_drop(exc: BaseException) -> bool:
    return isinstance(exc, (aiohttp_module().ClientError, TimeoutError))
