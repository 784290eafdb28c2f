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

__all__ = ["answers", "start_dockerd", "stop_dockerd"]


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


def stop_dockerd(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 30 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
