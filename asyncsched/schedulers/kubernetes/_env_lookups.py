"""Look up the proxy environment and ``~/.netrc`` once per connection.

``kubernetes_asyncio`` opens its aiohttp session with ``trust_env=True``, so
before *every* request aiohttp asks two worker threads whether the
environment names a proxy for the URL (``HTTP(S)_PROXY``/``NO_PROXY``) and
whether ``~/.netrc`` holds a password for the host (a file read each time).
At a few hundred creates per second those are a few hundred thread hops per
second, each taking the GIL from the event loop.

:func:`skip_unneeded_env_lookups` asks both questions once, in a worker
thread, when the scheduler connects. When neither finds anything for the
API server -- the usual case -- the session stops asking (the answers would
have been "nothing" every time). When either finds something, nothing
changes: the proxy or the ``.netrc`` password is used exactly as before. The
environment is read when the scheduler connects; a proxy variable set later
applies to schedulers created after it.

Example:
    >>> async def main(api_client: Any) -> None:
    ...     await skip_unneeded_env_lookups(api_client)
"""

from __future__ import annotations

import importlib
from typing import Any

import anyio

__all__ = ("env_names_server", "same_env_lookups", "skip_unneeded_env_lookups")


def env_names_server(url: str) -> bool:
    """Whether the environment's proxy settings or ``~/.netrc`` apply to ``url``.

    Blocking (reads ``~/.netrc``): call it in a worker thread.
    """
    helpers = importlib.import_module("aiohttp.helpers")
    parsed = importlib.import_module("yarl").URL(url)
    try:
        helpers.get_env_proxy_for_url(parsed)
        return True
    except LookupError:
        pass
    netrc = helpers.netrc_from_env()
    if netrc is None or parsed.host is None:
        return False
    try:
        helpers.basicauth_from_netrc(netrc, parsed.host)
    except LookupError:
        return False
    return True


async def skip_unneeded_env_lookups(api_client: Any) -> bool:
    """Stop ``api_client``'s per-request environment lookups if they find nothing.

    Returns whether they were stopped. A client with an explicit proxy
    (``configuration.proxy``) is left alone: aiohttp does not consult the
    environment for it anyway.
    """
    session = getattr(api_client.rest_client, "pool_manager", None)
    if session is None or not getattr(session, "_trust_env", False):
        return False
    if api_client.configuration.proxy:
        return False
    url = api_client.configuration.host
    if await anyio.to_thread.run_sync(env_names_server, url):
        return False
    session._trust_env = False
    return True


def same_env_lookups(client: Any, like: Any) -> None:
    """Make ``client`` skip the lookups when ``like`` (same configuration) does."""
    if not getattr(like.rest_client.pool_manager, "_trust_env", True):
        client.rest_client.pool_manager._trust_env = False
