"""A private ``dockerd`` for the tests and the Docker benchmark.

Example:
    >>> proc, host = start_dockerd(Path("/tmp/my-dockerd"))  # doctest: +SKIP
    >>> stop_dockerd(proc)  # doctest: +SKIP
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

__all__ = ["answers", "release_networks", "start_dockerd", "stop_dockerd"]


def answers(host: str) -> bool:
    """Whether a Docker engine answers at ``host`` (``unix://...``)."""
    try:
        subprocess.run(
            ["docker", "-H", host, "version", "--format", "{{.Server.Version}}"],
            capture_output=True,
            timeout=10,
            check=True,
        )
    except (subprocess.SubprocessError, OSError):
        return False
    return True


def start_dockerd(
    root: Path, deadline_s: float = 30
) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``dockerd`` with everything (socket, data, exec root) under
    ``root``; return it and its host once it answers.

    Raises:
        RuntimeError: it did not answer within ``deadline_s`` (with its log).
    """
    sock = root / "docker.sock"
    with (root / "dockerd.log").open("wb") as log:
        proc = subprocess.Popen(
            [
                "dockerd",
                "--host",
                f"unix://{sock}",
                "--data-root",
                str(root / "data"),
                "--exec-root",
                str(root / "exec"),
                "--pidfile",
                str(root / "dockerd.pid"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    host = f"unix://{sock}"
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        if sock.exists() and answers(host):
            return proc, host
        time.sleep(0.2)
    stop_dockerd(proc)
    tail = (root / "dockerd.log").read_text(errors="replace")[-2000:]
    raise RuntimeError(f"dockerd did not come up:\n{tail}")


def release_networks(host: str) -> None:
    """Remove every container and network of the daemon at ``host``.

    A daemon whose data root is thrown away afterwards would otherwise leave
    its networks' bridges (``br-…``) on the host, and after a few dozen
    sessions their addresses fill Docker's default address pools.
    """
    docker = ["docker", "-H", host]
    try:
        ids = subprocess.run(
            [*docker, "ps", "-aq"],
            check=False,
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.split()
        if ids:
            subprocess.run(
                [*docker, "rm", "-f", *ids],
                check=False,
                capture_output=True,
                timeout=60,
            )
        subprocess.run(
            [*docker, "network", "prune", "-f"],
            check=False,
            capture_output=True,
            timeout=60,
        )
    except (subprocess.SubprocessError, OSError):
        return


def stop_dockerd(proc: subprocess.Popen[bytes], host: str | None = None) -> None:
    """SIGTERM, then SIGKILL after 30 s; with ``host``, first remove the
    daemon's containers and networks (see :func:`release_networks`)."""
    if host is not None and proc.poll() is None:
        release_networks(host)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
