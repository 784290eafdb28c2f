"""Malformed app ids and namespaces are refused before any request is sent.

An app id's parts become request URL segments: ``..:x`` would send the
user's token to a cluster-scoped path (the HTTP client folds ``..``),
``default:x?dryRun=All`` would add a query, ``default:%2e%2e`` fold into the
namespace itself. On the fake server, ``requests.client_received()`` holds
every HTTP request that arrived (any path): it must stay empty. On the real
cluster the same calls raise the same errors.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
import pytest

from asyncsched.errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    InvalidRunConfigException,
    SchedulerUnavailableError,
)
from asyncsched.runner import Runner
from asyncsched.schedulers.kubernetes._client import KubeApi
from asyncsched.schedulers.kubernetes._config import load_api_client
from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler

from .fakeapi import FakeKubeServer
from .fakeapi.env import KubeEnv, unique_namespace
from .helpers import cfg_for, make_app, scheduler

HOSTILE_IDS = [
    "..:x",  # the namespace folds away: a cluster-scoped path
    "default:x?dryRun=All",  # a query of the attacker's
    "default:%2e%2e",  # decoded and folded: the namespace itself
    "default:..",
    "default:a/b",  # another resource under the job
    "default:x#frag",
    "kube-system:",  # empty name
    ":x",  # empty namespace
    "",
    "a:b:c",  # the namespace would be "a:b"
    "default:jöb",  # not ASCII
    "default:Trainer",  # upper case: no Kubernetes object has it
    "Default:x",
    "default:x\n",
    "default: x",
    "default:-x",
    "default:" + "a" * 254,  # longer than any object name
    "a" * 64 + ":x",  # longer than any namespace
]


@pytest.fixture
async def fake(
    tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[KubeEnv]:
    """The fake API server alone (for what only it can show: every arrival)."""
    namespace = unique_namespace(request.node.name)
    async with FakeKubeServer() as server:
        path = server.write_kubeconfig(tmp_path / "kubeconfig", namespace=namespace)
        server.create_namespace(namespace)
        yield KubeEnv(
            kubeconfig=str(path),
            namespace=namespace,
            context=None,
            server=server,
            faults=server.faults,
            requests=server.requests,
            real=False,
            logs_available=True,
        )


def _no_request_reached(env: KubeEnv) -> None:
    if env.requests is not None:  # the fake server: every arrival is recorded
        assert env.requests.client_received() == []


async def _drain(lines: Any) -> list[str]:
    async with aclosing(lines):
        return [line async for line in lines]


async def test_every_call_refuses_a_malformed_app_id_before_any_request(
    kube_env: KubeEnv,
) -> None:
    async with scheduler(kube_env) as sched:
        calls: dict[str, Callable[[str], Awaitable[object]]] = {
            "describe": sched.describe,
            "exists": sched.exists,
            "wait": sched.wait,
            "wait(timeout)": lambda a: sched.wait(a, timeout=5),
            "cancel": sched.cancel,
            "delete": sched.delete,
            "log_iter": lambda a: _drain(sched.log_iter(a, "worker")),
        }
        for app_id in HOSTILE_IDS:
            for what, call in calls.items():
                with pytest.raises(InvalidArgumentError) as info:
                    await call(app_id)
                assert "Kubernetes app ids are 'namespace:name'" in str(info.value), (
                    what
                )
            # log_iter refuses at the call, as it does a bad stream or regex
            with pytest.raises(InvalidArgumentError):
                sched.log_iter(app_id, "worker", should_tail=True)
        with pytest.raises(ArgumentTypeError):
            await sched.describe(None)  # type: ignore[arg-type]
    _no_request_reached(kube_env)


async def test_the_error_names_the_bad_part(fake: KubeEnv) -> None:
    async with scheduler(fake) as sched:
        with pytest.raises(
            InvalidArgumentError, match=r"namespace '\.\.' is not a DNS"
        ):
            await sched.cancel("..:x")
        with pytest.raises(
            InvalidArgumentError, match=r"name 'x\?dryRun=All' is not a Kubernetes"
        ):
            await sched.describe("default:x?dryRun=All")
        with pytest.raises(InvalidArgumentError, match="name after ':' is empty"):
            await sched.wait("kube-system:")
        with pytest.raises(InvalidArgumentError, match=r"\(300 characters\)"):
            await sched.describe("default:" + "a" * 292)
    _no_request_reached(fake)


async def test_runner_handles_with_a_malformed_app_id_are_refused(
    fake: KubeEnv,
) -> None:
    params = {"kubeconfig": fake.kubeconfig, "context": fake.context}
    async with Runner("k8s-test", scheduler_params=params) as runner:
        for app_id in ("..:x", "default:%2e%2e", "default:x?dryRun=All"):
            handle = f"kubernetes://k8s-test/{app_id}"
            for call in (runner.status, runner.cancel, runner.wait):
                with pytest.raises(InvalidArgumentError):
                    await call(handle)
    _no_request_reached(fake)


async def test_valid_ids_still_reach_the_server(kube_env: KubeEnv) -> None:
    """Names with dots (a subdomain) and bare names (the scheduler's namespace)."""
    async with scheduler(kube_env) as sched:
        ns = kube_env.namespace
        for app_id in (f"{ns}:no-such.app-1", "no-such-app", f"{ns}:" + "a" * 253):
            assert await sched.describe(app_id) is None
            await sched.cancel(app_id)  # unknown: nothing to do
    if kube_env.requests is not None:
        assert kube_env.requests.client_received() != []


async def test_a_malformed_namespace_option_is_refused_before_any_request(
    kube_env: KubeEnv,
) -> None:
    app = make_app("echo hi")
    async with scheduler(kube_env) as sched:
        for namespace in (
            "..",
            "a/b",
            "default?dryRun=All",
            "Team",
            "%2e%2e",
            "x" * 64,
        ):
            cfg = {**cfg_for(kube_env, "volcano"), "namespace": namespace}
            for call in (sched.submit_dryrun, sched.submit):
                with pytest.raises(InvalidRunConfigException) as info:
                    await call(app, cfg)
                assert info.value.cfg_key == "namespace"
                assert "is not a DNS-1123 label" in str(info.value)
        # a dry-run request edited afterwards is checked again before it is sent
        info_ = await sched.submit_dryrun(app, cfg_for(kube_env, "volcano"))
        info_.request.namespace = ".."
        with pytest.raises(InvalidArgumentError):
            await sched.schedule(info_)
    with pytest.raises(InvalidRunConfigException) as bad:
        KubernetesScheduler("k8s-test", namespace="../kube-system")
    assert bad.value.cfg_key == "namespace"
    _no_request_reached(kube_env)


async def test_a_malformed_namespace_in_the_kubeconfig_is_refused(
    fake: KubeEnv, tmp_path: Path
) -> None:
    assert fake.server is not None
    path = fake.server.write_kubeconfig(tmp_path / "bad-ns", namespace="../x")
    async with KubernetesScheduler("k8s-test", kubeconfig=str(path)) as sched:
        with pytest.raises(SchedulerUnavailableError, match=r"namespace=\.\.\."):
            await sched.describe("some-app")
    # given to the scheduler, it replaces the context's: nothing to refuse
    async with KubernetesScheduler(
        "k8s-test", kubeconfig=str(path), namespace=fake.namespace
    ) as sched:
        assert await sched.describe("some-app") is None


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/namespaces/default/services/..",
        "/api/v1/namespaces/default/pods/%2e%2e/log",
        "/apis/batch/v1/namespaces/default/jobs/x?dryRun=All",
        "/apis/batch/v1/namespaces/default/jobs/a/b/c/../../..",
        "/api/v1/namespaces//pods",
        "api/v1/namespaces",
    ],
)
async def test_the_client_sends_no_request_with_a_path_it_would_fold(
    fake: KubeEnv, path: str
) -> None:
    """The last guard: whatever builds a path, such a request never leaves."""
    assert fake.requests is not None
    api = KubeApi(await load_api_client(kubeconfig=fake.kubeconfig))
    try:
        with pytest.raises(InvalidArgumentError, match="refusing to send"):
            await api.request("DELETE", path)
        with pytest.raises(InvalidArgumentError, match="refusing to send"):
            async with api.stream(path):
                pass
    finally:
        await api.aclose()
    assert fake.requests.client_received() == []


async def test_cli_refuses_a_malformed_app_id_before_any_request(
    fake: KubeEnv, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "KUBECONFIG": fake.kubeconfig,
        "ASYNCSCHED_STATE_DIR": str(tmp_path / "state"),
        "NO_COLOR": "1",
    }

    async def cli(*args: str) -> tuple[int, str]:
        with anyio.fail_after(60):
            done = await anyio.run_process(
                [sys.executable, "-m", "asyncsched", *args], env=env, check=False
            )
        return done.returncode, done.stderr.decode()

    for args in (
        ("status", "kubernetes://s/..:x"),
        ("cancel", "kubernetes://s/default:%2e%2e"),
        ("log", "kubernetes://s/default:x?dryRun=All/worker"),
    ):
        code, err = await cli(*args)
        assert code == 2, err
        assert f"asyncsched {args[0]}: error: app id" in err, err
        assert "Kubernetes app ids are 'namespace:name'" in err
    code, err = await cli(
        "run", "-s", "kubernetes", "-cfg", "namespace=..,queue=default",
        "--image", "busybox:1.36", "--", "echo", "hi",
    )  # fmt: skip
    assert code == 2, err
    assert "namespace '..' is not a DNS-1123 label" in err
    _no_request_reached(fake)
