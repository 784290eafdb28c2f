"""The run options of the Docker backend (``local_docker``).

Example:
    >>> [name for name, _ in run_opts()][:2]
    ['copy_env', 'env']
"""

from __future__ import annotations

from typing import TypedDict

from asyncsched.schedulers.shared.run_options import add_fail_fast
from asyncsched.specs import runopts

__all__ = ("DockerOpts", "run_opts")


class DockerOpts(TypedDict, total=False):
    """Run options of :class:`DockerScheduler` (after resolution)."""

    copy_env: list[str] | None
    env: dict[str, str] | None
    privileged: bool
    fail_fast: bool
    image_pull_policy: str
    image_repo: str | None
    quiet: bool


def run_opts() -> runopts:
    """The options ``run_opts()`` lists (workspace options aside)."""
    opts = runopts()
    opts.add(
        "copy_env",
        type_=list[str],
        help="glob patterns of host environment variables to copy into every"
        " container, e.g. FOO_*",
    )
    opts.add(
        "env",
        type_=dict[str, str],
        help="environment variables for every container (K1:v1,K2:v2);"
        " applied over copy_env",
    )
    opts.add(
        "privileged",
        type_=bool,
        default=False,
        help="run the containers privileged (docker run --privileged)",
    )
    add_fail_fast(opts)
    opts.add(
        "image_pull_policy",
        type_=str,
        default="if_not_present",
        help="when to pull images: if_not_present (no registry round-trip for a"
        " local image), always, never",
    )
    return opts
