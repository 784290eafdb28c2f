"""A fake Kubernetes API server over real HTTP (aiohttp), for the real client.

Serves namespaces, pods, services, ``batch/v1`` Jobs and Volcano
``batch.volcano.sh/v1alpha1`` Jobs with the wire behaviour of a real server:

* ``Status`` errors (404 NotFound, 409 AlreadyExists/Conflict, 422 Invalid,
  400 BadRequest, 410 Expired, 415, 401 without the bearer token), a global
  resourceVersion, uid/creationTimestamp/generation, ``generateName``,
  ``dryRun=All``, defaulting/validation (:mod:`.admission`); unknown
  fields pruned with a ``Warning`` header (400 under
  ``fieldValidation=Strict``; silently before 1.25, see ``version``) and
  wrongly typed values refused (:mod:`.schema`);
* list with label/field selectors and ``limit``/``continue`` (410 for a
  continue token older than a compaction, or after
  :meth:`FakeKubeServer.expire_next_continue`); cluster-wide lists;
* ``metadata.managedFields`` written on every create and update, as a real
  server does (:mod:`.fieldsets`), so objects are as large as real ones;
* the status subresource (GET/PUT/PATCH), the three PATCH content types
  (:mod:`.patches`), server-side apply approximated (create or merge; no
  field ownership or conflicts), resourceVersion preconditions, no unconditional PUT on
  custom resources;
* DELETE with ``propagationPolicy`` (batch/v1 Jobs orphan by default),
  ownerReference garbage collection, graceful deletion of pods bound to a
  node (``pods/binding``) until the kubelet confirms with grace period 0;
* watches: history replay from a resourceVersion, synthetic ADDED from "0",
  label/field selectors (objects leaving the selection are DELETED),
  ``allowWatchBookmarks`` every ``bookmark_interval``, ``timeoutSeconds``,
  an ERROR event with a 410 ``Status`` for compacted versions
  (``history_limit`` events are kept, for at most ``watch_window`` seconds;
  :meth:`FakeKubeServer.compact`), and for versions older than an API server
  restart (:meth:`FakeKubeServer.restart`: open watches end, exact lists
  still answer);
* pod logs (``follow``, ``timestamps``, ``sinceTime``/``sinceSeconds``,
  ``tailLines``, ``limitBytes``, ``container``; 400 while the container
  waits to start);
* ``/version`` (``server.version``, 1.31 unless set), ``/api``, ``/apis`` and
  API resource discovery;
* Volcano's admission webhooks on Volcano Job creates, once
  :meth:`FakeKubeServer.enable_volcano_admission` (``fakeapi/volcano_webhook.py``:
  defaults such as ``maxRetry`` 0 -> 3, an existing open queue, valid tasks);
* bearer tokens: a fixed one, or (:meth:`FakeKubeServer.accept_tokens_from`)
  only the latest one an exec plugin issued, until its expiry
  (``fakeapi/exec_plugin.py``); ``unauthorized`` counts the 401 answers;
* a fault that accepts a request and never answers (``faults.hang_next``).

Test-only endpoints (a real server has none of them):

* ``GET /fake/v1``: ``{"fake": true}`` -- lets a client detect the fake;
* ``POST /fake/v1/namespaces/{ns}/pods/{name}/log?container=c``: append the
  plain-text body to the container's log (what a pod "prints");
* ``POST /fake/faults`` (see :mod:`.faults`), ``GET /fake/requests``,
  ``POST /fake/compact`` (forget the watch history).

Example::

    async with FakeKubeServer(bookmark_interval=0.2) as server:
        server.write_kubeconfig(path, namespace="default")
        ...  # kubernetes_asyncio clients loaded from `path`
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import json
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Self

import yaml
from aiohttp import web

from .admission import admit_create, admit_update, check_update_precondition
from .clock import Clock
from .faults import Faults, Received, Request, RequestLog
from .kinds import (
    JSON,
    KINDS,
    ApiError,
    Kind,
    already_exists,
    bad_request,
    expired,
    invalid,
    not_found,
)
from .logs import LogStore, parse_rfc3339
from .patches import APPLY, MERGE, STRATEGIC, apply_patch
from .schema import prune
from .selectors import FieldSelector, parse_field_selector, parse_label_selector
from .store import Event, Store, now_iso
from .volcano_webhook import VolcanoWebhook

CONTROLLER_AGENT_PREFIX = "asyncsched-fake-controller"
#: what a lagging watch's wait is named on the clock (``faults.delay_watch``;
#: ``ManualClock.sleepers``)
WATCH_LAG = "watch-lag"
_FIELD_LABELS = {
    "pods": {
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    },
    "namespaces": {"status.phase"},
}
_VERBS = {
    "pods": ["create", "delete", "get", "list", "patch", "update", "watch"],
}
_DEFAULT_VERBS = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
]


def parse_bool(value: str | None) -> bool:
    """Go's strconv.ParseBool, as the server parses boolean query parameters."""
    if value is None:
        return False
    if value in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if value in ("0", "f", "F", "false", "FALSE", "False", ""):
        return False
    raise bad_request(f'strconv.ParseBool: parsing "{value}": invalid syntax')


def _exact_version(query: Any) -> int:
    """The ``resourceVersion`` of a ``resourceVersionMatch=Exact`` list."""
    rv = _int_param(query, "resourceVersion")
    if rv is None or rv <= 0:
        raise bad_request(
            'resourceVersionMatch: Forbidden: "Exact" needs a resourceVersion > 0'
        )
    return rv


