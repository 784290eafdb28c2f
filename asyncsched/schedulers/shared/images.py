"""Workspace images: the build-context tar, ``.dockerignore`` rules, build and push.

The context holds the workspace files (per project, under its target
sub-directory) and a ``Dockerfile.asyncsched``: the user's own when the
workspace root has one, otherwise a generated three-line file that copies the
workspace over the role's image (``ARG IMAGE``, ``FROM $IMAGE``, ``COPY . .``).

What goes in: regular files (with their modes) and symbolic links, as links
(never followed, so a link cannot pull in a file from outside the
workspace). Sockets, FIFOs and device nodes are skipped with a warning. A
project's target is a relative path without ``..`` (checked before anything
is read), so no entry name leaves the context. The tar is written to an
anonymous temporary file and streamed to the daemon: memory stays flat
whatever the workspace's size.

Ignore rules are Docker's (:mod:`.dockerignore`), as ``docker build`` applies
them: ``**/.env`` leaves out ``.env`` at every depth, ``/secrets`` the root's
``secrets``, ``*.pem`` only the root's ``.pem`` files, and ``!keep`` re-includes.
An excluded directory is walked only when an exception names something below
it (``!dir/keep``). At a project mapped to the context root, ``.dockerignore``
and ``Dockerfile.asyncsched`` are always sent, as the Docker CLI sends them:
the daemon reads them, then drops those that ``.dockerignore`` excludes, so
they are not copied into the image.

Example:
    >>> rules = DockerIgnore(["**/.env", "/secrets"])
    >>> rules.excluded(".env"), rules.excluded("secrets/key"), rules.excluded("a")
    (True, True, False)
"""

from __future__ import annotations

import io
import logging
import os
import stat
import tarfile
import tempfile
from collections.abc import AsyncIterator, Collection, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

import aiodocker
import anyio
from aiodocker.exceptions import DockerError
from aiodocker.images import DockerImages

from asyncsched.errors import SchedulerError, SchedulerUnavailableError, SpecError
from asyncsched.schedulers.shared.docker_daemon import registry_of
from asyncsched.schedulers.shared.docker_errors import docker_errors
from asyncsched.schedulers.shared.dockerignore import DockerIgnore, read_patterns
from asyncsched.specs import Workspace

__all__ = [
    "DOCKERFILE",
    "GENERATED_DOCKERFILE",
    "IGNORE_FILE",
    "build_context",
    "build_image",
    "check_target",
    "open_context",
    "push_failure",
    "push_image",
    "read_ignore_file",
    "walk",
    "write_context",
]

logger = logging.getLogger(__name__)

DOCKERFILE = "Dockerfile.asyncsched"
IGNORE_FILE = ".dockerignore"
GENERATED_DOCKERFILE = "ARG IMAGE\nFROM $IMAGE\n\nCOPY . .\n"

# what the Docker CLI always sends from the context root: the daemon reads
# them, then removes those that .dockerignore excludes
_ALWAYS_SENT = frozenset({DOCKERFILE, IGNORE_FILE})
_CHUNK = 1024 * 1024  # bytes read per worker-thread hop while streaming the context
_SPECIAL_KINDS = {
    stat.S_IFSOCK: "socket",
    stat.S_IFIFO: "FIFO",
    stat.S_IFCHR: "character device",
    stat.S_IFBLK: "block device",
}


def read_ignore_file(root: Path) -> list[str]:
    """The patterns of ``root/.dockerignore``, read as Docker reads them (none
    when it does not exist).

    Raises:
        SchedulerError: it exists but is not a regular file.
    """
    path = root / IGNORE_FILE
    try:
        if not stat.S_ISREG(path.stat().st_mode):  # a FIFO would block the read
            raise SchedulerError(f"{str(path)!r} is not a regular file")
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return []
    return read_patterns(text)


