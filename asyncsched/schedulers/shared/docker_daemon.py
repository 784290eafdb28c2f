"""Where the Docker daemon listens and which registry credentials it is given.

Used by the Docker backend (containers, image pulls) and by every backend that
builds or pushes workspace images with the local engine (Kubernetes), with the
run options such a workspace build reads (:func:`image_workspace_opts`).
Imports no Docker client.

Example:
    >>> resolve_host("tcp://10.0.0.2:2375", environ={})
    'tcp://10.0.0.2:2375'
    >>> resolve_host(None, environ={"DOCKER_HOST": "unix:///run/user/1000/docker.sock"})
    'unix:///run/user/1000/docker.sock'
    >>> with_registry("ubuntu")
    'docker.io/library/ubuntu'
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Mapping
from pathlib import Path

import anyio

from asyncsched.specs import runopts

__all__ = [
    "DEFAULT_HOST",
    "image_workspace_opts",
    "registry_auth",
    "registry_of",
    "resolve_host",
    "with_registry",
]

DEFAULT_HOST = "unix:///var/run/docker.sock"
_HUB_KEYS = ("https://index.docker.io/v1/", "index.docker.io", "docker.io")


def image_workspace_opts(image_repo_help: str) -> runopts:
    """``image_repo`` (where built images are pushed) and ``quiet`` (no build output).

    ``image_repo_help`` says what the backend pushes there.
    """
    opts = runopts()
    opts.add("image_repo", type_=str, help=image_repo_help)
    opts.add(
        "quiet",
        type_=bool,
        default=False,
        help="suppress the workspace image build output",
    )
    return opts


def resolve_host(explicit: str | None, environ: Mapping[str, str] | None = None) -> str:
    """The daemon URL: ``explicit``, else ``$DOCKER_HOST``, else the default socket."""
    env = os.environ if environ is None else environ
    return explicit or env.get("DOCKER_HOST") or DEFAULT_HOST


def registry_of(image: str) -> str:
    """The registry host of ``image`` (``docker.io`` for Docker Hub names).

    Example:
        >>> registry_of("127.0.0.1:5000/team/app:v1"), registry_of("team/app")
        ('127.0.0.1:5000', 'docker.io')
    """
    first, sep, _ = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def with_registry(image: str) -> str:
    """``image`` with its registry spelled out (Docker Hub images gain ``docker.io/``)."""
    if registry_of(image) != "docker.io" or image.startswith("docker.io/"):
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
    registry = registry_of(image)
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
