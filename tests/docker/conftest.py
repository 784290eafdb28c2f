"""Fixtures for the Docker backend tests: a real engine, never a mock.

* ``docker_engine`` finds a daemon (``$DOCKER_HOST`` or the standard socket);
  if none answers and we are root, it starts a private ``dockerd`` (own
  socket, data-root and exec-root under a temp dir) and stops it at the end.
  Without an engine the tests skip -- or fail when ``CI`` is set or
  ``ASYNCSCHED_REQUIRE_DOCKER=1``.
* ``test_image`` imports a busybox rootfs (Debian's static ``/bin/busybox``
  plus applet symlinks) as ``asyncsched-test-busybox:latest``; no registry.
* ``registry`` / ``auth_registry`` run Debian's ``docker-registry`` on
  127.0.0.1 (a free port, private storage; the second one with htpasswd
  auth) and stop it at the end.
* Everything the tests create carries the session label ``SESSION`` or the
  ``asyncsched-test-`` prefix; the session teardown removes it and asserts
  nothing is left behind.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiodocker
import anyio
import pytest
from aiodocker.containers import DockerContainer

from asyncsched.schedulers.docker_scheduler import DockerScheduler

from .daemon import answers, start_dockerd, stop_dockerd
from .registry import Registry, start_registry

HERE = Path(__file__).parent
TEST_IMAGE = "asyncsched-test-busybox:latest"
SESSION = f"pytest-{os.getpid()}"
NETWORK = f"asyncsched-test-{os.getpid()}"
SESSION_LABEL = f"asyncsched.io/session={SESSION}"
APPLETS = [
    "sh",
    "cat",
    "dd",
    "echo",
    "env",
    "false",
    "hostname",
    "id",
    "kill",
    "ls",
    "mkdir",
    "nslookup",
    "ping",
    "printf",
    "rm",
    "sleep",
    "test",
    "true",
    "wc",
]


@dataclass
class Engine:
    """A Docker daemon the tests may use."""

    host: str
    started: bool
    #: the private daemon's directory and process (``started`` only)
    root: Path | None = None
    proc: subprocess.Popen[bytes] | None = None

    def restart(self) -> None:
        """Stop the private daemon and start it again on the same data (its
        containers stop; its event buffer is lost)."""
        assert self.root is not None, "not our daemon"
        assert self.proc is not None, "not our daemon"
        stop_dockerd(self.proc)
        self.proc, host = start_dockerd(self.root)
        assert host == self.host


def _required() -> bool:
    return (
        bool(os.environ.get("CI")) or os.environ.get("ASYNCSCHED_REQUIRE_DOCKER") == "1"
    )


def _unavailable(reason: str) -> None:
    if _required():
        pytest.fail(
            f"Docker engine required (CI / ASYNCSCHED_REQUIRE_DOCKER): {reason}"
        )
    pytest.skip(f"no Docker engine: {reason}")


def _is_root_debian() -> bool:
    return os.geteuid() == 0 and Path("/etc/debian_version").exists()


def docker_cli(host: str, *args: str, check: bool = True, timeout: float = 60) -> str:
    """Run the docker CLI against ``host``; return stdout."""
    result = subprocess.run(
        ["docker", "-H", host, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and result.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[Engine]:
    """A daemon that answers; started privately when none does (and we are root)."""
    if shutil.which("docker") is None or shutil.which("dockerd") is None:
        if _is_root_debian():
            subprocess.run(["bash", str(HERE / "provision.sh")], check=False)
        if shutil.which("docker") is None:
            _unavailable(
                "the docker CLI is not installed (run tests/docker/provision.sh as root)"
            )
    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    if answers(host):
        yield Engine(host, started=False)
        return
    if os.geteuid() != 0 or shutil.which("dockerd") is None:
        _unavailable(f"no daemon answers at {host} and we cannot start dockerd here")
    root = Path(tempfile.mkdtemp(prefix="asyncsched-dockerd-"))
    try:
        proc, host = start_dockerd(root)
    except RuntimeError as exc:
        shutil.rmtree(root, ignore_errors=True)
        _unavailable(str(exc))
        raise
    old = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = host
    engine = Engine(host, started=True, root=root, proc=proc)
    try:
        yield engine
    finally:
        if old is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = old
        stop_dockerd(engine.proc or proc, host)
        shutil.rmtree(root, ignore_errors=True)


def _static_busybox() -> Path:
    path = Path("/bin/busybox")
    if not path.exists():
        _unavailable("/bin/busybox is missing (apt-get install busybox-static)")
    ldd = subprocess.run(
        ["ldd", str(path)], capture_output=True, text=True, check=False
    )
    if "not a dynamic executable" not in (ldd.stdout + ldd.stderr):
        _unavailable("/bin/busybox is not statically linked (install busybox-static)")
    return path


@pytest.fixture(scope="session")
def test_image(
    docker_engine: Engine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """``asyncsched-test-busybox:latest``, imported from a busybox rootfs."""
    busybox = _static_busybox()
    root = tmp_path_factory.mktemp("rootfs")
    (root / "bin").mkdir()
    for d in ("tmp", "etc", "work", "proc", "sys", "dev"):
        (root / d).mkdir()
    shutil.copy2(busybox, root / "bin" / "busybox")
    for applet in APPLETS:
        (root / "bin" / applet).symlink_to("busybox")
    tar_path = root.parent / "rootfs.tar"
    with tarfile.open(tar_path, "w") as tar:
        for child in sorted(root.iterdir()):
            tar.add(child, arcname=child.name)
    docker_cli(
        docker_engine.host,
        "import",
        "--change",
        "WORKDIR /work",
        "--change",
        "ENV PATH=/bin",
        str(tar_path),
        TEST_IMAGE,
    )
    yield TEST_IMAGE
    docker_cli(docker_engine.host, "rmi", "-f", TEST_IMAGE, check=False)
    assert TEST_IMAGE not in docker_cli(
        docker_engine.host, "images", "--format", "{{.Repository}}:{{.Tag}}"
    )


@pytest.fixture(scope="session")
def docker_ready(docker_engine: Engine, test_image: str) -> Iterator[Engine]:
    """Engine + image; at the end remove and assert nothing of ours is left."""
    yield docker_engine
    host = docker_engine.host
    leftovers = docker_cli(
        host, "ps", "-aq", "--filter", f"label={SESSION_LABEL}"
    ).split()
    if leftovers:
        docker_cli(host, "rm", "-f", *leftovers, check=False)
    docker_cli(host, "network", "rm", NETWORK, check=False)
    nets = docker_cli(host, "network", "ls", "--format", "{{.Name}}").split()
    images = docker_cli(
        host, "images", "-q", "--filter", f"label={SESSION_LABEL}"
    ).split()
    if images:
        docker_cli(host, "rmi", "-f", *images, check=False)
    assert leftovers == [], f"tests left containers behind: {leftovers}"
    assert NETWORK not in nets  # (other test sessions may share the engine)
    assert images == [], f"tests left images behind: {images}"


async def sweep(host: str) -> None:
    """Remove every container and image labelled with this test session
    (the containers a few at a time: after a 50-app test one by one adds
    seconds)."""
    slots = anyio.CapacityLimiter(8)

    async def remove(c: DockerContainer) -> None:
        async with slots:
            try:
                await c.delete(force=True, v=True)
            except aiodocker.DockerError as exc:
                if exc.status not in (404, 409):
                    raise

    async with aiodocker.Docker(url=host) as docker:
        async with anyio.create_task_group() as tg:
            for c in await docker.containers.list(
                all=True, filters=f'{{"label": ["{SESSION_LABEL}"]}}'
            ):
                tg.start_soon(remove, c)
        for image in await docker.images.list(filters={"label": [SESSION_LABEL]}):
            try:
                await docker.images.delete(image["Id"], force=True)
            except aiodocker.DockerError as exc:
                if exc.status != 404:
                    raise


@pytest.fixture
async def sched(docker_ready: Engine) -> AsyncIterator[DockerScheduler]:
    """An open scheduler on the test network; the session's apps are removed after."""
    scheduler = DockerScheduler(SESSION, network=NETWORK, stop_timeout=1)
    try:
        yield scheduler
    finally:
        await scheduler.aclose()
        await sweep(docker_ready.host)


