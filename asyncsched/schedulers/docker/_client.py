"""Daemon address, the shared bridge network, image presence and registry auth.

Example:
    >>> resolve_host("tcp://10.0.0.2:2375", environ={})
    'tcp://10.0.0.2:2375'
    >>> resolve_host(None, environ={"DOCKER_HOST": "unix:///run/user/1000/docker.sock"})
    'unix:///run/user/1000/docker.sock'
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import aiodocker
import aiohttp
import anyio
from aiodocker.exceptions import DockerError

from asyncsched.errors import SubmitError

from ._errors import docker_errors, is_conflict, is_not_found
from ._render import LABEL_PREFIX

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_HOST",
    "DEFAULT_READ_TIMEOUT",
    "client_timeout",
    "ensure_image",
    "ensure_network",
    "open_events",
    "open_logs",
    "registry_auth",
    "resolve_host",
    "update_restart_policy",
]

logger = logging.getLogger(__name__)

DEFAULT_HOST = "unix:///var/run/docker.sock"
#: seconds to establish a connection to the daemon
DEFAULT_CONNECT_TIMEOUT = 10.0
#: seconds the daemon may stay silent in a reply (streams excepted: events and
#: followed logs may idle; only their response headers are bounded by it; image
#: pulls, builds and pushes are aiodocker long-running calls, not bounded by it)
DEFAULT_READ_TIMEOUT = 60.0
_HUB_KEYS = ("https://index.docker.io/v1/", "index.docker.io", "docker.io")


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


def resolve_host(explicit: str | None, environ: Mapping[str, str] | None = None) -> str:
    """The daemon URL: ``explicit``, else ``$DOCKER_HOST``, else the default socket."""
    env = os.environ if environ is None else environ
    return explicit or env.get("DOCKER_HOST") or DEFAULT_HOST


async def ensure_network(docker: aiodocker.Docker, name: str, host: str) -> str:
    """Return the id of the bridge network ``name``, creating it if needed.

    Race-free across processes without a lock file: creation conflicts are
    treated as success, and if concurrent creators still left several networks
    with the same name, every process picks the same one (oldest, then lowest
    id), so an app never straddles two networks.
    """
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
        found.sort(key=lambda n: (str(n.get("Created", "")), str(n["Id"])))
        winner = str(found[0]["Id"])
        if mine is not None and mine != winner:
            # a concurrent creator won; ours was never used by anyone
            with contextlib.suppress(DockerError):
                await (await docker.networks.get(mine)).delete()
        return winner


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
    from_image = _with_registry(image) if auth is not None else image
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


def _registry_of(image: str) -> str:
    first, sep, _ = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def _with_registry(image: str) -> str:
    if _registry_of(image) != "docker.io" or image.startswith("docker.io/"):
        return image
    return "docker.io/" + (image if "/" in image else f"library/{image}")


async def registry_auth(
    image: str, config_path: Path | None = None
) -> dict[str, str] | None:
    """Credentials for ``image``'s registry from the Docker CLI config, or None.

    Reads ``auths`` (base64 ``user:password``), ``credHelpers`` and
    ``credsStore`` (running ``docker-credential-<helper> get``) of
    ``$DOCKER_CONFIG/config.json`` (default ``~/.docker/config.json``).
    """
    if config_path is None:
        config_dir = os.environ.get("DOCKER_CONFIG") or str(Path.home() / ".docker")
        config_path = Path(config_dir) / "config.json"
    try:
        text = await anyio.Path(config_path).read_text()
        config = json.loads(text)
    except (OSError, ValueError):
        return None
    registry = _registry_of(image)
    keys = _HUB_KEYS if registry == "docker.io" else (registry, f"https://{registry}")
    helper = next(
        (
            config.get("credHelpers", {}).get(k)
            for k in keys
            if k in config.get("credHelpers", {})
        ),
        config.get("credsStore"),
    )
    if helper:
        creds = await _from_helper(str(helper), keys[0])
        if creds is not None:
            return creds
    for key in keys:
        entry = config.get("auths", {}).get(key)
        if entry and entry.get("auth"):
            user, _, password = base64.b64decode(entry["auth"]).decode().partition(":")
            return {"username": user, "password": password, "serveraddress": key}
        if entry and entry.get("identitytoken"):
            return {"identitytoken": entry["identitytoken"], "serveraddress": key}
    return None


async def _from_helper(helper: str, server: str) -> dict[str, str] | None:
    try:
        result = await anyio.run_process(
            [f"docker-credential-{helper}", "get"], input=server.encode(), check=False
        )
    except OSError:
        return None
    if result.returncode != 0:
        return None
    try:
        data = json.loads(result.stdout)
    except ValueError:
        return None
    user, secret = data.get("Username", ""), data.get("Secret", "")
    if user == "<token>":
        return {"identitytoken": secret, "serveraddress": server}
    return {"username": user, "password": secret, "serveraddress": server}


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
    docker: aiodocker.Docker, filters: dict[str, list[str]]
) -> AbstractAsyncContextManager[aiohttp.ClientResponse]:
    """``GET /events`` as a streaming response (see :func:`_open_stream`)."""
    return _open_stream(docker, "events", {"filters": json.dumps(filters)})


def open_logs(
    docker: aiodocker.Docker, container_id: str, params: dict[str, Any]
) -> AbstractAsyncContextManager[aiohttp.ClientResponse]:
    """``GET /containers/{id}/logs`` as a streaming (multiplexed) response."""
    return _open_stream(docker, f"containers/{container_id}/logs", params)