def walk(
    root: Path, patterns: Sequence[str], *, always: Collection[str] = ()
) -> Iterator[tuple[Path, str]]:
    """Yield ``(file, relative posix path)`` for every file that is not ignored.

    ``always`` names files of the root that are yielded even when excluded.
    Directories are not yielded (empty directories are not part of a context).
    A file sent although TorchX's rules would have left it out (``*.pem`` and
    ``a/b.pem``) is named in a warning, once per pattern.

    Raises:
        SchedulerError: a pattern is invalid.
    """
    try:
        rules = DockerIgnore(patterns)
    except SchedulerError as exc:
        raise SchedulerError(f"{str(root / IGNORE_FILE)!r}: {exc}") from None
    read_otherwise: dict[str, list[str]] = {}
    yield from _walk(
        root, "", rules, [False] * len(rules.patterns), always, read_otherwise
    )
    for pattern, paths in read_otherwise.items():
        more = f" and {len(paths) - 1} more" if len(paths) > 1 else ""
        logger.warning(
            "%s: the pattern %r leaves out %r under TorchX's rules but not under"
            " Docker's, which asyncsched follows: it is sent%s (write '**/%s' to"
            " leave it out at every depth)",
            root / IGNORE_FILE,
            pattern,
            paths[0],
            more,
            pattern,
        )


def _walk(
    directory: Path,
    rel: str,
    rules: DockerIgnore,
    parents: list[bool],
    always: Collection[str],
    read_otherwise: dict[str, list[str]],
) -> Iterator[tuple[Path, str]]:
    with os.scandir(directory) as entries:
        children = sorted(entries, key=lambda e: e.name)
    for entry in children:
        child_rel = f"{rel}/{entry.name}" if rel else entry.name
        is_out, matched = rules.match(child_rel, parents)
        is_dir = entry.is_dir(follow_symlinks=False)
        if is_out and child_rel in always and not is_dir:
            is_out = False
        if is_dir:
            if not is_out or rules.walk_into(child_rel):
                yield from _walk(
                    Path(entry.path), child_rel, rules, matched, (), read_otherwise
                )
        elif not is_out:
            torchx = rules.torchx_reading(child_rel)
            if torchx is not None:  # a TorchX user's secret may be in the image
                read_otherwise.setdefault(torchx, []).append(child_rel)
            yield Path(entry.path), child_rel


def check_target(src: str, target: object) -> str:
    """The normalized target sub-directory of project ``src`` ("" for the root).

    A target is a relative POSIX path inside the image's working directory:
    ``""`` and ``"."`` are the root, ``"./lib//a/"`` is ``"lib/a"``.

    Example:
        >>> check_target("~/proj", "./lib//a/")
        'lib/a'

    Raises:
        SpecError: an absolute target, a ``..`` component or a control
            character; ``.field`` is ``workspace.projects['<src>']``.
    """
    field = f"workspace.projects[{src!r}]"
    if not isinstance(target, str):
        raise SpecError(field, f"the target must be a string, got {target!r}")
    if any(ord(c) < 32 or ord(c) == 127 for c in target):
        raise SpecError(field, f"the target has a control character: {target!r}")
    if target.startswith("/"):
        raise SpecError(
            field,
            f"the target must be relative to the image's working directory"
            f" (e.g. 'lib/x'), got {target!r}",
        )
    parts = [p for p in target.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise SpecError(
            field,
            f"the target must not contain '..' (it would leave the context),"
            f" got {target!r}",
        )
    return "/".join(parts)


def _projects(workspace: str | Workspace) -> list[tuple[Path, str]]:
    if isinstance(workspace, str):
        workspace = Workspace(projects={workspace: ""})
    out = []
    for src, dst in workspace.projects.items():
        target = check_target(src, dst)
        path = src.removeprefix("file://")
        out.append((Path(path).expanduser(), target))
    return out


def build_context(workspace: str | Workspace) -> bytes:
    """:func:`write_context` into memory; for small workspaces and tests.

    Raises:
        SpecError: a project target is invalid.
        SchedulerError: a project directory does not exist, or a file cannot
            be read.
    """
    buf = io.BytesIO()
    write_context(workspace, buf)
    return buf.getvalue()


def write_context(workspace: str | Workspace, out: IO[bytes]) -> None:
    """Tar (uncompressed) the workspace plus its Dockerfile into ``out``.

    Blocking: run it in a worker thread. A project mapped to ``""`` lands at
    the root, others under their sub-directory; each project applies its own
    ``.dockerignore`` with Docker's rules (:class:`DockerIgnore`). File modes are kept, owners are root. Symbolic links
    are stored as links; sockets, FIFOs and device nodes are skipped with a
    warning naming them. Files are copied in chunks, so memory does not grow
    with their size.

    Raises:
        SpecError: a project target is invalid (checked before any file is read).
        SchedulerError: a project directory does not exist, or a file cannot
            be read (add it to ``.dockerignore`` to leave it out).
    """
    projects = _projects(workspace)
    has_dockerfile = False
    layout = _Layout()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for root, dst in projects:
            if not root.is_dir():
                raise SchedulerError(f"workspace {str(root)!r} is not a directory")
            try:
                always = _ALWAYS_SENT if not dst else ()
                for path, rel in walk(root, read_ignore_file(root), always=always):
                    arcname = f"{dst}/{rel}" if dst else rel
                    if _add(tar, path, arcname, layout):
                        has_dockerfile = has_dockerfile or arcname == DOCKERFILE
            except OSError as exc:  # listing a directory, reading .dockerignore
                where = str(exc.filename or root)
                raise SchedulerError(
                    f"cannot read {where!r} of workspace {str(root)!r}: {exc}"
                ) from exc
        if not has_dockerfile:
            data = GENERATED_DOCKERFILE.encode()
            info = tarfile.TarInfo(DOCKERFILE)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))


