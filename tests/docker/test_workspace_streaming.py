"""Workspace build contexts are streamed: memory does not grow with the workspace."""

from __future__ import annotations

import io
import threading
import tracemalloc
from pathlib import Path

import aiodocker
import pytest

from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.schedulers.shared.images import (
    DOCKERFILE,
    build_context,
    build_image,
    open_context,
)

from .conftest import SESSION_LABEL, TEST_IMAGE, Engine
from .helpers import sh_app

pytestmark = pytest.mark.docker

MiB = 1024 * 1024
# A Dockerfile that does not copy the context: the daemon still receives all of
# it, but the test does not pay for writing a 128 MiB layer.
NO_COPY = "ARG IMAGE\nFROM $IMAGE\nLABEL asyncsched.test=no-copy\n"


async def test_a_128_mib_workspace_builds_with_flat_python_memory(
    sched: DockerScheduler, tmp_path: Path
) -> None:
    with (tmp_path / "big.bin").open("wb") as f:
        f.truncate(128 * MiB)  # sparse: cheap to create, 128 MiB in the tar
    (tmp_path / DOCKERFILE).write_text(NO_COPY)
    tracemalloc.start()
    try:
        info = await sched.submit_dryrun(
            sh_app("true"), {"quiet": True}, workspace=str(tmp_path)
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.app is not None
    assert info.app.roles[0].image.startswith("sha256:")
    assert peak < 16 * MiB, f"peak Python memory {peak / MiB:.0f} MiB"


async def test_the_context_file_is_read_off_the_event_loop(
    raw_docker: aiodocker.Docker, swept: Engine, tmp_path: Path
) -> None:
    (tmp_path / DOCKERFILE).write_text(NO_COPY)
    (tmp_path / "data").write_bytes(b"x" * (3 * MiB))
    loop_thread = threading.get_ident()
    readers: set[int] = set()

    class Recording(io.RawIOBase):
        def __init__(self, inner: io.BufferedIOBase) -> None:
            self.inner = inner

        def readable(self) -> bool:
            return True

        def read(self, size: int = -1) -> bytes:
            readers.add(threading.get_ident())
            return self.inner.read(size)

    async with open_context(str(tmp_path)) as context:
        image_id = await build_image(
            raw_docker,
            "test",
            Recording(context),  # type: ignore[arg-type]
            base_image=TEST_IMAGE,
            workspace=str(tmp_path),
            labels=dict([SESSION_LABEL.split("=", 1)]),
            quiet=True,
        )
    assert image_id.startswith("sha256:")
    assert readers
    assert loop_thread not in readers


async def test_the_context_file_holds_the_same_tar_as_in_memory(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("b")
    async with open_context(str(tmp_path)) as context:
        assert context.read() == build_context(str(tmp_path))
