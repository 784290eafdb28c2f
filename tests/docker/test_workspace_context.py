"""Workspace images without a daemon: build-context tar, ``.dockerignore`` semantics, Dockerfile."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from asyncsched.errors import SchedulerError
from asyncsched.schedulers.shared.dockerignore import DockerIgnore
from asyncsched.schedulers.shared.images import (
    DOCKERFILE,
    GENERATED_DOCKERFILE,
    build_context,
    read_ignore_file,
)
from asyncsched.specs import Workspace


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _members(data: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: m for m in tar.getmembers()}


def _read(data: bytes, name: str) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        f = tar.extractfile(name)
        assert f is not None
        return f.read()


def test_torchx_ignore_vector(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            ".dockerignore": "ignoredir\nignorefile\n*/ignorefileglo*1\n**/ignorefileglob2\ndir?\nunignore\n!unignore\n",
            "foo.sh": "",
            "ignoredir/bar": "",
            "ignorefile": "",
            "ignorefilesuffix": "",
            "dir/ignorefile": "",
            "dir/file": "",
            "dir/ignorefileglob1": "",
            "dir/recursive/ignorefileglob2": "",
            "dir1/file": "",
            "dir2/file": "",
            "unignore": "",
        },
    )
    members = _members(build_context(str(tmp_path)))
    assert set(members) == {
        DOCKERFILE,
        "foo.sh",
        ".dockerignore",
        "dir/ignorefile",
        "ignorefilesuffix",
        "dir/file",
        "unignore",
    }
    assert (
        _read(build_context(str(tmp_path)), DOCKERFILE) == GENERATED_DOCKERFILE.encode()
    )


def test_include_style_vector_keeps_user_dockerfile(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            ".dockerignore": "*\n!timm_app.py\n**/a\n!some_dir\n**/ignore1\nsome_dir/ignore2\nsome_dir/subdir/ignore3",
            DOCKERFILE: "",
            "timm_app.py": "",
            "other.py": "",
            "some_dir/a": "",
            "some_dir/b": "",
            "some_dir/ignore1": "",
            "some_dir/ignore2": "",
            "some_dir/subdir/a": "",
            "some_dir/subdir/b": "",
            "some_dir/subdir/ignore3": "",
        },
    )
    data = build_context(str(tmp_path))
    # .dockerignore is sent (as the Docker CLI sends it) and the daemon drops it,
    # since it excludes itself: test_dockerignore_matches_docker_build checks that
    assert set(_members(data)) == {
        DOCKERFILE,
        ".dockerignore",
        "timm_app.py",
        "some_dir/a",
        "some_dir/b",
        "some_dir/subdir/a",
        "some_dir/subdir/b",
    }
    assert _read(data, DOCKERFILE) == b""  # the user's (empty) Dockerfile is kept


def test_ignore_file_is_read_as_docker_reads_it(tmp_path: Path) -> None:
    # only a line starting with '#' is a comment; '.' and '/x' are cleaned
    (tmp_path / ".dockerignore").write_text("\ufeff# c\n  a  # trailing\n.\n\n! /b/\n")
    assert read_ignore_file(tmp_path) == ["a  # trailing", ".", "!b"]
    assert read_ignore_file(tmp_path / "missing") == []
    assert DockerIgnore(["*"]).excluded("x/y")  # via its parent x
    assert not DockerIgnore(["*", "!b"]).excluded("b")
    assert not DockerIgnore(["a"]).excluded("c")


def test_modes_preserved_and_uid_zero(tmp_path: Path) -> None:
    _tree(tmp_path, {"run.sh": "#!/bin/sh\n", "data.txt": "x"})
    (tmp_path / "run.sh").chmod(0o755)
    (tmp_path / "data.txt").chmod(0o644)
    members = _members(build_context(str(tmp_path)))
    assert members["run.sh"].mode & 0o777 == 0o755
    assert members["data.txt"].mode & 0o777 == 0o644
    assert members["run.sh"].uid == 0


def test_multi_project_workspace_maps_subdirs(tmp_path: Path) -> None:
    _tree(tmp_path / "a", {"x.py": "", ".dockerignore": "skip*", "skipme": ""})
    _tree(tmp_path / "b", {"y.py": ""})
    ws = Workspace(
        projects={str(tmp_path / "a"): "", f"file://{tmp_path / 'b'}": "lib/b"}
    )
    assert set(_members(build_context(ws))) == {
        DOCKERFILE,
        "x.py",
        ".dockerignore",
        "lib/b/y.py",
    }


def test_missing_workspace_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SchedulerError, match="not a directory"):
        build_context(str(tmp_path / "nope"))
