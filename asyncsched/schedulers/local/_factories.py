"""The local backend's factories, as the scheduler registry calls them.

Example:
    >>> sched = create_cwd_scheduler("demo", cancel_grace=2.0, unknown=1)
    >>> sched.cancel_grace
    2.0
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asyncsched.schedulers.local._render import (
    CWDImageProvider,
    ImageProvider,
    LocalDirectoryImageProvider,
)
from asyncsched.schedulers.local._scheduler import LocalScheduler

__all__ = ("create_cwd_scheduler", "create_dir_scheduler", "create_scheduler")


_SCHEDULER_PARAMS = (
    "cancel_grace",
    "close_grace",
    "state_dir",
    "pdeathsig",
    "max_line_bytes",
    "max_running_replicas",
    "raise_nofile",
)


def create_scheduler(
    session_name: str,
    cache_size: int = 100,
    extra_paths: list[str] | None = None,
    image_provider_class: type[ImageProvider] = CWDImageProvider,
    **kwargs: Any,
) -> LocalScheduler:
    """Create a :class:`LocalScheduler`; unknown keyword arguments are ignored."""
    params = {k: v for k, v in kwargs.items() if k in _SCHEDULER_PARAMS}
    return LocalScheduler(
        session_name,
        image_provider_class=image_provider_class,
        cache_size=cache_size,
        extra_paths=extra_paths,
        **params,
    )


def _factory_with(
    provider: type[ImageProvider], name: str, doc: str
) -> Callable[..., LocalScheduler]:
    """A :func:`create_scheduler` whose image provider is always ``provider``."""

    def create(
        session_name: str,
        cache_size: int = 100,
        extra_paths: list[str] | None = None,
        **kwargs: Any,
    ) -> LocalScheduler:
        kwargs.pop("image_provider_class", None)
        return create_scheduler(
            session_name, cache_size, extra_paths, provider, **kwargs
        )

    create.__name__ = create.__qualname__ = name
    create.__doc__ = doc
    return create


create_cwd_scheduler = _factory_with(
    CWDImageProvider,
    "create_cwd_scheduler",
    "``local_cwd``: replicas run in the current directory.",
)
create_dir_scheduler = _factory_with(
    LocalDirectoryImageProvider,
    "create_dir_scheduler",
    "``local_dir``: replicas run in the directory named by the role's image.",
)
