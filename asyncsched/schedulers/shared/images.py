"""Workspace images: the build-context tar, ``.dockerignore`` rules, build and push.

The context holds the workspace files (per project, under its target
sub-directory) and a ``Dockerfile.asyncsched``: the user's own when the
workspace root has one, otherwise a generated three-line file that copies the
workspace over the role's image (``ARG IMAGE``, ``FROM $IMAGE``, ``COPY . .``).

Ignore rules (TorchX's, not Docker's matcher): each ``.dockerignore`` line is
cut at the first ``#`` and stripped; empty lines and ``.`` are dropped; paths
relative to the project root are matched with :func:`fnmatch.fnmatch` (so ``*``
also matches ``/``); ``!pattern`` re-includes; the last matching pattern wins.
An excluded directory is not descended into; inside a directory that a pattern
re-included, only the patterns after that one apply. The root and the root's
``Dockerfile.asyncsched`` are never excluded.

Example:
    >>> excluded("dir/file", ["dir?", "*/file"])
    (True, 1)
    >>> excluded("keep", ["*", "!keep"])
    (False, 1)
"""

from __future__ import annotations

import fnmatch
import io
import logging
import os
import posixpath
import tarfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import aiodocker
from aiodocker.exceptions import DockerError

from asyncsched.errors import SchedulerError
from asyncsched.schedulers.shared.docker_errors import docker_errors
from asyncsched.specs import Workspace

__all__ = [
    "DOCKERFILE",
    "GENERATED_DOCKERFILE",
    "IGNORE_FILE",
    "build_context",
    "build_image",
    "excluded",
    "push_image",
    "read_ignore_file",
    "walk",
]

logger = logging.getLogger(__name__)

DOCKERFILE = "Dockerfile.asyncsched"
IGNORE_FILE = ".dockerignore"
GENERATED_DOCKERFILE = "ARG IMAGE\nFROM $IMAGE\n\nCOPY . .\n"


def read_ignore_file(root: Path) -> list[str]:
    """The patterns of ``root/.dockerignore`` (none when it does not exist)."""
    try:
        text = (root / IGNORE_FILE).read_text()
    except FileNotFoundError:
        return []
    patterns = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line and line != ".":
            patterns.append(line)
    return patterns


def excluded(
    path: str, patterns: Sequence[str], start: int = 0
) -> tuple[bool, int | None]:
    """Whether ``path`` is excluded, and the index of the last pattern that matched."""
    path = posixpath.normpath(path)
    verdict, last = False, None
    for i in range(start, len(patterns)):
        pattern = patterns[i]
        negated = pattern.startswith("!")
        if negated:
            pattern = pattern[1:]
        if fnmatch.fnmatch(path, posixpath.normpath(pattern)):
            verdict, last = not negated, i
    return verdict, last


def walk(root: Path, patterns: Sequence[str]) -> Iterator[tuple[Path, str]]:
    """Yield ``(file, relative posix path)`` for every file that is not ignored.

    Directories are not yielded (empty directories are not part of a context).
    """
    yield from _walk(root, "", patterns, 0)


def _walk(
    directory: Path, rel: str, patterns: Sequence[str], start: int
) -> Iterator[tuple[Path, str]]:
    with os.scandir(directory) as entries:
        children = sorted(entries, key=lambda e: e.name)
    for entry in children:
        child_rel = f"{rel}/{entry.name}" if rel else entry.name
        if child_rel == DOCKERFILE:
            yield Path(entry.path), child_rel
            continue
        is_out, last = excluded(child_rel, patterns, start)
        if is_out:
            continue
        if entry.is_dir(follow_symlinks=False):
            child_start = start if last is None else last + 1
            yield from _walk(Path(entry.path), child_rel, patterns, child_start)
        else:
            yield Path(entry.path), child_rel


