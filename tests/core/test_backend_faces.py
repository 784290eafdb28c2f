"""Each backend package is its public face; TorchX's module paths re-export it."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap

import pytest

FACES = {
    "asyncsched.schedulers.local": "asyncsched.schedulers.local_scheduler",
    "asyncsched.schedulers.docker": "asyncsched.schedulers.docker_scheduler",
    "asyncsched.schedulers.kubernetes": "asyncsched.schedulers.kubernetes_scheduler",
    "asyncsched.schedulers.slurm": "asyncsched.schedulers.slurm_scheduler",
}


@pytest.mark.parametrize("package", sorted(FACES))
def test_torchx_path_module_reexports_the_backend_package(package: str) -> None:
    face = importlib.import_module(package)
    torchx_path = importlib.import_module(FACES[package])
    assert "create_scheduler" in face.__all__
    assert set(torchx_path.__all__) <= set(face.__all__)
    for name in torchx_path.__all__:
        assert getattr(torchx_path, name) is getattr(face, name), name


def test_docker_package_imports_without_the_docker_extra() -> None:
    script = textwrap.dedent(
        """
        import sys
        sys.modules["aiodocker"] = None  # as if the docker extra were missing
        from asyncsched.schedulers.docker import has_docker
        print(has_docker({"DOCKER_HOST": "unix:///nonexistent.sock"}))
        try:
            from asyncsched.schedulers.docker import DockerScheduler
        except ImportError as exc:
            print("ImportError", exc.name)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split("\n")
    assert out[:2] == ["False", "ImportError aiodocker"]
