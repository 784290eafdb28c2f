"""The Docker backend's daemon calls: the shared bridge network, image pulls, streams.

The daemon address and registry credentials live in
:mod:`asyncsched.schedulers.shared.docker_daemon`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any

import aiodocker
import aiohttp
import anyio
import anyio.lowlevel
from aiodocker.exceptions import DockerError

from asyncsched.errors import SubmitError
from asyncsched.schedulers.shared.docker_daemon import registry_auth, with_registry
from asyncsched.schedulers.shared.docker_errors import (
    docker_errors,
    is_conflict,
    is_not_found,
)
from asyncsched.schedulers.shared.labels import LABEL_PREFIX

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_READ_TIMEOUT",
    "client_timeout",
    "ensure_image",
    "ensure_network",
    "open_events",
    "open_logs",
    "update_restart_policy",
]

logger = logging.getLogger(__name__)

#: seconds to establish a connection to the daemon
DEFAULT_CONNECT_TIMEOUT = 10.0
#: seconds the daemon may stay silent in a reply (streams excepted: events and
#: followed logs may idle; only their response headers are bounded by it; image
#: pulls, builds and pushes are aiodocker long-running calls, not bounded by it)
DEFAULT_READ_TIMEOUT = 60.0


def client_timeout(connect: float, read: float) -> aiohttp.ClientTimeout:
    """The timeouts of a scheduler's aiodocker client (no total: pulls may be long)."""
    return aiohttp.ClientTimeout(total=None, sock_connect=connect, sock_read=read)


@asynccontextmanager
async def _open_stream(
    docker: aiodocker.Docker, path: str, params: dict[str, Any]
) -> AsyncIterator[aiohttp.ClientResponse]:
    """``GET path`` as a stream that may idle: no read timeout once it flows.

    The connection keeps the client's connect timeout, and the response
    headers must arrive within its read timeout (a hung daemon raises
    ``TimeoutError`` instead of hanging).
    """
    base = docker.session.timeout
    timeout = aiohttp.ClientTimeout(
        connect=base.connect, sock_connect=base.sock_connect
    )
    async with AsyncExitStack() as stack:
        with anyio.fail_after(base.sock_read):
            response = await stack.enter_async_context(
                docker._query(path, params=params, timeout=timeout)
            )
        yield response


#: one lock per (daemon, network name) in each event loop: the submits of one
#: process create a network one at a time
_NETWORK_LOCKS: anyio.lowlevel.RunVar[dict[tuple[str, str], anyio.Lock]] = (
    anyio.lowlevel.RunVar("asyncsched_docker_network_locks")
)


async def ensure_network(docker: aiodocker.Docker, name: str, host: str) -> str:
    """Return the id of the bridge network ``name``, creating it if needed.

    The submits of one event loop create it one at a time (a daemon may
    accept two creations of one name at once, and one caller's list may not
    show a creation still in flight whose network is the older). Across
    processes, without a lock file: creation conflicts are treated as
    success, and where concurrent creators still left several networks with
    the same name, each picks the oldest (then lowest id) it sees.
    """
    try:
        locks = _NETWORK_LOCKS.get()
    except LookupError:
        locks = {}
        _NETWORK_LOCKS.set(locks)
    lock = locks.setdefault((host, name), anyio.Lock())
    async with lock:
        return await _ensure_network(docker, name, host)


async def _ensure_network(docker: aiodocker.Docker, name: str, host: str) -> str:
    with docker_errors(f"set up the Docker network {name!r}", host, submit=True):
        found = await _networks_named(docker, name)
        mine: str | None = None
        if not found:
            try:
                created = await docker.networks.create(
                    {
                        "Name": name,
                        "Driver": "bridge",
                        "CheckDuplicate": True,
                        "Labels": {LABEL_PREFIX + "managed": "true"},
                    }
                )
                mine = created.id
            except DockerError as exc:
                if not (is_conflict(exc) or "already exists" in exc.message):
                    raise
            found = await _networks_named(docker, name)
        if not found:
            raise SubmitError(
                f"the Docker network {name!r} vanished while being created"
            )
        found.sort(key=lambda n: (_created_order(n), str(n["Id"])))
        winner = str(found[0]["Id"])
        if mine is not None and mine != winner:
            # a concurrent creator won; ours was never used by anyone
            with contextlib.suppress(DockerError):
                await (await docker.networks.get(mine)).delete()
        return winner


