"""A connection pool of their own for long streams (watches, followed logs).

A watch or a followed log holds its HTTP connection for minutes. Sharing
the pool of ordinary requests (``connection_pool_maxsize``, 100 by default
in ``kubernetes_asyncio``) would let enough followers take every connection
and leave ``describe``, ``submit`` and ``cancel`` waiting for one. Streams
therefore go through a second ``ApiClient`` built on the *same*
``Configuration`` (same server, TLS, token and token refresh) whose pool has
no limit: each stream needs a connection of its own anyway, and a limit would
only make the next follower (or a watch reconnecting) wait for another to end.

Example:
    >>> async def main(api_client: Any) -> None:
    ...     streams = await stream_client(api_client)
    ...     try:
    ...         ...  # streams.call_api(..., _preload_content=False)
    ...     finally:
    ...         await streams.close()
"""

from __future__ import annotations

from typing import Any

from asyncsched.schedulers.kubernetes._env_lookups import same_env_lookups
from asyncsched.schedulers.kubernetes._gate import import_client_off_loop

__all__ = ("STREAM_POOL_SIZE", "stream_client")

#: connections the stream pool may open at once (0: no limit)
STREAM_POOL_SIZE = 0


async def stream_client(api_client: Any) -> Any:
    """A new ``ApiClient`` sharing ``api_client``'s configuration, own pool.

    The caller closes it.
    """
    k8s = await import_client_off_loop()
    configuration = api_client.configuration
    # the pool is sized from configuration.connection_pool_maxsize when the
    # client is built: build it with the stream pool's size instead (one TLS
    # context, not a second one thrown away), then put the setting back.
    # Nothing awaits in between, so no other task sees the changed value.
    shared_size = configuration.connection_pool_maxsize
    configuration.connection_pool_maxsize = STREAM_POOL_SIZE
    try:
        client = k8s.client.ApiClient(configuration=configuration)
    finally:
        configuration.connection_pool_maxsize = shared_size
    # the shared client's environment lookups were settled when it connected
    same_env_lookups(client, like=api_client)
    client.default_headers.update(getattr(api_client, "default_headers", {}) or {})
    return client
