"""``has_docker()``: can this process use the Docker backend? (no aiodocker import)

TorchX's ``has_docker`` answers True when the Docker client library imports
and a daemon answers. Here: aiodocker is installed and the daemon's socket
(``$DOCKER_HOST``, else ``/var/run/docker.sock``) accepts a connection. It
is synchronous like TorchX's and cheap enough to call from async code: a
Unix-socket connect answers at once (accepted, refused or absent), and a TCP
daemon gets at most :data:`TCP_CONNECT_TIMEOUT` seconds.

Example:
    >>> isinstance(has_docker(), bool)
    True
"""

from __future__ import annotations

import importlib.util
import os
import socket
from collections.abc import Mapping
from urllib.parse import urlsplit

from asyncsched.schedulers.shared.docker_daemon import DEFAULT_HOST

__all__ = ["TCP_CONNECT_TIMEOUT", "has_docker"]

TCP_CONNECT_TIMEOUT = 0.25
"""Seconds ``has_docker`` waits for a TCP daemon to accept a connection."""


def has_docker(environ: Mapping[str, str] | None = None) -> bool:
    """True if aiodocker is installed and the Docker daemon accepts connections."""
    if importlib.util.find_spec("aiodocker") is None:
        return False
    env = os.environ if environ is None else environ
    return _daemon_listening(env.get("DOCKER_HOST") or DEFAULT_HOST)


def _daemon_listening(host: str) -> bool:
    url = urlsplit(host)
    try:
        if url.scheme in ("unix", "") and hasattr(socket, "AF_UNIX"):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(TCP_CONNECT_TIMEOUT)
                sock.connect(url.path or host)
            return True
        if url.scheme in ("tcp", "http", "https") and url.hostname:
            port = url.port or (2376 if url.scheme == "https" else 2375)
            address = (url.hostname, port)
            with socket.create_connection(address, timeout=TCP_CONNECT_TIMEOUT):
                return True
    except (OSError, ValueError):
        return False
    return False  # ssh://, npipe:// and the like: not usable by this backend