def _created_order(network: dict[str, Any]) -> str:
    """``Created`` made comparable as text: Docker's RFC 3339 times drop the
    fraction's trailing zeros (``...:01.5Z`` is later than ``...:01.123Z``),
    so the fraction is padded to nanoseconds first.

    Example:
        >>> a = _created_order({"Created": "2026-11-27T14:20:01.5Z"})
        >>> b = _created_order({"Created": "2026-11-27T14:20:01.123Z"})
        >>> b < a
        True
    """
    created = str(network.get("Created", ""))
    match = re.fullmatch(r"(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(.*)", created)
    if match is None:
        return created
    whole, fraction, zone = match.groups()
    return f"{whole}.{(fraction or '').ljust(9, '0')}{zone}"


async def _networks_named(docker: aiodocker.Docker, name: str) -> list[dict[str, Any]]:
    # the "name" filter matches substrings: keep exact matches only
    nets = await docker.networks.list(filters={"name": name})
    return [n for n in nets if n.get("Name") == name]


async def ensure_image(
    docker: aiodocker.Docker, image: str, policy: str, host: str
) -> None:
    """Make ``image`` present locally according to ``policy``.

    ``if_not_present`` pulls only when the image is missing, ``always`` pulls
    every time, ``never`` only checks. Image ids (``sha256:...``) are never
    pulled.

    Raises:
        SubmitError: the image is missing and may not or cannot be pulled.
    """
    if policy != "always" or image.startswith("sha256:"):
        present = await _image_present(docker, image, host)
        if present:
            return
        if policy == "never" or image.startswith("sha256:"):
            raise SubmitError(
                f"image {image!r} is not present on the Docker host and "
                f"image_pull_policy is {policy!r}; pull or build it first"
                + ("" if policy == "never" else " (image ids are never pulled)")
            )
    auth = await registry_auth(image)
    from_image = with_registry(image) if auth is not None else image
    try:
        with docker_errors(f"pull image {image!r}", host, submit=True):
            await docker.images.pull(from_image, auth=auth)
    except SubmitError as exc:
        raise SubmitError(
            f"image {image!r} could not be pulled (image_pull_policy={policy!r}): "
            f"{exc.__cause__ or exc}"
        ) from exc.__cause__


async def _image_present(docker: aiodocker.Docker, image: str, host: str) -> bool:
    try:
        with docker_errors(f"inspect image {image!r}", host, submit=True):
            await docker.images.inspect(image)
    except SubmitError as exc:
        if is_not_found(exc.__cause__ or exc):
            return False
        raise
    return True


# aiodocker has no public call for these endpoints (its events API runs a task
# of its own and cannot be filtered per request; its log API cannot demultiplex
# with timestamps per stream). The private ``_query``/``_query_json`` are kept in
# this one place, aiodocker is pinned exactly in pyproject.toml, and
# tests/docker/test_aiodocker_private_calls.py runs each of them against a real
# engine.


async def update_restart_policy(
    docker: aiodocker.Docker, container_id: str, policy: dict[str, Any]
) -> None:
    """``POST /containers/{id}/update`` with a new ``RestartPolicy``."""
    await docker._query_json(
        f"containers/{container_id}/update",
        method="POST",
        data={"RestartPolicy": policy},
    )


def open_events(
    docker: aiodocker.Docker,
    filters: dict[str, list[str]],
    *,
    since: str | None = None,
    until: str | None = None,
) -> AbstractAsyncContextManager[aiohttp.ClientResponse]:
    """``GET /events`` as a streaming response (see :func:`_open_stream`).

    ``since``/``until`` (``seconds.nanoseconds``) replay the daemon's buffered
    events from that time; with ``until`` in the past the daemon ends the
    response after the replay.
    """
    params = {"filters": json.dumps(filters)}
    if since is not None:
        params["since"] = since
    if until is not None:
        params["until"] = until
    return _open_stream(docker, "events", params)


def open_logs(
    docker: aiodocker.Docker, container_id: str, params: dict[str, Any]
) -> AbstractAsyncContextManager[aiohttp.ClientResponse]:
    """``GET /containers/{id}/logs`` as a streaming (multiplexed) response."""
    return _open_stream(docker, f"containers/{container_id}/logs", params)
