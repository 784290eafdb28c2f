"""Credentials that expire: refreshed before they do, and again on a 401.

The kubeconfig loader of ``kubernetes_asyncio`` is kept after loading, so an
exec plugin (EKS tokens last 15 minutes), an OIDC or a GCP token is renewed:

* before every request, ``kubernetes_asyncio`` awaits the configuration's
  ``refresh_api_key_hook``; :meth:`Credentials.hook` refreshes when the
  current token is close to its ``expirationTimestamp`` (exec plugins), or
  every :data:`PROVIDER_CHECK` seconds for auth providers (the loader checks
  their expiry itself);
* :meth:`Credentials.refresh` with ``force=True`` runs the plugin again (or
  re-reads the token file) whatever the expiry says: :class:`KubeApi` calls it
  once when the server answers 401, then retries the request.

In-cluster service-account tokens are re-read from their file by the loader
``kubernetes_asyncio`` installs (every minute); a 401 re-reads it at once.

Example:
    >>> async def main(configuration: Any, loader: Any) -> None:
    ...     creds = Credentials(configuration, loader)
    ...     creds.install()
    ...     await creds.refresh(force=True)
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable
from typing import Any

import anyio

__all__ = ["PROVIDER_CHECK", "Credentials"]

logger = logging.getLogger(__name__)

#: seconds between expiry checks of auth-provider (OIDC, GCP) tokens
PROVIDER_CHECK = 60.0
#: refresh an expiring token this long before it expires, at most
_MAX_MARGIN = 60.0


class Credentials:
    """Keeps one configuration's bearer token fresh through its loader.

    Args:
        configuration: The ``kubernetes_asyncio`` ``Configuration`` in use.
        loader: The ``KubeConfigLoader`` that filled it, or an in-cluster
            loader (``None``: nothing can be refreshed).
        clock: Wall-clock seconds since the epoch, what token expiries are
            compared with (default :func:`time.time`).
    """

    def __init__(
        self,
        configuration: Any,
        loader: Any,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.configuration = configuration
        self.loader = loader
        self.clock = clock
        self.refreshes = 0
        self._lock = anyio.Lock()
        self._next = self._schedule()

    def install(self) -> None:
        """Make ``kubernetes_asyncio`` await :meth:`hook` before each request."""
        if self.loader is not None and not _in_cluster(self.loader):
            self.configuration.refresh_api_key_hook = self.hook

    async def hook(self, configuration: Any) -> None:
        """Refresh when the token is about to expire (the library awaits this)."""
        if self.clock() >= self._next:
            await self.refresh()

    async def refresh(self, *, force: bool = False) -> bool:
        """Fetch a new token; ``force`` ignores the recorded expiry.

        Returns False when there is nothing to refresh (a static token).
        """
        loader = self.loader
        if loader is None:
            return False
        seen = self.refreshes
        async with self._lock:
            if self.refreshes != seen:
                return True  # another task refreshed while this one waited
            if _in_cluster(loader):
                loader.token_expires_at = datetime.datetime.min
                await anyio.to_thread.run_sync(loader.load_and_set, self.configuration)
            elif force or self.clock() >= self._next:
                if force and hasattr(loader, "exec_plugin_expiry"):
                    del loader.exec_plugin_expiry
                await loader.load_and_set(self.configuration)
            self.refreshes += 1
            self._next = self._schedule()
            logger.debug("Kubernetes credentials refreshed (forced: %s)", force)
            return True

    def _schedule(self) -> float:
        """When the next refresh is due (epoch seconds)."""
        loader = self.loader
        if loader is None or _in_cluster(loader):
            return float("inf")
        expiry = getattr(loader, "exec_plugin_expiry", None)
        now = self.clock()
        if isinstance(expiry, datetime.datetime):
            if expiry.tzinfo is None:
                expiry = expiry.replace(tzinfo=datetime.UTC)
            left = expiry.timestamp() - now
            return now + left - min(_MAX_MARGIN, max(left, 0.0) / 5)
        if getattr(loader, "provider", None):
            return now + PROVIDER_CHECK
        return float("inf")


def _in_cluster(loader: Any) -> bool:
    return hasattr(loader, "token_expires_at")
