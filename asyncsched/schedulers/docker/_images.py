"""Workspace images: build one over a role's image, and push local images.

Example:
    >>> app = AppDef("a", roles=[Role("r", image="sha256:abc")])
    >>> plan_pushes(app, {"image_repo": "registry.example.com/team/app"})
    {'sha256:abc': ('registry.example.com/team/app', 'abc')}
    >>> app.roles[0].image
    'registry.example.com/team/app:abc'
"""

from __future__ import annotations

from collections.abc import Mapping

import aiodocker

from asyncsched._version import __version__
from asyncsched.errors import InvalidRunConfigException
from asyncsched.schedulers.shared.docker_daemon import registry_auth
from asyncsched.schedulers.shared.images import build_image, open_context, push_image
from asyncsched.schedulers.shared.labels import LABEL_SESSION, LABEL_VERSION
from asyncsched.specs import AppDef, CfgVal, Role, Workspace

__all__ = ("build_workspace", "plan_pushes", "push_planned")


async def build_workspace(
    docker: aiodocker.Docker,
    host: str,
    session: str,
    role: Role,
    workspace: str | Workspace,
    cfg: Mapping[str, CfgVal],
) -> None:
    """Build ``workspace`` over ``role.image``; point the role at the result
    (pushed to ``image_repo`` when set). See
    :meth:`DockerScheduler.build_workspace_and_update_role`."""
    label = workspace if isinstance(workspace, str) else ",".join(workspace.projects)
    async with open_context(workspace) as context:
        image_id = await build_image(
            docker,
            host,
            context,
            base_image=role.image,
            workspace=label,
            labels={LABEL_VERSION: __version__, LABEL_SESSION: session},
            quiet=bool(cfg.get("quiet")),
        )
    repo = cfg.get("image_repo")
    if repo:
        auth = await registry_auth(str(repo))
        role.image = await push_image(docker, host, image_id, str(repo), auth)
    else:
        role.image = image_id


def plan_pushes(app: AppDef, cfg: Mapping[str, CfgVal]) -> dict[str, tuple[str, str]]:
    """Point roles that run a local image id at ``<image_repo>:<hash>``;
    ``{image id: (image_repo, hash)}`` to push.

    Raises:
        InvalidRunConfigException: a role runs a local image id and
            ``image_repo`` is not set.
    """
    repo = cfg.get("image_repo")
    to_push: dict[str, tuple[str, str]] = {}
    for i, role in enumerate(app.roles):
        if not role.image.startswith("sha256:"):
            continue
        if not repo:
            raise InvalidRunConfigException(
                f"roles[{i}] runs the local image {role.image}; set image_repo"
                " to push it somewhere other hosts can pull from",
                "image_repo",
                cfg,
            )
        tag = role.image.removeprefix("sha256:")
        to_push[role.image] = (str(repo), tag)
        role.image = f"{repo}:{tag}"
    return to_push


async def push_planned(
    docker: aiodocker.Docker, host: str, images_to_push: dict[str, tuple[str, str]]
) -> None:
    """Tag and push what :func:`plan_pushes` returned."""
    for image_id, (repo, _tag) in images_to_push.items():
        auth = await registry_auth(repo)
        await push_image(docker, host, image_id, repo, auth)