def _projects(workspace: str | Workspace) -> list[tuple[Path, str]]:
    if isinstance(workspace, str):
        workspace = Workspace(projects={workspace: ""})
    out = []
    for src, dst in workspace.projects.items():
        path = src.removeprefix("file://")
        out.append((Path(path).expanduser(), dst.strip("/")))
    return out


def build_context(workspace: str | Workspace) -> bytes:
    """Tar (uncompressed) the workspace plus its Dockerfile; blocking, use a thread.

    A project mapped to ``""`` lands at the root, others under their
    sub-directory; each project applies its own ``.dockerignore``. File modes
    are kept.

    Raises:
        SchedulerError: a project directory does not exist.
    """
    buf = io.BytesIO()
    has_dockerfile = False
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for root, dst in _projects(workspace):
            if not root.is_dir():
                raise SchedulerError(f"workspace {str(root)!r} is not a directory")
            for path, rel in walk(root, read_ignore_file(root)):
                arcname = f"{dst}/{rel}" if dst else rel
                has_dockerfile = has_dockerfile or arcname == DOCKERFILE
                info = tar.gettarinfo(str(path), arcname=arcname)
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                if info.isfile():
                    with path.open("rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
        if not has_dockerfile:
            data = GENERATED_DOCKERFILE.encode()
            info = tarfile.TarInfo(DOCKERFILE)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


async def build_image(
    docker: aiodocker.Docker,
    host: str,
    context: bytes,
    *,
    base_image: str,
    workspace: str,
    labels: dict[str, str],
    quiet: bool,
) -> str:
    """Build ``context`` on top of ``base_image``; return the image id (``sha256:...``).

    Raises:
        SchedulerError: the build failed (the daemon's message is included).
    """
    logger.info("Building workspace docker image (this may take a while)...")
    image_id: str | None = None
    try:
        with docker_errors("build the workspace image", host):
            events = docker.images.build(
                fileobj=io.BytesIO(context),
                encoding="identity",
                path_dockerfile=DOCKERFILE,
                buildargs={"IMAGE": base_image, "WORKSPACE": workspace},
                labels=labels,
                pull=False,
                rm=True,
                forcerm=True,
                stream=True,
            )
            async for event in events:
                image_id = _on_build_event(event, quiet) or image_id
    except SchedulerError as exc:
        cause = exc.__cause__
        if isinstance(cause, DockerError) and cause.status == 0:
            raise SchedulerError(
                f"workspace image build failed: {cause.message}"
            ) from cause
        raise
    if image_id is None:
        raise SchedulerError("workspace image build finished without an image id")
    return image_id


def _on_build_event(event: dict[str, Any], quiet: bool) -> str | None:
    if "error" in event:
        raise SchedulerError(f"workspace image build failed: {event['error']}")
    text = event.get("stream")
    if isinstance(text, str) and not quiet:
        text = text.strip("\r\n")
        if text:
            logger.info("%s", text)
    aux = event.get("aux")
    if isinstance(aux, dict) and isinstance(aux.get("ID"), str):
        return str(aux["ID"])
    return None


async def push_image(
    docker: aiodocker.Docker,
    host: str,
    image_id: str,
    image_repo: str,
    auth: dict[str, str] | None,
) -> str:
    """Tag ``image_id`` as ``image_repo:<hash>`` and push it; return that name.

    Raises:
        SchedulerError: tagging or pushing failed.
    """
    tag = image_id.removeprefix("sha256:")
    try:
        with docker_errors(f"push the workspace image to {image_repo!r}", host):
            await docker.images.tag(image_id, image_repo, tag=tag)
            async for event in docker.images.push(
                image_repo, tag=tag, auth=auth, stream=True
            ):
                status = event.get("status")
                if status:
                    logger.info("docker push %s: %s", event.get("id", ""), status)
    except SchedulerError as exc:
        cause = exc.__cause__
        message = cause.message if isinstance(cause, DockerError) else str(exc)
        raise SchedulerError(
            f"failed to push the workspace image to {image_repo!r}: {message}"
        ) from cause
    return f"{image_repo}:{tag}"