class _Layout:
    """The entries written so far: no entry may sit below a link entry.

    One project never has any (links are not descended into), but projects
    overlay each other: one's link ``lib -> /etc`` and another's target
    ``lib`` would put ``lib/x`` behind a link that leaves the context.
    """

    def __init__(self) -> None:
        self.links: set[str] = set()
        self.dirs: set[str] = set()

    def admit(self, arcname: str, is_link: bool) -> None:
        parts = arcname.split("/")
        if arcname.startswith("/") or ".." in parts:
            raise SchedulerError(f"refusing build-context entry {arcname!r}")
        parents = ["/".join(parts[:i]) for i in range(1, len(parts))]
        link = next((p for p in parents if p in self.links), None)
        if link is None and is_link and arcname in self.dirs:
            link = arcname
        if link is not None:
            raise SchedulerError(
                f"build-context entry {arcname!r} would go through the symbolic"
                f" link {link!r} of another project: change a project target"
            )
        self.dirs.update(parents)
        if is_link:
            self.links.add(arcname)


def _add(tar: tarfile.TarFile, path: Path, arcname: str, layout: _Layout) -> bool:
    """Add ``path`` (not followed if a link) as ``arcname``; False if skipped."""
    try:
        kind = _SPECIAL_KINDS.get(stat.S_IFMT(os.lstat(path).st_mode))
        info = None if kind else tar.gettarinfo(str(path), arcname=arcname)
        if info is None or not (info.isreg() or info.issym() or info.islnk()):
            if info is not None and info.isdir():
                kind = "directory"
            logger.warning(
                "Skipping %s in the workspace: a %s cannot be part of the image",
                path,
                kind or "special file",
            )
            return False
        layout.admit(arcname, info.issym())
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        if info.isreg():
            with path.open("rb") as f:
                tar.addfile(info, f)
        else:
            tar.addfile(info)
    except OSError as exc:  # unreadable, vanished or shrunk while read; disk full
        raise SchedulerError(
            f"cannot add {str(path)!r} to the build context: {exc}"
            f" (leave it out with {IGNORE_FILE} if it is not needed)"
        ) from exc
    return True


@asynccontextmanager
async def open_context(workspace: str | Workspace) -> AsyncIterator[IO[bytes]]:
    """The build context in an anonymous temporary file, rewound; closed on exit.

    The tar is written by :func:`write_context` in a worker thread, into
    ``tempfile.TemporaryFile`` (``$TMPDIR``, mode 0600, already unlinked):
    only the disk holds the context, never memory.

    Example:
        >>> async def build(docker: aiodocker.Docker) -> str:
        ...     async with open_context("~/proj") as context:
        ...         return await build_image(docker, "unix:///var/run/docker.sock",
        ...             context, base_image="busybox", workspace="~/proj",
        ...             labels={}, quiet=True)

    Raises:
        SpecError: a project target is invalid.
        SchedulerError: as :func:`write_context`.
    """
    file = await anyio.to_thread.run_sync(_context_file, workspace)
    try:
        yield file
    finally:
        with anyio.CancelScope(shield=True):  # close it even when cancelled
            with anyio.move_on_after(30):
                await anyio.to_thread.run_sync(file.close)


