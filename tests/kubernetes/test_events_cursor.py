"""Kubernetes event cursors are checked at the call, before any request."""

from __future__ import annotations

from pathlib import Path

import pytest

from asyncsched.errors import InvalidArgumentError
from asyncsched.schedulers.kit import encode_cursor
from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler


async def test_a_cursor_naming_a_namespace_kubernetes_refuses_is_refused_at_the_call(
    tmp_path: Path,
) -> None:
    bad = encode_cursor("kubernetes", {"ns": {"../../secrets": ["1", "1", "1"]}})
    # no server behind this kubeconfig: a request would fail differently
    async with KubernetesScheduler("s", kubeconfig=str(tmp_path / "none")) as sched:
        with pytest.raises(InvalidArgumentError, match="namespace"):
            sched.events(since=bad)
        with pytest.raises(InvalidArgumentError, match="docker"):
            sched.events(since=encode_cursor("docker", {"ns": {}}))