def _int_param(query: Any, name: str) -> int | None:
    raw = query.get(name)
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except ValueError:
        raise bad_request(
            f'{name}: Invalid value: "{raw}": must be an integer'
        ) from None


def _json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(
        status=status,
        text=json.dumps(body, separators=(",", ":")),
        content_type="application/json",
    )


def _error(err: ApiError) -> web.Response:
    resp = _json_response(err.status(), err.code)
    resp.headers.update(err.headers)
    return resp


class FakeKubeServer:
    """The fake API server; an async context manager serving on 127.0.0.1:<random>.

    ``token``: the bearer token required (None: no auth); ``bookmark_interval``:
    seconds between BOOKMARK events on watches that allow them;
    ``history_limit``: watch events kept for resuming; ``watch_window``:
    seconds an event stays resumable (a watch cache's window: a watch from a
    version older than that gets 410; None: no limit); ``volcano=False``
    serves no Volcano CRD (its URLs answer 404, as on a cluster without it);
    ``managed_fields=False`` writes no ``metadata.managedFields``.
    """

    def __init__(
        self,
        *,
        token: str | None = "fake-token",
        bookmark_interval: float = 60.0,
        history_limit: int = 10_000,
        volcano: bool = True,
        watch_window: float | None = None,
        managed_fields: bool = True,
        clock: Clock | None = None,
    ) -> None:
        #: what watch timeouts, bookmarks and the watch window run on (a
        #: test's :class:`ManualClock` moves only when advanced)
        self.clock = clock or Clock()
        self.token = token
        self.token_state: Path | None = None
        #: epoch seconds token expiries are compared with
        self.token_clock: Callable[[], float] = time.time
        #: requests answered 401 Unauthorized
        self.unauthorized = 0
        # Without the Volcano CRD its URLs answer 404, as on a cluster without it.
        self.kinds = {
            key: kind
            for key, kind in KINDS.items()
            if volcano or kind.group != "batch.volcano.sh"
        }
        self.bookmark_interval = bookmark_interval
        #: Volcano's admission webhooks, once :meth:`enable_volcano_admission`
        self.volcano_webhook: VolcanoWebhook | None = None
        #: (major, minor) answered on ``/version``
        self.version: tuple[int, int] = (1, 31)
        #: lists with a continue token still to answer 410 (expire_next_continue)
        self._expire_continues = 0
        self.store = Store(
            history_limit,
            watch_window=watch_window,
            managed_fields=managed_fields,
            clock=self.clock,
        )
        self.logs = LogStore(self.store.changed)
        self.faults = Faults()
        self.requests = RequestLog()
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._closing = False
        self._closed = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        for ns in ("default", "kube-system"):
            ns_kind = KINDS[("", "v1", "namespaces")]
            self.store.create(
                ns_kind, "", admit_create(ns_kind, "", {"metadata": {"name": ns}})
            )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- lifecycle -----------------------------------------------------------
    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        sockets = getattr(server, "sockets", None) or []
        self.port = int(sockets[0].getsockname()[1])

    async def stop(self) -> None:
        """End open streams, stop serving, and cancel the garbage collector's tasks."""
        self._closing = True
        self._closed.set()
        self.store.changed.notify()
        for watcher in list(self.store.watchers):
            watcher.queue.put_nowait(_CLOSE)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        while self._tasks:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._tasks.difference_update(tasks)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def kubeconfig(self, namespace: str | None = None) -> JSON:
        """A kubeconfig dict pointing at this server (token user, plain HTTP)."""
        context: JSON = {"cluster": "fake", "user": "fake-user"}
        if namespace:
            context["namespace"] = namespace
        user: JSON = {"token": self.token} if self.token else {}
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake-user", "user": user}],
            "contexts": [{"name": "fake", "context": context}],
            "current-context": "fake",
        }

    def write_kubeconfig(self, path: Path, namespace: str | None = None) -> Path:
        path.write_text(yaml.safe_dump(self.kubeconfig(namespace)))
        return path

    def accept_tokens_from(
        self, state: Path, clock: Callable[[], float] = time.time
    ) -> None:
        """Accept only the token recorded in ``state``, until its expiry.

        ``state`` holds ``"<token> <expiry epoch seconds>"`` (what
        ``fakeapi/exec_plugin.py`` writes each time it issues a token): every
        new token revokes the previous one, an expired one gets 401. Expiries
        are compared with ``clock`` (a test moves it forward instead of
        waiting out a token's lifetime).
        """
        self.token_state = state
        self.token_clock = clock

    def _authorized(self, auth: str) -> bool:
        if self.token_state is not None:
            try:
                token, expiry = self.token_state.read_text().split()
            except (OSError, ValueError):
                return False
            return auth == f"Bearer {token}" and self.token_clock() < float(expiry)
        return self.token is None or auth == f"Bearer {self.token}"

    def write_exec_kubeconfig(
        self, path: Path, command: list[str], namespace: str | None = None
    ) -> Path:
        """A kubeconfig whose user gets its token from an exec plugin ``command``."""
        config = self.kubeconfig(namespace)
        config["users"] = [
            {
                "name": "fake-user",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1",
                        "command": command[0],
                        "args": command[1:],
                        "interactiveMode": "Never",
                    }
                },
            }
        ]
        path.write_text(yaml.safe_dump(config))
        return path

    def enable_volcano_admission(
        self, queues: dict[str, str] | None = None
    ) -> VolcanoWebhook:
        """Pass Volcano Job creates through Volcano's webhooks (defaults, checks).

        ``queues`` maps queue name -> state (default: ``{"default": "Open"}``).
        """
        self.volcano_webhook = VolcanoWebhook(
            queues=dict(queues) if queues is not None else {"default": "Open"}
        )
        return self.volcano_webhook

    def compact(self) -> None:
        """Forget the watch history (etcd compaction): older versions get 410."""
        self.store.compact()

    def restart(self) -> None:
        """What an API server restart (etcd keeping the data) does to clients:
        every open watch ends, and the new watch cache starts at the current
        version (a watch from an older one: an ERROR event with a 410 Status;
        an exact list at one still answers until compaction)."""
        self.store.forget_watch_cache()
        for watcher in list(self.store.watchers):
            watcher.queue.put_nowait(_CLOSE)

    def expire_next_continue(self, times: int = 1) -> None:
        """The next ``times`` lists with a continue token answer 410 Expired, as
        when the version of the list was compacted between two pages."""
        self._expire_continues += times

    @property
    def expire_continues_left(self) -> int:
        """Lists with a continue token that will still answer 410."""
        return self._expire_continues

    def _continue_expired(self) -> bool:
        if self._expire_continues <= 0:
            return False
        self._expire_continues -= 1
        return True

    def create_namespace(self, name: str) -> JSON:
        """Create a namespace directly in the store (no request counted)."""
        kind = KINDS[("", "v1", "namespaces")]
        return self.store.create(
            kind, "", admit_create(kind, "", {"metadata": {"name": name}})
        )

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- dispatch -------------------------------------------------------------
    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        agent = request.headers.get("User-Agent", "")
        self.requests.record_received(
            Received(
                request.method,
                request.raw_path,
                controller=agent.startswith(CONTROLLER_AGENT_PREFIX),
            )
        )
        try:
            if path.startswith("/fake/"):
                return await self._fake(request)
            if not self._authorized(request.headers.get("Authorization", "")):
                self.unauthorized += 1
                raise ApiError(401, "Unauthorized", "Unauthorized")
            discovery = self._discovery(path)
            if discovery is not None:
                return _json_response(discovery)
            return await self._resource(request)
        except ApiError as err:
            return _error(err)

    def _parse(self, path: str) -> tuple[Kind, str | None, str, str]:
        """(kind, namespace or None, name, subresource) from a resource URL."""
        segs = [s for s in path.split("/") if s]
        if len(segs) >= 2 and segs[0] == "api" and segs[1] == "v1":
            group, version, rest = "", "v1", segs[2:]
        elif len(segs) >= 3 and segs[0] == "apis":
            group, version, rest = segs[1], segs[2], segs[3:]
        else:
            raise ApiError(
                404, "NotFound", "the server could not find the requested resource"
            )
        namespace: str | None = None
        if (
            len(rest) >= 3
            and rest[0] == "namespaces"
            and not (len(rest) == 3 and rest[2] in ("status", "finalize"))
        ):
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise ApiError(
                404, "NotFound", "the server could not find the requested resource"
            )
        kind = self.kinds.get((group, version, rest[0]))
        if kind is None or (namespace is not None and not kind.namespaced):
            raise ApiError(
                404, "NotFound", "the server could not find the requested resource"
            )
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if sub and sub not in ("status", "log", "binding"):
            raise ApiError(
                404, "NotFound", "the server could not find the requested resource"
            )
        if sub in ("log", "binding") and kind.plural != "pods":
            raise ApiError(
                404, "NotFound", "the server could not find the requested resource"
            )
        if kind.namespaced and namespace is None and name:
            raise ApiError(
                404, "NotFound", "the server could not find the requested resource"
            )
        return kind, namespace, name, sub

    async def _resource(self, request: web.Request) -> web.StreamResponse:
        kind, ns, name, sub = self._parse(request.path)
        method, query = request.method, request.query
        if method == "GET":
            verb = (
                "log"
                if sub == "log"
                else "get"
                if name
                else ("watch" if parse_bool(query.get("watch")) else "list")
            )
        elif method == "POST" and (not name or sub == "binding"):
            verb = "create"
        elif method == "PUT" and name:
            verb = "update"
        elif method == "PATCH" and name:
            verb = "patch"
        elif method == "DELETE":
            verb = "delete" if name else "deletecollection"
        else:
            raise ApiError(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            )
        agent = request.headers.get("User-Agent", "")
        req = Request(
            verb,
            kind.group,
            kind.plural,
            sub,
            ns or "",
            name,
            controller=agent.startswith(CONTROLLER_AGENT_PREFIX),
            path=request.path,
            at=self.clock.now(),
        )
        throttle = self.faults.take_throttle(req)
        if throttle is not None:
            self.requests.record(dataclasses.replace(req, throttled=True))
            raise throttle
        self.requests.record(req)
        if self.faults.take_hang(req):
            # accepted, never answered (a black-holed load balancer)
            await self._closed.wait()
            raise ApiError(503, "ServiceUnavailable", "server shutting down")
        failure = self.faults.take_failure(req)
        if failure is not None:
            raise failure
        dry_run = query.getall("dryRun", [])
        if any(v != "All" for v in dry_run):
            raise bad_request(f"Invalid dry run value: {dry_run}")
        ns_ = ns or ""
        if verb == "get":
            return _json_response(self._get(kind, ns_, name))
        if verb == "list":
            return self._list(kind, ns, query)
        if verb == "watch":
            return await self._watch(request, kind, ns, req.controller)
        if verb == "log":
            return await self._log(request, ns_, name)
        body = await self._body(request)
        validation = self._field_validation(query)
        warnings: list[str] = []
        if verb == "create" and sub != "binding":
            body = _validated(kind, body, validation, warnings)
            resp = self._create(kind, ns_, body, bool(dry_run))
            return _with_warnings(resp, warnings)
        if verb == "create" and sub == "binding":
            return self._bind(ns_, name, body)
        if verb == "create":
            return self._create(kind, ns_, body, bool(dry_run))
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
        if verb == "patch" and content_type == APPLY:
            return self._apply(kind, ns_, name, sub, body, query, validation, dry_run)
        if verb in ("update", "patch"):
            old = self._get(kind, ns_, name)
            if verb == "patch":
                new = apply_patch(
                    request.headers.get("Content-Type", ""),
                    old,
                    body,
                    custom=kind.custom,
                )
                check_update_precondition(
                    kind, old, new if isinstance(new, dict) else {}, put=False
                )
            else:
                check_update_precondition(
                    kind, old, body if isinstance(body, dict) else {}, put=True
                )
                new = body
            new = _validated(kind, new, validation, warnings)
            obj = admit_update(kind, old, new, status_only=sub == "status")
            if dry_run or obj == old:
                return _with_warnings(_json_response(obj if dry_run else old), warnings)
            return _with_warnings(
                _json_response(self.store.update(kind, ns_, obj)), warnings
            )
        if verb == "delete":
            return self._delete(kind, ns_, name, query, body, bool(dry_run))
        return self._delete_collection(kind, ns, query, body)

    def _apply(
        self,
        kind: Kind,
        ns: str,
        name: str,
        sub: str,
        body: Any,
        query: Any,
        validation: str,
        dry_run: list[str],
    ) -> web.Response:
        """Server-side apply, approximated: create, or merge onto the stored object.

        ``fieldManager`` is required as on a real server; field ownership and
        conflicts are not modelled (every apply wins, as with ``force=true``).
        """
        if not query.get("fieldManager"):
            raise invalid(
                kind,
                name,
                [("fieldManager", "Required value: is required for apply patch")],
            )
        if not isinstance(body, dict):
            raise bad_request("error decoding YAML: the applied object is not a map")
        warnings: list[str] = []
        body = _validated(kind, body, validation, warnings)
        if (body.get("metadata") or {}).get("name", name) != name:
            raise bad_request(
                "the name of the object does not match the name on the URL"
            )
        old = self.store.get(kind, ns, name)
        if old is None:
            if sub:
                raise not_found(kind, name)
            body.setdefault("metadata", {})["name"] = name
            return _with_warnings(self._create(kind, ns, body, bool(dry_run)), warnings)
        new = apply_patch(
            STRATEGIC if not kind.custom else MERGE, old, body, custom=kind.custom
        )
        obj = admit_update(kind, old, new, status_only=sub == "status")
        if dry_run or obj == old:
            return _with_warnings(_json_response(obj if dry_run else old), warnings)
        return _with_warnings(
            _json_response(self.store.update(kind, ns, obj)), warnings
        )

    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()
        if not raw:
            return None
        if request.headers.get("Content-Type", "").startswith(APPLY):
            try:
                return yaml.safe_load(raw)
            except yaml.YAMLError:
                raise bad_request("error decoding YAML: invalid document") from None
        try:
            return json.loads(raw)
        except ValueError:
            raise bad_request(
                "the body of the request was in an unknown format or not valid JSON"
            ) from None

    # -- verbs ---------------------------------------------------------------
    def _get(self, kind: Kind, ns: str, name: str) -> JSON:
        obj = self.store.get(kind, ns, name)
        if obj is None:
            raise not_found(kind, name)
        return obj

    def _require_namespace(self, kind: Kind, ns: str) -> None:
        if (
            kind.namespaced
            and self.store.get(KINDS[("", "v1", "namespaces")], "", ns) is None
        ):
            raise not_found(KINDS[("", "v1", "namespaces")], ns)

    def _create(self, kind: Kind, ns: str, body: Any, dry_run: bool) -> web.Response:
        self._require_namespace(kind, ns)
        obj = admit_create(kind, ns, body)
        obj = self._volcano_admission(kind, obj)
        name = obj["metadata"]["name"]
        if self.store.get(kind, ns, name) is not None:
            raise already_exists(kind, name)
        if dry_run:
            obj["metadata"].setdefault("creationTimestamp", now_iso())
            obj["metadata"].setdefault("generation", 1)
            if kind.namespaced:
                obj["metadata"]["namespace"] = ns
            return _json_response(obj, 201)
        return _json_response(self.store.create(kind, ns, obj), 201)

    def _volcano_admission(self, kind: Kind, obj: JSON) -> JSON:
        """Volcano's webhooks on a Job create, when enabled (dry runs too)."""
        if self.volcano_webhook is None or kind.key != (
            "batch.volcano.sh",
            "v1alpha1",
            "jobs",
        ):
            return obj
        return self.volcano_webhook.admit_job(obj)

    def _bind(self, ns: str, name: str, body: Any) -> web.Response:
        """``POST pods/{name}/binding``: what a scheduler does to place a pod."""
        kind = KINDS[("", "v1", "pods")]
        pod = self._get(kind, ns, name)
        node = (
            ((body or {}).get("target") or {}).get("name")
            if isinstance(body, dict)
            else None
        )
        if not node:
            raise invalid(kind, name, [("target.name", "Required value")])
        if pod["spec"].get("nodeName"):
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on pods/binding "{name}": pod '
                f'{name} is already assigned to node "{pod["spec"]["nodeName"]}"',
                {"name": name, "kind": "pods/binding"},
            )
        bound = dict(pod, spec={**pod["spec"], "nodeName": node})
        self.store.update(kind, ns, bound)
        return _json_response(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "code": 201,
            },
            201,
        )

    def _selectors(self, kind: Kind, query: Any) -> tuple[Any, FieldSelector]:
        labels = parse_label_selector(query.get("labelSelector"))
        fields = parse_field_selector(query.get("fieldSelector"))
        allowed = {"metadata.name", "metadata.namespace"} | _FIELD_LABELS.get(
            kind.plural, set()
        )
        for path, _, _ in fields.terms:
            if path not in allowed:
                raise bad_request(f"field label not supported: {path}")
        return labels, fields

    def _matching(self, kind: Kind, ns: str | None, query: Any) -> list[JSON]:
        labels, fields = self._selectors(kind, query)
        if query.get("resourceVersionMatch") == "Exact" and not query.get("continue"):
            # the objects as they were at that version (or 410 once compacted)
            found = self.store.items_at(kind, ns, _exact_version(query))
        else:
            found = self.store.items(kind, ns)
        return [
            o
            for o in found
            if labels.matches(o["metadata"].get("labels") or {}) and fields.matches(o)
        ]

    def _list(self, kind: Kind, ns: str | None, query: Any) -> web.Response:
        items = self._matching(kind, ns, query)
        rv = self.store.rv
        if query.get("resourceVersionMatch") == "Exact":
            rv = _exact_version(query)
        token = query.get("continue")
        if token:
            try:
                state = json.loads(base64.urlsafe_b64decode(token.encode()))
                start, rv = str(state["start"]), int(state["rv"])
            except (ValueError, KeyError, TypeError):
                raise bad_request(
                    "continue key is not valid: illegal base64 data"
                ) from None
            if rv < self.store.compacted_rv or self._continue_expired():
                raise expired(
                    "The provided continue parameter is too old to display a "
                    "consistent list result. You can start a new list without the "
                    "continue parameter, or use the continue token in this response "
                    "to retrieve the remainder of the results. Continuing with the "
                    "provided token results in an inconsistent list - objects that "
                    "were created, modified, or deleted between the time the first "
                    "chunk was returned and now may show up in the list."
                )
            items = [o for o in items if _sort_key(o) > start]
        meta: JSON = {"resourceVersion": str(rv)}
        limit = _int_param(query, "limit")
        if limit and len(items) > limit:
            rest = len(items) - limit
            items = items[:limit]
            state = {"rv": rv, "start": _sort_key(items[-1])}
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps(state).encode()
            ).decode()
            meta["remainingItemCount"] = rest
        return _json_response(
            {
                "kind": kind.list_kind,
                "apiVersion": kind.api_version,
                "metadata": meta,
                "items": items,
            }
        )

    def _delete(
        self, kind: Kind, ns: str, name: str, query: Any, body: Any, dry_run: bool
    ) -> web.Response:
        obj = self._get(kind, ns, name)
        options = body if isinstance(body, dict) else {}
        pre = options.get("preconditions") or {}
        if pre.get("resourceVersion") not in (
            None,
            obj["metadata"]["resourceVersion"],
        ) or (pre.get("uid") not in (None, obj["metadata"]["uid"])):
            from .kinds import conflict

            raise conflict(kind, name)
        policy = query.get("propagationPolicy") or options.get("propagationPolicy")
        orphan = query.get("orphanDependents") or options.get("orphanDependents")
        if policy is None and orphan is not None:
            policy = "Orphan" if parse_bool(str(orphan).lower()) else "Background"
        policy = policy or kind.default_propagation
        if policy not in ("Orphan", "Background", "Foreground"):
            raise ApiError(
                422, "Invalid", f'propagationPolicy: Unsupported value: "{policy}"'
            )
        if dry_run:
            return _json_response(
                obj if kind.delete_returns_object else _success(kind, obj)
            )
        uid = obj["metadata"]["uid"]
        if policy == "Foreground" and any(True for _ in self.store.dependents(uid)):
            pending = dict(
                obj,
                metadata={
                    **obj["metadata"],
                    "deletionTimestamp": now_iso(),
                    "deletionGracePeriodSeconds": 0,
                    "finalizers": [
                        *obj["metadata"].get("finalizers", []),
                        "foregroundDeletion",
                    ],
                },
            )
            marked = self.store.update(kind, ns, pending)
            self._spawn(self._foreground(kind, ns, name, uid))
            return _json_response(marked)
        if kind.plural == "pods":
            grace = _int_param(query, "gracePeriodSeconds")
            if grace is None and options.get("gracePeriodSeconds") is not None:
                grace = int(options["gracePeriodSeconds"])
            return _json_response(self._delete_pod(ns, name, grace))
        gone = self._remove(kind, ns, name)
        if policy == "Orphan":
            self._orphan(uid)
        else:
            self._spawn(self._collect(uid))
        return _json_response(
            gone if kind.delete_returns_object else _success(kind, gone)
        )

    def _delete_pod(self, ns: str, name: str, grace: int | None) -> JSON:
        """Graceful pod deletion, as the pod registry does it.

        A pod bound to a node and not terminal gets ``deletionTimestamp`` (now
        + grace period) and stays until its kubelet confirms with a grace
        period of 0; an unbound or terminal pod, or grace 0, goes at once.
        """
        kind = KINDS[("", "v1", "pods")]
        obj = self._get(kind, ns, name)
        if grace is None:
            grace = int(obj["spec"].get("terminationGracePeriodSeconds", 30))
        phase = (obj.get("status") or {}).get("phase")
        if not obj["spec"].get("nodeName") or phase in ("Succeeded", "Failed"):
            grace = 0
        meta = obj["metadata"]
        if grace > 0:
            if meta.get("deletionTimestamp"):
                return obj
            deadline = datetime.now(UTC) + timedelta(seconds=grace)
            meta = {
                **meta,
                "deletionTimestamp": deadline.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "deletionGracePeriodSeconds": grace,
            }
            return self.store.update(kind, ns, dict(obj, metadata=meta))
        if not meta.get("deletionTimestamp"):
            meta = {**meta, "deletionTimestamp": now_iso()}
        meta = {**meta, "deletionGracePeriodSeconds": 0}
        self.store.objects[(kind.key, ns, name)] = dict(obj, metadata=meta)
        return self._remove(kind, ns, name)

    def _remove(self, kind: Kind, ns: str, name: str) -> JSON:
        gone = self.store.remove(kind, ns, name)
        if kind.plural == "pods":
            self.logs.drop_pod(ns, name)
        if kind.plural == "namespaces":
            for other in KINDS.values():
                if other.namespaced:
                    for o in self.store.items(other, name):
                        self._remove(other, name, o["metadata"]["name"])
        return gone

    def _orphan(self, uid: str) -> None:
        for dkind, dns, dname in list(self.store.dependents(uid)):
            obj = self.store.get(dkind, dns, dname)
            if obj is None:
                continue
            refs = [
                r
                for r in obj["metadata"].get("ownerReferences", [])
                if r.get("uid") != uid
            ]
            meta = {**obj["metadata"], "ownerReferences": refs}
            if not refs:
                del meta["ownerReferences"]
            self.store.update(dkind, dns, dict(obj, metadata=meta))

    async def _collect(self, uid: str) -> None:
        """Background garbage collection of the dependents of a deleted owner."""
        await asyncio.sleep(0)
        for dkind, dns, dname in list(self.store.dependents(uid)):
            dep = self.store.get(dkind, dns, dname)
            if dep is None:
                continue
            if dkind.plural == "pods":
                self._delete_pod(dns, dname, None)
            else:
                self._remove(dkind, dns, dname)
                await self._collect(dep["metadata"]["uid"])

    async def _foreground(self, kind: Kind, ns: str, name: str, uid: str) -> None:
        await self._collect(uid)
        while any(True for _ in self.store.dependents(uid)) and not self._closing:
            await self.store.changed.wait()
        if self.store.get(kind, ns, name) is not None:
            self._remove(kind, ns, name)

    def _delete_collection(
        self, kind: Kind, ns: str | None, query: Any, body: Any
    ) -> web.Response:
        items = self._matching(kind, ns, query)
        for obj in items:
            meta = obj["metadata"]
            if kind.plural == "pods":
                self._delete_pod(meta.get("namespace", ""), meta["name"], None)
                continue
            self._remove(kind, meta.get("namespace", ""), meta["name"])
            self._spawn(self._collect(meta["uid"]))
        return _json_response(
            {
                "kind": kind.list_kind,
                "apiVersion": kind.api_version,
                "metadata": {"resourceVersion": str(self.store.rv)},
                "items": items,
            }
        )

    # -- watch ---------------------------------------------------------------
    async def _watch(
        self, request: web.Request, kind: Kind, ns: str | None, controller: bool
    ) -> web.StreamResponse:
        query = request.query
        labels, fields = self._selectors(kind, query)
        timeout = _int_param(query, "timeoutSeconds")
        bookmarks = parse_bool(query.get("allowWatchBookmarks"))
        rv_param = query.get("resourceVersion")
        since = (
            None
            if rv_param in (None, "", "0")
            else _int_param(query, "resourceVersion")
        )
        resp = web.StreamResponse(
            status=200, headers={"Content-Type": "application/json"}
        )
        resp.enable_chunked_encoding()
        await resp.prepare(request)

        async def send(type_: str, obj: JSON) -> None:
            await resp.write(_event_line(type_, obj))

        try:
            if not controller and self.faults.take_expiry():
                raise expired(
                    f"too old resource version: {since or 0} ({self.store.rv})"
                )
            watcher, first = self.store.watch(kind, ns, since)
        except ApiError as err:
            await send("ERROR", err.status())
            await resp.write_eof()
            return resp
        drop = None if controller else self.faults.take_drop()
        lag = 0.0 if controller else self.faults.watch_delays.get(kind.plural, 0.0)
        clock = self.clock
        deadline = None if timeout is None else clock.now() + timeout
        next_bookmark = clock.now() + self.bookmark_interval
        sent = 0

        def matches(obj: JSON) -> bool:
            return labels.matches(
                obj["metadata"].get("labels") or {}
            ) and fields.matches(obj)

        def translate(event: Event) -> tuple[str, JSON] | None:
            now_in = matches(event.obj)
            if event.type != "MODIFIED" or event.old is None:
                return (event.type, event.obj) if now_in else None
            was_in = matches(event.old)
            if now_in:
                return ("MODIFIED" if was_in else "ADDED", event.obj)
            return ("DELETED", event.obj) if was_in else None

        try:
            pending: deque[Any] = deque(first)
            while not self._closing:
                if drop is not None and sent >= drop.after_events:
                    if drop.abrupt:
                        transport = request.transport
                        if transport is not None:
                            transport.close()
                        return resp
                    break
                if not pending:
                    now = clock.now()
                    if deadline is not None and now >= deadline:
                        break
                    if not watcher.queue.empty():
                        # events first: a bookmark's version says every event
                        # before it was sent
                        if lag:  # a lagging watch (faults.delay_watch)
                            await clock.sleep(lag, WATCH_LAG)
                        while not watcher.queue.empty():
                            pending.append(watcher.queue.get_nowait())
                        continue
                    if bookmarks and now >= next_bookmark:
                        next_bookmark = now + self.bookmark_interval
                        await send(
                            "BOOKMARK",
                            {
                                "kind": kind.kind,
                                "apiVersion": kind.api_version,
                                "metadata": {"resourceVersion": str(self.store.rv)},
                            },
                        )
                        continue
                    wait = min(
                        x
                        for x in (
                            deadline - now if deadline is not None else None,
                            next_bookmark - now if bookmarks else None,
                            1.0,
                        )
                        if x is not None
                    )
                    with contextlib.suppress(TimeoutError):
                        pending.append(await clock.wait_for(watcher.queue.get(), wait))
                        if lag:  # a lagging watch (faults.delay_watch)
                            await clock.sleep(lag, WATCH_LAG)
                        # and whatever queued meanwhile: one write for them all
                        while not watcher.queue.empty():
                            pending.append(watcher.queue.get_nowait())
                    continue
                if pending[0] is _CLOSE:
                    break
                lines: list[bytes] = []
                while pending and pending[0] is not _CLOSE:
                    if drop is not None and sent + len(lines) >= drop.after_events:
                        break
                    item = translate(pending.popleft())
                    if item is not None:
                        lines.append(_event_line(*item))
                if lines:
                    await resp.write(b"".join(lines))
                    sent += len(lines)
            await resp.write_eof()
        except ConnectionResetError:  # the client went away
            pass
        finally:
            self.store.unwatch(watcher)
        return resp

    # -- logs ----------------------------------------------------------------
    async def _log(
        self, request: web.Request, ns: str, name: str
    ) -> web.StreamResponse:
        query = request.query
        pod = self._get(KINDS[("", "v1", "pods")], ns, name)
        containers = [c["name"] for c in pod["spec"].get("containers", [])]
        container = query.get("container")
        if not container:
            if len(containers) != 1:
                raise bad_request(
                    f"a container name must be specified for pod {name}, choose one "
                    f"of: [{' '.join(containers)}]"
                )
            container = containers[0]
        elif container not in containers:
            raise bad_request(f"container {container} is not valid for pod {name}")
        if parse_bool(query.get("previous")):
            raise bad_request(
                f'previous terminated container "{container}" in pod "{name}" not found'
            )
        state = _container_state(pod, container)
        if "running" not in state and "terminated" not in state:
            reason = (state.get("waiting") or {}).get("reason") or "ContainerCreating"
            raise bad_request(
                f'container "{container}" in pod "{name}" is waiting to start: {reason}'
            )
        follow = parse_bool(query.get("follow"))
        timestamps = parse_bool(query.get("timestamps"))
        tail = _int_param(query, "tailLines")
        limit = _int_param(query, "limitBytes")
        since_ns: int | None = None
        if query.get("sinceTime"):
            since_ns = parse_rfc3339(query["sinceTime"])
        elif query.get("sinceSeconds"):
            seconds = _int_param(query, "sinceSeconds") or 0
            if seconds < 1:
                raise ApiError(
                    422,
                    "Invalid",
                    "sinceSeconds: Invalid value: must be greater than 0",
                )
            since_ns = time.time_ns() - seconds * 1_000_000_000

        def selected(start: int) -> list[bytes]:
            lines = self.logs.lines(ns, name, container)[start:]
            return [
                ln.render(timestamps)
                for ln in lines
                if since_ns is None or ln.ts_ns >= since_ns
            ]

        first = selected(0)
        if tail is not None:
            first = first[-tail:] if tail > 0 else []
        seen = len(self.logs.lines(ns, name, container))
        if not follow:
            data = b"".join(first)
            if limit is not None:
                data = data[:limit]
            return web.Response(body=data, content_type="text/plain")
        resp = web.StreamResponse(status=200)
        resp.content_type = "text/plain"
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        budget = limit
        chunk = b"".join(first)
        with contextlib.suppress(ConnectionResetError):  # the client went away
            while True:
                if chunk:
                    if budget is not None:
                        chunk, budget = chunk[:budget], budget - len(chunk[:budget])
                    await resp.write(chunk)
                    if budget is not None and budget <= 0:
                        break
                current = self.store.get(KINDS[("", "v1", "pods")], ns, name)
                if current is None or self._closing:
                    break
                if seen == len(self.logs.lines(ns, name, container)) and _finished(
                    current, container
                ):
                    break
                if seen == len(self.logs.lines(ns, name, container)):
                    await self.store.changed.wait()
                chunk = b"".join(selected(seen))
                seen = len(self.logs.lines(ns, name, container))
            await resp.write_eof()
        return resp

    def _field_validation(self, query: Any) -> str:
        """The field validation mode of a write: ``fieldValidation`` (default
        Warn) from Kubernetes 1.25 on (``self.version``). An older server (1.20)
        has none: unknown fields are dropped without a ``Warning`` and the
        parameter is ignored, as any query parameter it does not know."""
        if self.version < (1, 25):
            return "Ignore"
        validation = str(query.get("fieldValidation", "Warn"))
        if validation not in ("Ignore", "Warn", "Strict"):
            raise bad_request(
                f'fieldValidation: Invalid value: "{validation}": must be one of '
                "Ignore, Warn, Strict"
            )
        return validation

    # -- discovery and test-only endpoints ------------------------------------
    def _discovery(self, path: str) -> JSON | None:
        path = path.rstrip("/") or "/"
        if path == "/version":
            major, minor = self.version
            return {
                "major": str(major),
                "minor": str(minor),
                "gitVersion": f"v{major}.{minor}.0-fake",
                "gitCommit": "0000000000000000000000000000000000000000",
                "gitTreeState": "clean",
                "buildDate": "2024-08-13T00:00:00Z",
                "goVersion": "go1.22.5",
                "compiler": "gc",
                "platform": "linux/amd64",
            }
        if path == "/api":
            return {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    {
                        "clientCIDR": "0.0.0.0/0",
                        "serverAddress": f"127.0.0.1:{self.port}",
                    }
                ],
            }
        groups: dict[str, list[str]] = {}
        for kind in self.kinds.values():
            if kind.group:
                groups.setdefault(kind.group, [])
                if kind.version not in groups[kind.group]:
                    groups[kind.group].append(kind.version)

        def group_doc(name: str) -> JSON:
            versions = [
                {"groupVersion": f"{name}/{v}", "version": v} for v in groups[name]
            ]
            return {"name": name, "versions": versions, "preferredVersion": versions[0]}

        if path == "/apis":
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [group_doc(g) for g in groups],
            }
        segs = path.strip("/").split("/")
        if len(segs) == 2 and segs[0] == "apis" and segs[1] in groups:
            return {"kind": "APIGroup", "apiVersion": "v1", **group_doc(segs[1])}
        if path == "/api/v1" or (len(segs) == 3 and segs[0] == "apis"):
            group, version = ("", "v1") if path == "/api/v1" else (segs[1], segs[2])
            kinds = [
                k
                for k in self.kinds.values()
                if (k.group, k.version) == (group, version)
            ]
            if not kinds:
                return None
            resources: list[JSON] = []
            for k in kinds:
                resources.append(
                    {
                        "name": k.plural,
                        "singularName": k.kind.lower(),
                        "namespaced": k.namespaced,
                        "kind": k.kind,
                        "verbs": _VERBS.get(k.plural, _DEFAULT_VERBS),
                    }
                )
                resources.append(
                    {
                        "name": f"{k.plural}/status",
                        "singularName": "",
                        "namespaced": k.namespaced,
                        "kind": k.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
                if k.plural == "pods":
                    resources.append(
                        {
                            "name": "pods/binding",
                            "singularName": "",
                            "namespaced": True,
                            "kind": "Binding",
                            "verbs": ["create"],
                        }
                    )
                    resources.append(
                        {
                            "name": "pods/log",
                            "singularName": "",
                            "namespaced": True,
                            "kind": "Pod",
                            "verbs": ["get"],
                        }
                    )
            return {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": k.api_version,
                "resources": resources,
            }
        return None

    async def _fake(self, request: web.Request) -> web.StreamResponse:
        segs = [s for s in request.path.split("/") if s]
        if segs == ["fake", "v1"]:
            return _json_response({"fake": True})
        if segs == ["fake", "faults"] and request.method == "POST":
            self.faults.configure(await self._body(request) or {})
            return _json_response({})
        if segs == ["fake", "requests"]:
            return _json_response(self.requests.snapshot())
        if segs == ["fake", "compact"] and request.method == "POST":
            self.store.compact()
            return _json_response(
                {"compactedResourceVersion": str(self.store.compacted_rv)}
            )
        if (
            len(segs) == 7
            and segs[:3] == ["fake", "v1", "namespaces"]
            and segs[4] == "pods"
            and segs[6] == "log"
            and request.method == "POST"
        ):
            ns, name = segs[3], segs[5]
            pod = self._get(KINDS[("", "v1", "pods")], ns, name)
            container = (
                request.query.get("container") or pod["spec"]["containers"][0]["name"]
            )
            text = (await request.read()).decode()
            self.logs.append(ns, name, container, text)
            if parse_bool(request.query.get("flush")):
                self.logs.flush(ns, name, container)
            return _json_response({})
        raise ApiError(
            404, "NotFound", "the server could not find the requested resource"
        )


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


_CLOSE = Event(0, KINDS[("", "v1", "namespaces")], "CLOSE", {"metadata": {}})


def _validated(kind: Kind, body: Any, validation: str, warnings: list[str]) -> Any:
    """Prune unknown fields (``fieldValidation`` Ignore/Warn) or refuse them (Strict)."""
    pruned, unknown = prune(kind, body)
    messages = [f'unknown field "{path}"' for path in unknown]
    if messages and validation == "Strict":
        raise bad_request(
            f'{kind.kind} in version "{kind.version}" cannot be handled as a '
            f"{kind.kind}: strict decoding error: {', '.join(messages)}"
        )
    if validation == "Warn":
        warnings.extend(messages)
    return pruned


def _with_warnings(resp: web.Response, warnings: list[str]) -> web.Response:
    for message in warnings:
        resp.headers.add("Warning", '299 - "' + message.replace('"', '\\"') + '"')
    return resp


def _event_line(type_: str, obj: JSON) -> bytes:
    """One watch event as its JSON line."""
    line = json.dumps({"type": type_, "object": obj}, separators=(",", ":")) + "\n"
    return line.encode()


def _sort_key(obj: JSON) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def _success(kind: Kind, obj: JSON) -> JSON:
    details: JSON = {"name": obj["metadata"]["name"]}
    if kind.group:
        details["group"] = kind.group
    details["kind"] = kind.plural
    details["uid"] = obj["metadata"]["uid"]
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }


def _container_state(pod: JSON, container: str) -> JSON:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == container:
            return dict(status.get("state") or {})
    return {}


def _finished(pod: JSON, container: str) -> bool:
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return True
    return "terminated" in _container_state(pod, container)