def _context_file(workspace: str | Workspace) -> IO[bytes]:
    # handed to the caller, who closes it (open_context)
    file = tempfile.TemporaryFile(prefix="asyncsched-context-")  # noqa: SIM115
    try:
        write_context(workspace, file)
        file.seek(0)
    except BaseException:
        file.close()
        raise
    return file


class _ThreadedImages(DockerImages):
    """aiodocker's image API, reading the context file in a worker thread.

    ``DockerImages.build`` reads ``fileobj`` synchronously (8 KiB at a time)
    on the event loop; this moves each read (1 MiB) to a worker thread.
    """

    @staticmethod
    async def _stream(fileobj: Any) -> AsyncIterator[bytes]:
        while chunk := await anyio.to_thread.run_sync(fileobj.read, _CHUNK):
            yield chunk


async def build_image(
    docker: aiodocker.Docker,
    host: str,
    context: bytes | IO[bytes],
    *,
    base_image: str,
    workspace: str,
    labels: dict[str, str],
    quiet: bool,
) -> str:
    """Build ``context`` on top of ``base_image``; return the image id (``sha256:...``).

    ``context`` is the tar, or a file holding it (:func:`open_context`),
    streamed to the daemon from its current position.

    Raises:
        SchedulerError: the build failed (the daemon's message is included).
    """
    logger.info("Building workspace docker image (this may take a while)...")
    image_id: str | None = None
    try:
        with docker_errors("build the workspace image", host):
            fileobj = io.BytesIO(context) if isinstance(context, bytes) else context
            events = _ThreadedImages(docker).build(
                fileobj=fileobj,
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

    ``auth`` are the registry credentials (:func:`registry_auth`); None pushes
    anonymously. A failed push leaves the image (and its new tag) in the
    engine, so the next try pushes without building again.

    Raises:
        SchedulerError: tagging or pushing failed; the message names the
            registry, and says what to do when it wants (other) credentials.
        SchedulerUnavailableError: the Docker daemon cannot be reached.
    """
    tag = image_id.removeprefix("sha256:")
    if "/" not in image_repo:  # a Docker Hub official name: no registry to log in to
        auth = None
    try:
        with docker_errors(f"push the workspace image to {image_repo!r}", host):
            await docker.images.tag(image_id, image_repo, tag=tag)
            async for event in docker.images.push(
                image_repo, tag=tag, auth=auth, stream=True
            ):
                status = event.get("status")
                if status:
                    logger.info("docker push %s: %s", event.get("id", ""), status)
    except SchedulerUnavailableError:
        raise
    except SchedulerError as exc:
        cause = exc.__cause__
        message = cause.message if isinstance(cause, DockerError) else str(exc)
        text = push_failure(image_repo, str(message), has_auth=auth is not None)
        raise SchedulerError(
            f"{text} (the built image stays in the local engine as"
            f" '{image_repo}:{tag}'; the next try pushes it again)"
        ) from cause
    return f"{image_repo}:{tag}"


_AUTH_WORDS = ("no basic auth credentials", "unauthorized", "authentication required")


def push_failure(image_repo: str, message: str, *, has_auth: bool) -> str:
    """The error text of a failed push: the repository, its registry, the cause.

    When the registry wants credentials, it says where asyncsched looks for
    them (``$DOCKER_CONFIG/config.json``, what ``docker login`` writes).

    Example:
        >>> text = push_failure("127.0.0.1:5000/ws", "no basic auth credentials",
        ...     has_auth=False)
        >>> "run `docker login 127.0.0.1:5000`" in text
        True
    """
    registry = registry_of(image_repo)
    text = (
        f"failed to push the workspace image to {image_repo!r}"
        f" (registry {registry}): {message}"
    )
    lowered = message.lower()
    if not any(word in lowered for word in (*_AUTH_WORDS, "denied")):
        return text
    where = "$DOCKER_CONFIG/config.json (default ~/.docker/config.json)"
    if has_auth:
        return (
            f"{text}; the registry {registry} refused the credentials found for it"
            f" in {where}: check them with `docker login {registry}`, and that"
            " this account may push to the repository"
        )
    return (
        f"{text}; the registry {registry} wants credentials and none were found"
        f" for it in {where}: run `docker login {registry}`"
    )
