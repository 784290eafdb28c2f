"""Real image registries for the workspace push tests (Debian's ``docker-registry``).

:func:`start_registry` runs the distribution registry 2.8 on 127.0.0.1 on a
free port, with its own config and storage under ``root`` (no systemd), and
optionally htpasswd auth; :meth:`Registry.stop` ends that process by its PID.
:class:`CuttingProxy` sits in front of a registry and goes down when the
engine starts writing a manifest: a registry lost in the middle of a push.
"""

from __future__ import annotations

import base64
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import anyio
from anyio.abc import SocketStream, TaskGroup

USER = "pusher"
PASSWORD = "s3cret-for-tests"


@dataclass
class Registry:
    """A running registry: ``address`` is ``127.0.0.1:<port>``."""

    address: str
    root: Path
    proc: subprocess.Popen[bytes]
    auth: tuple[str, str] | None = None

    def stop(self) -> None:
        """Terminate the registry process (by PID) and wait for it."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def log(self) -> str:
        """The registry's own log (for assertion messages)."""
        return (self.root / "registry.log").read_text(errors="replace")[-3000:]

    async def get(self, path: str) -> Any:
        """GET ``/v2/<path>`` as JSON (with the basic-auth user when it has auth)."""
        headers = {}
        if self.auth:
            token = base64.b64encode(":".join(self.auth).encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://{self.address}/v2/{path}", headers=headers) as resp,
        ):
            resp.raise_for_status()
            return await resp.json()

    async def catalog(self) -> list[str]:
        """Repositories the registry holds (``/v2/_catalog``)."""
        data = await self.get("_catalog")
        return list(data.get("repositories") or [])

    async def tags(self, repo: str) -> list[str]:
        """Tags of ``repo`` (``/v2/<repo>/tags/list``); [] when it has none."""
        try:
            data = await self.get(f"{repo}/tags/list")
        except aiohttp.ClientResponseError as exc:
            if exc.status == 404:
                return []
            raise
        return list(data.get("tags") or [])


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _config(root: Path, port: int, htpasswd: Path | None) -> str:
    auth = ""
    if htpasswd is not None:
        auth = f"auth:\n  htpasswd:\n    realm: asyncsched-test\n    path: {htpasswd}\n"
    return (
        "version: 0.1\n"
        "log:\n"
        "  level: info\n"
        "storage:\n"
        "  filesystem:\n"
        f"    rootdirectory: {root / 'data'}\n"
        "  delete:\n"
        "    enabled: true\n"
        "http:\n"
        f"  addr: 127.0.0.1:{port}\n"
        "  secret: asyncsched-test-secret\n" + auth
    )


def _answers(address: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://{address}/v2/", timeout=2):
            return True
    except urllib.error.HTTPError as exc:
        return exc.code == 401  # an auth registry answers, refusing us
    except OSError:
        return False


def start_registry(root: Path, *, with_auth: bool = False) -> Registry:
    """Start ``docker-registry serve`` on a free loopback port; wait until it answers.

    Raises:
        RuntimeError: the binary (or htpasswd) is missing or it did not come up.
    """
    binary = shutil.which("docker-registry")
    if binary is None:
        raise RuntimeError(
            "docker-registry is not installed (run tests/docker/provision.sh as root)"
        )
    root.mkdir(parents=True, exist_ok=True)
    htpasswd: Path | None = None
    auth: tuple[str, str] | None = None
    if with_auth:
        tool = shutil.which("htpasswd")
        if tool is None:
            raise RuntimeError(
                "htpasswd is not installed (apache2-utils; run tests/docker/provision.sh)"
            )
        htpasswd = root / "htpasswd"
        out = subprocess.run(
            [tool, "-Bbn", USER, PASSWORD], capture_output=True, check=True, timeout=30
        )
        htpasswd.write_bytes(out.stdout)
        auth = (USER, PASSWORD)
    last = ""
    for _attempt in range(3):  # the free port may be taken before we bind it
        port = free_port()
        config = root / "config.yml"
        config.write_text(_config(root, port, htpasswd))
        log = (root / "registry.log").open("wb")
        proc = subprocess.Popen(
            [binary, "serve", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        registry = Registry(f"127.0.0.1:{port}", root, proc, auth)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            if _answers(registry.address):
                return registry
            time.sleep(0.1)
        last = registry.log()
        registry.stop()
    raise RuntimeError(f"docker-registry did not come up:\n{last}")


def docker_config_auth(address: str, user: str, password: str) -> dict[str, Any]:
    """A ``config.json`` body with basic-auth credentials for ``address``."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"auths": {address: {"auth": token}}}


class CuttingProxy:
    """A TCP proxy to a registry that goes down when a manifest is written.

    Blobs go through; the first ``PUT .../manifests/...`` closes every
    connection and the listener, so the engine's push fails half-way (layers
    uploaded, no tag) and every later connection is refused.
    """

    def __init__(self, target: str) -> None:
        host, _, port = target.rpartition(":")
        self.target = (host, int(port))
        self.address = ""
        self.cut = anyio.Event()
        self._scope = anyio.CancelScope()

    async def serve(self, tg: TaskGroup) -> None:
        """Start listening on a free loopback port, in ``tg``."""
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        self.address = f"127.0.0.1:{port}"

        async def serve() -> None:
            with self._scope:  # cancelled: every connection and the listener close
                async with listener:
                    await listener.serve(self._handle)

        tg.start_soon(serve)

    def _go_down(self) -> None:
        self.cut.set()
        self._scope.cancel()

    async def _handle(self, client: SocketStream) -> None:
        if self.cut.is_set():
            await client.aclose()
            return
        upstream = await anyio.connect_tcp(*self.target)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._pipe, client, upstream, tg, True)
                tg.start_soon(self._pipe, upstream, client, tg, False)
        finally:
            with anyio.CancelScope(shield=True):
                await client.aclose()
                await upstream.aclose()

    async def _pipe(
        self, src: SocketStream, dst: SocketStream, tg: TaskGroup, watch: bool
    ) -> None:
        try:
            async for chunk in src:
                if watch and b"PUT /v2/" in chunk and b"/manifests/" in chunk:
                    self._go_down()
                    return
                await dst.send(chunk)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass
        tg.cancel_scope.cancel()
