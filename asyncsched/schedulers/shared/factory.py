"""Registry factories: hand a scheduler the keyword arguments it takes.

A registry factory is called with every scheduler parameter a runner was
given (``Runner(scheduler_params=...)``), most of them meant for other
backends; it passes on only those its scheduler's constructor names as
keyword-only parameters, so the list cannot drift from the constructor.

Example:
    >>> class Demo:
    ...     def __init__(self, session_name: str, *, timeout: float = 1.0) -> None:
    ...         self.timeout = timeout
    >>> keyword_params(Demo, {"timeout": 5.0, "docker_host": "unix:///x"})
    {'timeout': 5.0}
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["keyword_params"]


def keyword_params(
    target: Callable[..., Any], kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """The items of ``kwargs`` that ``target`` takes as keyword-only parameters."""
    params = inspect.signature(target).parameters
    return {
        name: value
        for name, value in kwargs.items()
        if name in params and params[name].kind is inspect.Parameter.KEYWORD_ONLY
    }
