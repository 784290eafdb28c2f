"""Tokens that expire are renewed: before they do, and once more on a 401.

The kubeconfig's user is an exec plugin (``fakeapi/exec_plugin.py``) issuing
tokens that last a few seconds; the fake server accepts only the latest one
issued, until its expiry -- as an EKS cluster does with ``aws eks get-token``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from asyncsched.errors import SchedulerUnavailableError
from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler

from .fakeapi import exec_plugin
from .fakeapi.env import KubeEnv
from .fakeapi.exec_plugin import SkewClock


def _exec_kubeconfig(
    env: KubeEnv, tmp_path: Path, ttl: float, clock: SkewClock | None = None
) -> tuple[Path, Path]:
    """A kubeconfig whose exec plugin issues tokens lasting ``ttl`` seconds of
    ``clock`` (the server's and the plugin's clock; default: the real one)."""
    server = env.fake_server()
    state = tmp_path / "token"
    command = [sys.executable, exec_plugin.__file__, str(state), str(ttl)]
    if clock is None:
        server.accept_tokens_from(state)
    else:
        server.accept_tokens_from(state, clock)
        command.append(str(clock.path))
    config = server.write_exec_kubeconfig(
        tmp_path / "exec-kubeconfig", command, namespace=env.namespace
    )
    return config, state


def _runs(state: Path) -> int:
    runs = Path(f"{state}.runs")
    return len(runs.read_text().splitlines()) if runs.exists() else 0


@pytest.mark.fake_api
async def test_a_token_is_renewed_before_it_expires(
    kube_env: KubeEnv, tmp_path: Path
) -> None:
    # time passes on a clock the scheduler, the server and the plugin share:
    # moved forward, not waited out
    clock = SkewClock(tmp_path / "skew")
    config, state = _exec_kubeconfig(kube_env, tmp_path, ttl=3.0, clock=clock)
    server = kube_env.fake_server()
    async with KubernetesScheduler(
        "k8s-test",
        kubeconfig=str(config),
        namespace=kube_env.namespace,
        wall_clock=clock,
    ) as sched:
        # an unknown app is looked up on the server at every call
        missing = f"{kube_env.namespace}:nope"
        assert await sched.describe(missing) is None
        first = _runs(state)
        for _ in range(70):  # 7 s: more than two token lifetimes
            clock.advance(0.1)
            assert await sched.describe(missing) is None
    assert first == 1
    assert _runs(state) >= 3  # renewed at least twice
    # renewed ahead of time: at most a request racing the expiry was refused
    assert server.unauthorized <= 1


@pytest.mark.fake_api
async def test_a_revoked_token_is_replaced_after_one_401(
    kube_env: KubeEnv, tmp_path: Path
) -> None:
    config, state = _exec_kubeconfig(kube_env, tmp_path, ttl=600.0)
    server = kube_env.fake_server()
    async with KubernetesScheduler(
        "k8s-test", kubeconfig=str(config), namespace=kube_env.namespace
    ) as sched:
        missing = f"{kube_env.namespace}:nope"
        assert await sched.describe(missing) is None
        state.write_text(f"revoked {time.time() + 600}")  # the server revokes it
        assert await sched.describe(missing) is None
    assert server.unauthorized == 1
    assert _runs(state) == 2


@pytest.mark.fake_api
async def test_a_refused_token_is_reported_as_expired_or_invalid_credentials(
    kube_env: KubeEnv, tmp_path: Path
) -> None:
    server = kube_env.fake_server()
    path = tmp_path / "bad-kubeconfig"
    server.write_kubeconfig(path, namespace=kube_env.namespace)
    server.token = "another-token"  # the kubeconfig's token is no longer accepted
    async with KubernetesScheduler(
        "k8s-test", kubeconfig=str(path), namespace=kube_env.namespace
    ) as sched:
        with pytest.raises(SchedulerUnavailableError) as info:
            await sched.describe(f"{kube_env.namespace}:nope")
    message = str(info.value)
    assert "credentials expired or invalid" in message
    assert "RBAC" not in message