@pytest.fixture
async def raw_docker(docker_ready: Engine) -> AsyncIterator[aiodocker.Docker]:
    """A plain aiodocker client for assertions."""
    async with aiodocker.Docker(url=docker_ready.host) as docker:
        yield docker


@pytest.fixture
async def swept(docker_ready: Engine) -> AsyncIterator[Engine]:
    """The engine; the session's containers and images are removed after the test."""
    try:
        yield docker_ready
    finally:
        await sweep(docker_ready.host)


def _start_registry(
    tmp_path_factory: pytest.TempPathFactory, *, with_auth: bool
) -> Iterator[Registry]:
    missing = (
        shutil.which("docker-registry") is None or shutil.which("htpasswd") is None
    )
    if missing and _is_root_debian():
        subprocess.run(["bash", str(HERE / "provision.sh")], check=False)
    root = tmp_path_factory.mktemp("registry-auth" if with_auth else "registry")
    try:
        registry = start_registry(root, with_auth=with_auth)
    except RuntimeError as exc:
        _unavailable(str(exc))
        raise
    try:
        yield registry
    finally:
        registry.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    """A real image registry (plain HTTP, no auth) on 127.0.0.1, private storage."""
    yield from _start_registry(tmp_path_factory, with_auth=False)


@pytest.fixture(scope="session")
def auth_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    """A second real registry that wants htpasswd credentials (``registry.USER``)."""
    yield from _start_registry(tmp_path_factory, with_auth=True)
