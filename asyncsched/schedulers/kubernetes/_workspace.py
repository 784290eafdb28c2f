"""Local images for the cluster: workspace builds and pushes (the ``docker`` extra).

A workspace is built over a role's image with the local Docker engine; the
cluster cannot pull a local image, so the dry run maps it to
``<image_repo>:<hash>`` and the submit pushes it there first
(:func:`push_images`). aiodocker is loaded by name, on first use: without
the ``docker`` extra both say what to install.

Example:
    >>> async def main(role: Role) -> None:
    ...     await build_workspace(role, "./src", image_repo="registry.example.com/t",
    ...                           session_name="demo", docker_client=None)
"""

from __future__ import annotations

import importlib
from typing import Any

from asyncsched._version import __version__
from asyncsched.errors import SchedulerUnavailableError
from asyncsched.schedulers.kubernetes._gate import BACKEND
from asyncsched.schedulers.kubernetes._job_names import (
    LABEL_SESSION,
    LABEL_VERSION,
)
from asyncsched.schedulers.kubernetes._render import KubernetesJob
from asyncsched.schedulers.shared.docker_daemon import registry_auth, resolve_host
from asyncsched.specs import Role, Workspace

__all__ = ("build_workspace", "push_images")


async def build_workspace(
    role: Role,
    workspace: str | Workspace,
    *,
    session_name: str,
    docker_client: Any,
    quiet: bool = False,
) -> None:
    """Build ``workspace`` over ``role.image``; the role then names the built image.

    ``docker_client`` (an aiodocker client) is used and left open; None: one
    is made for the build and closed.

    Raises:
        SchedulerUnavailableError: the ``docker`` extra is missing.
    """
    aiodocker, images = _docker_modules()
    docker = docker_client or aiodocker.Docker()
    try:
        label = (
            workspace if isinstance(workspace, str) else ",".join(workspace.projects)
        )
        async with images.open_context(workspace) as context:
            role.image = await images.build_image(
                docker,
                resolve_host(None),
                context,
                base_image=role.image,
                workspace=label,
                labels={LABEL_VERSION: __version__, LABEL_SESSION: session_name},
                quiet=quiet,
            )
    finally:
        if docker_client is None:
            await docker.close()


async def push_images(job: KubernetesJob, docker_client: Any) -> None:
    """Push the job's ``images_to_push`` to their repositories.

    Raises:
        SchedulerUnavailableError: the ``docker`` extra is missing.
    """
    if not job.images_to_push:
        return
    aiodocker, images = _docker_modules()
    docker = docker_client or aiodocker.Docker()
    try:
        for image, (repo, _tag) in job.images_to_push.items():
            auth = await registry_auth(repo)
            await images.push_image(docker, resolve_host(None), image, repo, auth)
    finally:
        if docker_client is None:
            await docker.close()


def _docker_modules() -> tuple[Any, Any]:
    """aiodocker and the shared image build/push module (the docker extra)."""
    try:
        aiodocker = importlib.import_module("aiodocker")
        images = importlib.import_module("asyncsched.schedulers.shared.images")
    except ImportError as exc:
        raise SchedulerUnavailableError(
            BACKEND,
            "building or pushing local images needs aiodocker",
            "pip install 'asyncsched[docker]'",
        ) from exc
    return aiodocker, images
