"""Workspaces a user did not mean to hand over: special files, escaping targets, links.

No daemon needed: these check the build context itself, and that a bad
workspace is refused before any Docker call.
"""

from __future__ import annotations

import io
import logging
import os
import socket
import stat
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from asyncsched.errors import SchedulerError, SpecError
from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.schedulers.shared.images import (
    DOCKERFILE,
    GENERATED_DOCKERFILE,
    build_context,
)
from asyncsched.specs import AppDef, Role, Workspace


def _members(data: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: m for m in tar.getmembers()}


def _read(data: bytes, name: str) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        f = tar.extractfile(name)
        assert f is not None
        return f.read()


@pytest.fixture
def listening_socket(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "ws" / "agent.sock"
    path.parent.mkdir()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    try:
        yield path
    finally:
        sock.close()


def test_a_unix_socket_is_skipped_with_a_warning_naming_it(
    listening_socket: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ws = listening_socket.parent
    (ws / "main.py").write_text("print(1)\n")
    with caplog.at_level(logging.WARNING):
        members = _members(build_context(str(ws)))
    assert set(members) == {DOCKERFILE, "main.py"}
    assert str(listening_socket) in caplog.text
    assert "socket" in caplog.text


def test_fifos_and_device_nodes_are_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "keep.txt").write_text("x")
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "sub").mkdir()
    os.mkfifo(tmp_path / "sub" / "pipe2")
    has_device = True
    try:
        os.mknod(tmp_path / "null", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except PermissionError:
        has_device = False  # not root (or no CAP_MKNOD): FIFOs still cover the path
    with caplog.at_level(logging.WARNING):
        members = _members(build_context(str(tmp_path)))
    assert set(members) == {DOCKERFILE, "keep.txt"}
    assert str(tmp_path / "pipe") in caplog.text
    assert str(tmp_path / "sub" / "pipe2") in caplog.text
    if has_device:
        assert str(tmp_path / "null") in caplog.text


def test_a_special_dockerfile_does_not_replace_the_generated_one(
    tmp_path: Path,
) -> None:
    os.mkfifo(tmp_path / DOCKERFILE)
    data = build_context(str(tmp_path))
    assert _read(data, DOCKERFILE) == GENERATED_DOCKERFILE.encode()


@pytest.mark.parametrize(
    "target",
    [
        "../../escape",
        "..",
        "a/../../b",
        "a/..",
        "/abs",
        "/",
        "sub/\x00x",
        "sub\nline",
    ],
)
def test_escaping_or_odd_targets_are_spec_errors_naming_the_project(
    tmp_path: Path, target: str
) -> None:
    (tmp_path / "f").write_text("x")
    ws = Workspace(projects={str(tmp_path): target})
    with pytest.raises(SpecError) as info:
        build_context(ws)
    assert info.value.field == f"workspace.projects[{str(tmp_path)!r}]"


def test_harmless_target_spellings_are_normalized(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_text("x")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "g").write_text("y")
    ws = Workspace(
        projects={str(tmp_path / "a"): "./lib//a/", str(tmp_path / "b"): "."}
    )
    assert set(_members(build_context(ws))) == {DOCKERFILE, "lib/a/f", "g"}


def test_symlinks_stay_links_and_are_not_followed_out_of_the_workspace(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("top secret")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "real.txt").write_text("r")
    (ws / "to_secret").symlink_to(outside / "secret")
    (ws / "to_outside_dir").symlink_to(outside, target_is_directory=True)
    (ws / "up").symlink_to("../outside/secret")
    (ws / "local").symlink_to("real.txt")
    data = build_context(str(ws))
    members = _members(data)
    assert set(members) == {
        DOCKERFILE,
        "real.txt",
        "to_secret",
        "to_outside_dir",
        "up",
        "local",
    }
    for name in ("to_secret", "to_outside_dir", "up", "local"):
        assert members[name].issym(), name
        assert members[name].size == 0
    assert members["to_outside_dir"].linkname == str(outside)
    assert members["up"].linkname == "../outside/secret"
    assert b"top secret" not in data


def test_every_entry_name_stays_inside_the_context(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "..x").write_text("dots are fine in names")
    (tmp_path / "a" / "-").write_text("")
    ws = Workspace(projects={str(tmp_path / "a"): "deep/er", str(tmp_path): ""})
    for name in _members(build_context(ws)):
        assert not name.startswith("/"), name
        assert ".." not in name.split("/"), name
        assert os.path.normpath(name) == name, name


@pytest.mark.parametrize("link_first", [True, False])
def test_a_project_cannot_land_behind_another_projects_link(
    tmp_path: Path, link_first: bool
) -> None:
    links = tmp_path / "links"
    links.mkdir()
    (links / "lib").symlink_to("/etc", target_is_directory=True)
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "evil.conf").write_text("x")
    order = [str(links), str(lib)] if link_first else [str(lib), str(links)]
    targets = {str(links): "", str(lib): "lib"}
    ws = Workspace(projects={src: targets[src] for src in order})
    with pytest.raises(SchedulerError, match="symbolic link 'lib'"):
        build_context(ws)


async def test_submit_refuses_an_escaping_target_before_contacting_docker(
    tmp_path: Path,
) -> None:
    # no daemon behind this socket: a SpecError proves nothing was attempted
    role = Role("r", image="busybox", entrypoint="true")
    async with DockerScheduler(
        "hostile", docker_host=f"unix://{tmp_path / 'none.sock'}"
    ) as sched:
        with pytest.raises(SpecError, match=r"workspace\.projects"):
            await sched.submit_dryrun(
                AppDef("a", roles=[role]),
                {},
                workspace=Workspace(projects={str(tmp_path): "../../escape"}),
            )


_BUILD_AS_CHILD = """
import os, sys
from asyncsched.errors import SchedulerError
from asyncsched.schedulers.shared.images import build_context
if len(sys.argv) > 2:  # imported first: the checkout need not be readable by it
    os.setgroups([])
    os.setresgid(int(sys.argv[2]), int(sys.argv[2]), int(sys.argv[2]))
    os.setresuid(int(sys.argv[2]), int(sys.argv[2]), int(sys.argv[2]))
try:
    build_context(sys.argv[1])
except SchedulerError as exc:
    print(exc)
    sys.exit(3)
"""


def test_an_unreadable_file_is_a_scheduler_error_naming_it() -> None:
    with tempfile.TemporaryDirectory(prefix="asyncsched-test-") as tmp:
        ws = Path(tmp)
        ws.chmod(0o755)
        (ws / "ok").write_text("x")
        (ws / "secret").write_text("x")
        (ws / "secret").chmod(0)
        command = [sys.executable, "-c", _BUILD_AS_CHILD, str(ws)]
        if os.geteuid() == 0:  # root reads anything: the child builds as nobody
            command.append("65534")
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=60, check=False
        )
    assert result.returncode == 3, result.stderr
    assert str(ws / "secret") in result.stdout
    assert "Permission denied" in result.stdout
