"""The scheduler's one connection to the API server, made on first use.

A :class:`Connector` holds what the scheduler was given (an ``ApiClient``, or
a kubeconfig and context to load one from), makes the :class:`KubeApi` the
first time it is asked, and learns the default namespace on the way: the
constructor's, else the kubeconfig context's (in a pod, the service
account's), else ``default``.

Example:
    >>> async def main() -> None:
    ...     connector = Connector(ConnectionSettings(context="kind-kind"), lambda: None)
    ...     api = await connector.connect()
    ...     print(connector.namespace, api.host)
    ...     await connector.aclose()
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from asyncsched.errors import InvalidRunConfigException, SchedulerUnavailableError
from asyncsched.schedulers.kubernetes._client import KubeApi, RequestLimits
from asyncsched.schedulers.kubernetes._config import connect
from asyncsched.schedulers.kubernetes._gate import BACKEND
from asyncsched.schedulers.kubernetes._names import is_dns_label

__all__ = ("ConnectionSettings", "Connector")


@dataclass(frozen=True)
class ConnectionSettings(RequestLimits):
    """What to connect to, and the :class:`RequestLimits` of the connection
    (see :class:`KubernetesScheduler`)."""

    client: Any = None
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None
    wall_clock: Callable[[], float] = field(default=time.time)


class Connector:
    """Makes the :class:`KubeApi` once (concurrent callers share it).

    ``check_open`` raises once the scheduler is closed: no connection is
    made (or handed out) after that.
    """

    def __init__(
        self, settings: ConnectionSettings, check_open: Callable[[], None]
    ) -> None:
        self.settings = settings
        self._check_open = check_open
        #: the connection, once made
        self.api: KubeApi | None = None
        self._context = settings.context
        self._namespace = settings.namespace
        self._lock = anyio.Lock()

    @property
    def namespace(self) -> str | None:
        """The default namespace (None until connected, unless given)."""
        return self._namespace

    @property
    def home(self) -> str:
        """The default namespace, ``default`` while it is not known."""
        return self._namespace or "default"

    async def connect(self, context: str | None = None) -> KubeApi:
        """The connection (made now if need be) to ``context``, else the configured one.

        Raises:
            InvalidRunConfigException: ``context`` is not the one connected to.
            SchedulerUnavailableError: no usable config, or its default
                namespace is not a namespace name.
            SchedulerError: the scheduler is closed.
        """
        self._check_open()
        if self.api is not None:
            if context and context != self._context:
                raise InvalidRunConfigException(
                    f"this scheduler talks to context {self._context!r}; make"
                    f" another scheduler for context {context!r}",
                    "context",
                    {"context": context},
                )
            return self.api
        async with self._lock:
            if self.api is None:
                self.api = await self._make(context)
            return self.api

    async def _make(self, context: str | None) -> KubeApi:
        given = self.settings
        self._context = context or self._context
        client, owns, creds = given.client, False, None
        namespace = "default"  # of an injected client: not known
        if client is None:
            conn = await connect(
                kubeconfig=given.kubeconfig,
                context=self._context,
                clock=given.wall_clock,
            )
            client, creds, owns = conn.client, conn.credentials, True
            namespace = conn.namespace
            if self._namespace is None and not is_dns_label(namespace):
                await client.close()
                raise SchedulerUnavailableError(
                    BACKEND,
                    "the default namespace (of the kubeconfig context,"
                    f" or of the pod's service account) {namespace!r} is"
                    " not a valid namespace name",
                    "fix it there, or pass namespace=... to the scheduler",
                )
        if self._namespace is None:
            self._namespace = namespace
        return KubeApi(client, given, owns_client=owns, credentials=creds)

    async def aclose(self) -> None:
        """Close the connection (an injected client stays open)."""
        api, self.api = self.api, None
        if api is not None:
            await api.aclose()
