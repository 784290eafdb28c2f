"""Fault injection and request accounting for the fake API server.

:class:`Faults` holds one-shot (or N-shot) rules the server consumes as
requests arrive:

* ``fail_next(status, verb=..., resource=..., times=..., retry_after=...)``:
  answer matching requests with a ``Status`` error (500, 429 with a
  ``Retry-After`` header, 409 Conflict, ...);
* ``expire_next_watch(times=1)``: the next watch(es) get one ERROR event
  carrying a 410 Expired ``Status``, then the stream ends;
* ``hang_next(verb=..., resource=..., times=...)``: accept matching requests
  and never answer them (until the server stops);
* ``drop_next_watch(after_events=N, abrupt=True)``: cut the next watch
  stream after N events -- abruptly (the connection is reset mid-chunk, so
  aiohttp raises ``ClientPayloadError``) or cleanly (a normal end of stream);
* ``delay_watch(resource, seconds)``: client watches of ``resource`` get
  every live event ``seconds`` late (a watch lagging under load);
* ``limit_rate(per_second, retry_after=1)``: API Priority and Fairness in
  miniature -- more than ``per_second`` client requests within one second
  are rejected with ``429 TooManyRequests`` and a ``Retry-After``
  (``limit_rate(None)`` lifts it). Watches and the fixture controller's
  requests are exempt, as long-running requests and system traffic are.

:class:`RequestLog` counts requests by verb (``get``, ``list``, ``watch``,
``create``, ``update``, ``patch``, ``delete``, ``log``) and resource, and
keeps every HTTP request as it arrived (``received``: method and raw target,
also those to paths the server does not serve).

The same rules can be set over HTTP: ``POST /fake/faults`` with a JSON body
``{"fail": {"status": 500, "verb": "get", "resource": "jobs", "times": 1}}``,
``{"expire_watch": 1}``, ``{"drop_watch": {"after_events": 2, "abrupt": true}}``,
``{"limit_rate": {"per_second": 50, "retry_after": 1}}`` or ``{"reset": true}``;
``GET /fake/requests`` answers the counters.

Example::

    faults.fail_next(429, verb="get", resource="jobs", retry_after=1)
    requests.count("get", "jobs")   # how many GETs on jobs so far
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from .kinds import ApiError

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


@dataclass(frozen=True)
class Request:
    """What the server saw: verb, API group, resource (plural), subresource, ns, name."""

    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    controller: bool = False  # sent by the fixture controller (its User-Agent)
    path: str = ""
    #: the server's clock (:mod:`.clock`) when it arrived; the rate limit uses it
    at: float = 0.0
    #: answered 429 by the rate limit (:meth:`Faults.limit_rate`)
    throttled: bool = False


@dataclass
class FailRule:
    status: int
    verb: str | None = None
    resource: str | None = None
    group: str | None = None
    name: str | None = None
    times: int = 1
    retry_after: int | None = None
    message: str | None = None
    include_controller: bool = False
    path: str | None = None
    reason: str | None = None
    details: dict[str, Any] | None = None

    def matches(self, req: Request) -> bool:
        return (
            (self.include_controller or not req.controller)
            and (self.verb is None or self.verb == req.verb)
            and (self.resource is None or self.resource in (req.resource, _full(req)))
            and (self.group is None or self.group == req.group)
            and (self.name is None or self.name == req.name)
            and (self.path is None or self.path in req.path)
        )

    def error(self) -> ApiError:
        reason = self.reason or _REASONS.get(self.status, "Unknown")
        message = self.message or f"injected fault: {reason}"
        headers = {}
        details: dict[str, Any] = dict(self.details or {})
        if self.retry_after is not None:
            headers["Retry-After"] = str(self.retry_after)
            details["retryAfterSeconds"] = self.retry_after
        return ApiError(self.status, reason, message, details, headers)


def _full(req: Request) -> str:
    return f"{req.resource}/{req.subresource}" if req.subresource else req.resource


@dataclass
class WatchDrop:
    after_events: int
    abrupt: bool


@dataclass
class RateLimit:
    """At most ``per_second`` accepted requests in any one-second window."""

    per_second: int
    retry_after: int = 1
    window: float = 1.0
    accepted: deque[float] = field(default_factory=deque)

    def admit(self, now: float) -> bool:
        while self.accepted and self.accepted[0] <= now - self.window:
            self.accepted.popleft()
        if len(self.accepted) >= self.per_second:
            return False
        self.accepted.append(now)
        return True

    def error(self) -> ApiError:
        return ApiError(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.",
            {"retryAfterSeconds": self.retry_after},
            {"Retry-After": str(self.retry_after)},
        )


@dataclass
class Faults:
    """Pending fault rules; the server consumes them as requests arrive."""

    rules: list[FailRule] = field(default_factory=list)
    expire_watches: int = 0
    drops: list[WatchDrop] = field(default_factory=list)
    hangs: list[FailRule] = field(default_factory=list)
    rate_limit: RateLimit | None = None
    #: plural -> seconds each live event reaches a client's watch late
    watch_delays: dict[str, float] = field(default_factory=dict)

    def fail_next(
        self,
        status: int,
        *,
        verb: str | None = None,
        resource: str | None = None,
        group: str | None = None,
        name: str | None = None,
        times: int = 1,
        retry_after: int | None = None,
        message: str | None = None,
        include_controller: bool = False,
        path: str | None = None,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        """Answer the next ``times`` matching requests with ``status``.

        ``resource`` is a plural (``"jobs"``) or plural/subresource
        (``"jobs/status"``, ``"pods/log"``); ``verb`` one of the counted verbs;
        ``path`` a substring of the URL path. The fixture controller's own
        requests are spared unless ``include_controller``. ``reason`` and
        ``details`` replace the ``Status`` body's defaults (to answer as a real
        server would: ``AlreadyExists`` with ``{"name", "group", "kind"}``...).
        """
        self.rules.append(
            FailRule(
                status,
                verb,
                resource,
                group,
                name,
                times,
                retry_after,
                message,
                include_controller,
                path,
                reason,
                details,
            )
        )

    def hang_next(
        self,
        *,
        verb: str | None = None,
        resource: str | None = None,
        times: int = 1,
    ) -> None:
        """Accept the next ``times`` matching requests and never answer them.

        The request hangs until the server stops (a black-holed load balancer,
        a half-open connection); the fixture controller's requests are spared.
        """
        self.hangs.append(FailRule(0, verb, resource, times=times))

    def expire_next_watch(self, times: int = 1) -> None:
        """The next ``times`` watches answer a 410 ERROR event and end."""
        self.expire_watches += times

    def drop_next_watch(self, after_events: int = 0, *, abrupt: bool = True) -> None:
        """Cut the next watch stream after ``after_events`` events."""
        self.drops.append(WatchDrop(after_events, abrupt))

    def delay_watch(self, resource: str, seconds: float) -> None:
        """Client watches of ``resource`` (a plural) get each live event
        ``seconds`` late, as a watch lagging under load (the fixture
        controller's are not); ``0`` lifts it."""
        if seconds > 0:
            self.watch_delays[resource] = seconds
        else:
            self.watch_delays.pop(resource, None)

    def limit_rate(self, per_second: int | None, *, retry_after: int = 1) -> None:
        """Reject client requests beyond ``per_second`` in a second (429 + Retry-After).

        Like API Priority and Fairness: a rejected request is not executed,
        its answer names ``Retry-After: retry_after``. Watches and the
        fixture controller are exempt. ``None`` lifts the limit.
        """
        self.rate_limit = (
            None if per_second is None else RateLimit(per_second, retry_after)
        )

    def take_throttle(self, req: Request) -> ApiError | None:
        """The 429 for ``req`` when it is over the rate limit, else None."""
        limit = self.rate_limit
        if limit is None or req.controller or req.verb == "watch":
            return None
        return None if limit.admit(req.at) else limit.error()

    def reset(self) -> None:
        self.rules.clear()
        self.hangs.clear()
        self.expire_watches = 0
        self.drops.clear()
        self.rate_limit = None
        self.watch_delays.clear()

    # -- used by the server --------------------------------------------------
    def take_failure(self, req: Request) -> ApiError | None:
        for rule in self.rules:
            if rule.matches(req):
                rule.times -= 1
                if rule.times <= 0:
                    self.rules.remove(rule)
                return rule.error()
        return None

    def take_hang(self, req: Request) -> bool:
        for rule in self.hangs:
            if rule.matches(req):
                rule.times -= 1
                if rule.times <= 0:
                    self.hangs.remove(rule)
                return True
        return False

    def take_expiry(self) -> bool:
        if self.expire_watches > 0:
            self.expire_watches -= 1
            return True
        return False

    def take_drop(self) -> WatchDrop | None:
        return self.drops.pop(0) if self.drops else None

    def configure(self, spec: dict[str, Any]) -> None:
        """Apply a ``/fake/faults`` JSON body (see the module docstring)."""
        if spec.get("reset"):
            self.reset()
        if "fail" in spec:
            self.fail_next(**spec["fail"])
        if "expire_watch" in spec:
            self.expire_next_watch(int(spec["expire_watch"]))
        if "drop_watch" in spec:
            self.drop_next_watch(**spec["drop_watch"])
        if "limit_rate" in spec:
            limit = spec["limit_rate"]
            if limit is None:
                self.limit_rate(None)
            else:
                self.limit_rate(
                    limit["per_second"], retry_after=limit.get("retry_after", 1)
                )


@dataclass(frozen=True)
class Received:
    """One HTTP request as it arrived, before authentication and routing.

    ``target`` is the raw request target (path and query, as sent);
    ``controller``: sent by the fixture controller.
    """

    method: str
    target: str
    controller: bool = False


class RequestLog:
    """Every API request the server answered, countable by verb and resource.

    ``received`` also holds every HTTP request that arrived, whatever its
    path (those the server refused as unknown, unauthorized or test-only
    too): :meth:`client_received` answers whether a client sent anything.
    """

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.received: list[Received] = []

    def record(self, req: Request) -> None:
        self.requests.append(req)

    def record_received(self, received: Received) -> None:
        self.received.append(received)

    def client_received(self) -> list[Received]:
        """The HTTP requests of clients as they arrived (the fixture
        controller's left out), in arrival order."""
        return [r for r in self.received if not r.controller]

    def count(
        self,
        verb: str | None = None,
        resource: str | None = None,
        *,
        group: str | None = None,
        namespace: str | None = None,
        include_controller: bool = False,
    ) -> int:
        """Requests matching every given filter.

        ``resource`` ``"jobs"`` counts the jobs and their subresources;
        ``"jobs/status"`` only the status subresource. The fixture
        controller's requests are left out unless ``include_controller``.
        """
        return sum(
            1
            for r in self.requests
            if (include_controller or not r.controller)
            and (verb is None or r.verb == verb)
            and (
                resource is None
                or resource == _full(r)
                or ("/" not in resource and resource == r.resource)
            )
            and (group is None or r.group == group)
            and (namespace is None or r.namespace == namespace)
        )

    def by_verb(self) -> Counter[str]:
        """Requests per verb (the fixture controller's left out)."""
        return Counter(r.verb for r in self.requests if not r.controller)

    def snapshot(self) -> dict[str, int]:
        """``{"verb resource[/sub]": n}`` (the fixture controller's left out)."""
        return dict(
            Counter(f"{r.verb} {_full(r)}" for r in self.requests if not r.controller)
        )

    def client_requests(self) -> list[Request]:
        """The requests of clients, in arrival order (with ``at``, ``throttled``)."""
        return [r for r in self.requests if not r.controller]

    def reset(self) -> None:
        self.requests.clear()
        self.received.clear()
