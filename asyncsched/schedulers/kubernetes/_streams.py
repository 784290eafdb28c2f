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

import anyio

from asyncsched.schedulers.kubernetes._client import import_client_off_loop

__all__ = ["STREAM_POOL_SIZE", "stream_client"]

#: connections the stream pool may open at once (0: no limit)
STREAM_POOL_SIZE = 0
#: seconds closing the unused first pool may take
_CLOSE_TIMEOUT = 5.0


async def stream_client(api_client: Any) -> Any:
    """A new ``ApiClient`` sharing ``api_client``'s configuration, own pool.

    The caller closes it.
    """
    k8s = await import_client_off_loop()
    configuration = api_client.configuration
    client = k8s.client.ApiClient(configuration=configuration)
    # its pool was sized from configuration.connection_pool_maxsize: swap in
    # one without the limit (the first never opened a connection)
    unused = client.rest_client
    client.rest_client = k8s.client.rest.RESTClientObject(
        configuration, maxsize=STREAM_POOL_SIZE
    )
    # a cancelled caller leaks no session (closing an unused one is instant)
    with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_TIMEOUT):
        await unused.close()
    client.default_headers.update(getattr(api_client, "default_headers", {}) or {})
    return client
