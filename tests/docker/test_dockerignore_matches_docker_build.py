"""``.dockerignore`` against the real ``docker build``: the same context, the same files.

Each case builds one directory twice with ``COPY . /ctx``: once with the
Docker CLI (its classic builder, whose context walker applies the CLI's
``.dockerignore`` rules) and once with the context asyncsched writes. The
files under ``/ctx`` of both images must be the same set.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import aiodocker
import anyio
import pytest

from asyncsched.schedulers.shared.images import (
    DOCKERFILE,
    build_context,
    build_image,
    open_context,
)

from .conftest import SESSION, SESSION_LABEL, TEST_IMAGE, Engine

pytestmark = pytest.mark.docker

_COPY_ALL = "ARG IMAGE\nFROM $IMAGE\nCOPY . /ctx\n"

# Secrets at several depths, root-anchored lines, exceptions, and lines that
# TorchX's fnmatch rules read differently from Docker.
SECRETS_IGNORE = """\
# a comment
**/.env
/secrets
*.pem
!keep.pem
build/**
logs
!logs/keep.txt
cache
!**/cache-keep
docs/*.md
!docs/README.md
notes.txt # not a comment in Docker
a//b/../c/
other/f
!other
"""
SECRETS_FILES = [
    ".env",
    "app/.env",
    "app/deep/.env",
    "app/main.py",
    "secrets/token",
    "secrets/sub/key",
    "app/secrets/config",
    "root.pem",
    "keep.pem",
    "app/nested.pem",
    "build/out.o",
    "build/sub/x",
    "logs/a.log",
    "logs/keep.txt",
    "cache/cache-keep",
    "docs/a.md",
    "docs/README.md",
    "docs/sub/b.md",
    "a/c/file",
    "a/b/file",
    "notes.txt",
    "main.py",
    "other/f",
    "other/g",
]

# An allow-list that also excludes .dockerignore and the Dockerfile (the daemon
# reads both, then leaves them out of the image), and directories re-included
# under an excluded parent.
ALLOW_LIST_IGNORE = """\
*
!app.py
!src
src/**/*.key
!src/keep/
!sub
"""
ALLOW_LIST_FILES = [
    "app.py",
    "other.py",
    ".env",
    "src/a.py",
    "src/x.key",
    "src/deep/y.key",
    "src/keep/z.key",
    "sub/f",
    "sub/g",
]

CASES = {
    "secrets": (SECRETS_IGNORE, SECRETS_FILES),
    "allow-list": (ALLOW_LIST_IGNORE, ALLOW_LIST_FILES),
}


def _context(root: Path, ignore: str, files: list[str]) -> None:
    root.mkdir()
    (root / ".dockerignore").write_text(ignore)
    (root / DOCKERFILE).write_text(_COPY_ALL)
    for rel in files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(rel)
    (root / "link").symlink_to("main.py")


async def _docker(host: str, *args: str) -> bytes:
    result = await anyio.run_process(["docker", "-H", host, *args], check=False)
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    return result.stdout


async def _files_under_ctx(host: str, image: str) -> set[str]:
    """The files and links under ``/ctx`` of ``image`` (directories left out)."""
    cid = (
        (await _docker(host, "create", "--label", SESSION_LABEL, image, "true"))
        .decode()
        .strip()
    )
    try:
        data = await _docker(host, "cp", f"{cid}:/ctx", "-")
    finally:
        await _docker(host, "rm", "-f", cid)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name.removeprefix("ctx/") for m in tar.getmembers() if not m.isdir()}


async def _build_with_docker_cli(host: str, root: Path, tag: str) -> str:
    await _docker(
        host,
        "build",
        "--quiet",
        "--file",
        str(root / DOCKERFILE),
        "--build-arg",
        f"IMAGE={TEST_IMAGE}",
        "--label",
        SESSION_LABEL,
        "--tag",
        tag,
        str(root),
    )
    return tag


async def _build_with_asyncsched(host: str, root: Path) -> str:
    async with aiodocker.Docker(url=host) as docker, open_context(str(root)) as ctx:
        return await build_image(
            docker,
            host,
            ctx,
            base_image=TEST_IMAGE,
            workspace=str(root),
            labels=dict([SESSION_LABEL.split("=", 1)]),
            quiet=True,
        )


@pytest.mark.parametrize("case", sorted(CASES))
async def test_dockerignore_matches_docker_build(
    swept: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    ignore, files = CASES[case]
    root = tmp_path / "ctx"
    _context(root, ignore, files)
    # the classic builder (the CLI's own context walker) also where buildx exists
    monkeypatch.setenv("DOCKER_BUILDKIT", "0")
    tag = f"asyncsched-test-dockerignore-{SESSION}-{case}:latest"
    theirs = await _files_under_ctx(
        swept.host, await _build_with_docker_cli(swept.host, root, tag)
    )
    ours = await _files_under_ctx(
        swept.host, await _build_with_asyncsched(swept.host, root)
    )
    assert ours == theirs
    # what asyncsched sends is that set, plus the two files the daemon reads
    # and then drops when .dockerignore excludes them
    with tarfile.open(fileobj=io.BytesIO(build_context(str(root)))) as tar:
        sent = {m.name for m in tar.getmembers()}
    assert sent - theirs <= {".dockerignore", DOCKERFILE}
    assert theirs <= sent


def test_secrets_case_leaves_out_what_docker_leaves_out(tmp_path: Path) -> None:
    """The expectations behind the ``secrets`` case, without a daemon."""
    root = tmp_path / "ctx"
    _context(root, SECRETS_IGNORE, SECRETS_FILES)
    with tarfile.open(fileobj=io.BytesIO(build_context(str(root)))) as tar:
        sent = {m.name for m in tar.getmembers()}
    assert sent == {
        ".dockerignore",
        DOCKERFILE,
        "app/main.py",
        "app/secrets/config",  # /secrets is the root's only
        "keep.pem",
        "app/nested.pem",  # *.pem does not cross '/'
        "logs/keep.txt",
        "docs/README.md",
        "docs/sub/b.md",
        "a/b/file",
        "notes.txt",  # the line is 'notes.txt # not a comment in Docker'
        "main.py",
        "other/g",  # other/f: '!other' did not match at 'other' (see below)
        "link",
    }


def test_allow_list_case_leaves_out_what_docker_leaves_out(tmp_path: Path) -> None:
    root = tmp_path / "ctx"
    _context(root, ALLOW_LIST_IGNORE, ALLOW_LIST_FILES)
    with tarfile.open(fileobj=io.BytesIO(build_context(str(root)))) as tar:
        sent = {m.name for m in tar.getmembers()}
    assert sent == {
        ".dockerignore",  # sent for the daemon, which drops both
        DOCKERFILE,
        "app.py",
        "src/a.py",
        # not src/keep/z.key: Docker's walker carries each pattern's match
        # down from a directory only when the pattern was tried there, and
        # '!src/keep/' was not (nothing was excluded at that point)
        "sub/f",
        "sub/g",
    }
