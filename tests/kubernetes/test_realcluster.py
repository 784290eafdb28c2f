"""The backend on a real Kubernetes 1.20 node: what only real containers show.

Real exit codes, a real OOM kill, an image that is not there, log streams
from the kubelet, pods that really stop on cancel and really go on delete
(the garbage collector), 20 apps awaited at once with the API load read from
the server's own ``/metrics``, and 20 waits that survive a restart of the
API server. Runs only against the test cluster the fixtures start
(tests/kubernetes/realcluster); the fake API server covers fault injection.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from kubernetes_asyncio import client

from asyncsched.errors import (
    InvalidRunConfigException,
    SchedulerUnavailableError,
    SubmitError,
)
from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler
from asyncsched.specs import AppDef, AppState, Resource, Role, is_terminal
from asyncsched.testing import wait_for_state

from .fakeapi.env import KubeEnv
from .helpers import IMAGE, cfg_for, make_app, scheduler
from .realcluster.cluster import NOBODY_USER, RealCluster

pytestmark = [
    pytest.mark.parametrize("kube_server", ["real"], indirect=True),
    pytest.mark.usefixtures("kube_controller"),
]

#: ends at once on SIGTERM (a shell as PID 1 ignores it: 30 s grace otherwise)
STOPPABLE = "trap 'exit 143' TERM; echo started; sleep 600 & wait"


def _cluster(env: KubeEnv) -> RealCluster:
    if env.cluster is None:
        pytest.skip("needs the test cluster the fixtures start (not a kubeconfig)")
    cluster: RealCluster = env.cluster
    return cluster


async def _running_containers(env: KubeEnv) -> list[str]:
    """The node's app containers of this test's namespace (not the sandboxes)."""
    out = await anyio.to_thread.run_sync(
        lambda: _cluster(env).docker(
            "ps",
            "-q",
            "--filter",
            f"label=io.kubernetes.pod.namespace={env.namespace}",
            "--filter",
            "label=io.kubernetes.docker.type=container",
        )
    )
    return out.split()


async def _pods(env: KubeEnv) -> list[str]:
    async with await env.api_client() as api:
        pods = await client.CoreV1Api(api).list_namespaced_pod(env.namespace)
    return [p.metadata.name for p in pods.items]


async def _eventually(check: object, timeout: float, what: str) -> None:
    assert callable(check)
    with anyio.fail_after(timeout):
        while not await check():
            await anyio.sleep(0.2)


async def test_exit_codes_and_states_come_from_real_containers(
    kube_env: KubeEnv,
) -> None:
    app = AppDef(
        "codes",
        roles=[
            Role(
                "ok",
                image=IMAGE,
                entrypoint="sh",
                args=["-c", "echo fine"],
                resource=Resource(cpu=1, gpu=0, memMB=64),
            ),
            Role(
                "bad",
                image=IMAGE,
                entrypoint="sh",
                args=["-c", "echo broken >&2; exit 3"],
                resource=Resource(cpu=1, gpu=0, memMB=64),
            ),
        ],
    )
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(app, cfg_for(kube_env, "volcano"))
        desc = await sched.wait(app_id, timeout=90)
        assert desc is not None
        errors = [line async for line in sched.log_iter(app_id, "bad")]
    assert desc.state == AppState.FAILED
    replicas = {s.role: s.replicas for s in desc.roles_statuses}
    assert [(r.state, r.exit_code) for r in replicas["ok"]] == [(AppState.SUCCEEDED, 0)]
    assert [(r.state, r.exit_code) for r in replicas["bad"]] == [(AppState.FAILED, 3)]
    assert "exited with code 3" in desc.msg
    assert errors == ["broken\n"]


async def test_a_replica_over_its_memory_limit_is_oom_killed(kube_env: KubeEnv) -> None:
    app = make_app("x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo survived")
    app.roles[0].resource = Resource(cpu=1, gpu=0, memMB=20)
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(app, cfg_for(kube_env, "volcano"))
        desc = await sched.wait(app_id, timeout=90)
        out = [line async for line in sched.log_iter(app_id, "worker")]
    assert desc is not None
    assert desc.state == AppState.FAILED
    [replica] = desc.roles_statuses[0].replicas
    assert (replica.state, replica.exit_code) == (AppState.FAILED, 137)
    assert "OOMKilled" in desc.msg
    assert "survived\n" not in out


async def test_an_image_that_may_not_be_pulled_says_so(kube_env: KubeEnv) -> None:
    app = make_app("echo never")
    app.roles[0].image = "asyncsched-test/absent:1"
    async with scheduler(kube_env) as sched:
        info = await sched.submit_dryrun(app, cfg_for(kube_env, "volcano"))
        # the user's cluster policy: images must be on the node already
        for task in info.request.manifests[0]["spec"]["tasks"]:
            for container in task["template"]["spec"]["containers"]:
                container["imagePullPolicy"] = "Never"
        app_id = await sched.schedule(info)
        with anyio.fail_after(60):
            while "ErrImageNeverPull" not in (desc := await sched.describe(app_id)).msg:  # type: ignore[union-attr]
                await anyio.sleep(0.2)
        assert desc is not None
        assert not is_terminal(desc.state)
        await sched.cancel(app_id)
        await wait_for_state(sched, app_id, AppState.CANCELLED, timeout=60)


async def test_logs_of_real_pods_finished_followed_and_filtered(
    kube_env: KubeEnv,
) -> None:
    # the gap must outlast the follow latency of a loaded node: "since the
    # moment alpha was seen" must fall before gamma is written
    script = "echo alpha; echo beta >&2; sleep 15; echo gamma; echo delta"
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(make_app(script), cfg_for(kube_env, "volcano"))
        followed: list[str] = []
        seen_alpha_at: datetime | None = None
        with anyio.fail_after(90):
            async for line in sched.log_iter(app_id, "worker", should_tail=True):
                followed.append(line)
                if line == "alpha\n":
                    seen_alpha_at = datetime.now(UTC)
        assert seen_alpha_at is not None
        await sched.wait(app_id, timeout=60)
        finished = [line async for line in sched.log_iter(app_id, "worker")]
        later = [
            line async for line in sched.log_iter(app_id, "worker", since=seen_alpha_at)
        ]
        earlier = [
            line async for line in sched.log_iter(app_id, "worker", until=seen_alpha_at)
        ]
        matching = [
            line async for line in sched.log_iter(app_id, "worker", regex="^[gd]")
        ]
        none = [
            line
            async for line in sched.log_iter(
                app_id, "worker", since=datetime.now(UTC) + timedelta(hours=1)
            )
        ]
    assert sorted(followed) == sorted(["alpha\n", "beta\n", "gamma\n", "delta\n"])
    assert followed.index("gamma\n") < followed.index("delta\n")
    assert sorted(finished) == sorted(followed)
    assert later == ["gamma\n", "delta\n"]
    assert sorted(earlier) == ["alpha\n", "beta\n"]
    assert matching == ["gamma\n", "delta\n"]
    assert none == []


async def test_cancel_really_stops_the_pods(kube_env: KubeEnv) -> None:
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(
            make_app(STOPPABLE, replicas=2), cfg_for(kube_env, "volcano")
        )
        await wait_for_state(sched, app_id, AppState.RUNNING, timeout=60)

        async def both_running() -> bool:
            return len(await _running_containers(kube_env)) == 2

        await _eventually(both_running, 60, "two running containers")

        async def both_trap_term() -> bool:
            # "started" is printed after the TERM trap is set: a TERM before
            # it is ignored by the shell (PID 1), and the pod would then wait
            # out its whole grace period
            for k in range(2):
                lines = [line async for line in sched.log_iter(app_id, "worker", k)]
                if "started\n" not in lines:
                    return False
            return True

        await _eventually(both_trap_term, 60, "both replicas to set their trap")
        await sched.cancel(app_id)
        desc = await sched.wait(app_id, timeout=60)

        async def none_running() -> bool:
            return await _running_containers(kube_env) == []

        await _eventually(none_running, 60, "the containers to stop")
    assert desc is not None
    assert desc.state == AppState.CANCELLED


async def test_delete_removes_the_pods_through_the_garbage_collector(
    kube_env: KubeEnv,
) -> None:
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(
            make_app("echo done", replicas=2), cfg_for(kube_env, "volcano")
        )
        await sched.wait(app_id, timeout=90)
        assert len(await _pods(kube_env)) == 2
        await sched.delete(app_id)

        async def pods_gone() -> bool:
            return await _pods(kube_env) == []

        await _eventually(pods_gone, 60, "the garbage collector to delete the pods")
        assert await sched.describe(app_id) is None


def _requests(metrics: str, **labels: str) -> int:
    """Sum of ``apiserver_request_total`` over the series matching ``labels``."""
    total = 0
    for line in metrics.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        series, _, value = line.rpartition(" ")
        found = dict(re.findall(r'(\w+)="([^"]*)"', series))
        if all(found.get(k) == v for k, v in labels.items()):
            total += int(float(value))
    return total


async def _earlier_namespaces_gone(env: KubeEnv) -> None:
    """Wait (bounded) for the namespaces of earlier tests to go: deleting one
    lists every resource type in it, Volcano jobs included."""
    async with await env.api_client() as api:
        core = client.CoreV1Api(api)
        with anyio.move_on_after(120):
            while any(
                ns.status.phase == "Terminating"
                for ns in (await core.list_namespace()).items
            ):
                await anyio.sleep(0.5)


async def test_twenty_apps_awaited_at_once_cost_the_server_few_requests(
    kube_env: KubeEnv,
) -> None:
    cluster = _cluster(kube_env)
    n = 20
    await _earlier_namespaces_gone(kube_env)
    async with scheduler(kube_env) as sched:
        cfg = cfg_for(kube_env, "volcano")
        ids = [
            await sched.submit(make_app("echo hi", name=f"many{i}"), cfg)
            for i in range(n)
        ]
        before = await anyio.to_thread.run_sync(cluster.metrics)
        states: dict[str, AppState] = {}

        async def wait_one(app_id: str) -> None:
            desc = await sched.wait(app_id, timeout=240)
            assert desc is not None
            states[app_id] = desc.state

        with anyio.fail_after(250):
            async with anyio.create_task_group() as tg:
                for app_id in ids:
                    tg.start_soon(wait_one, app_id)
        after = await anyio.to_thread.run_sync(cluster.metrics)
    assert set(states.values()) == {AppState.SUCCEEDED}
    assert len(states) == n
    # the waits are answered from the watch caches: no per-app reads of the
    # jobs (only the fixture's Volcano stand-in writes their status)
    reads = {
        verb: _requests(after, group="batch.volcano.sh", resource="jobs", verb=verb)
        - _requests(before, group="batch.volcano.sh", resource="jobs", verb=verb)
        for verb in ("GET", "LIST")
    }
    assert reads["GET"] + reads["LIST"] <= 4, reads


async def test_waits_end_right_across_an_api_server_restart(kube_env: KubeEnv) -> None:
    cluster = _cluster(kube_env)
    n = 20
    async with scheduler(kube_env) as sched:
        cfg = cfg_for(kube_env, "volcano")
        ok = [
            await sched.submit(make_app("sleep 2; echo ok", name=f"ok{i}"), cfg)
            for i in range(n - 2)
        ]
        bad = [
            await sched.submit(make_app("sleep 2; exit 5", name=f"bad{i}"), cfg)
            for i in range(2)
        ]
        results: dict[str, AppState] = {}

        async def wait_one(app_id: str) -> None:
            desc = await sched.wait(app_id, timeout=180)
            assert desc is not None
            results[app_id] = desc.state

        with anyio.fail_after(200):
            async with anyio.create_task_group() as tg:
                for app_id in ok + bad:
                    tg.start_soon(wait_one, app_id)
                # the waits are parked on the watch before the server goes,
                # and the apps end while it is down or just back
                await wait_for_state(
                    sched,
                    ok[0],
                    lambda d: (
                        d.state
                        not in (AppState.UNKNOWN, AppState.SUBMITTED, AppState.PENDING)
                    ),
                    timeout=60,
                )
                await anyio.to_thread.run_sync(cluster.restart_apiserver, 1.0)
    assert {results[a] for a in ok} == {AppState.SUCCEEDED}
    assert {results[a] for a in bad} == {AppState.FAILED}


async def test_indexed_jobs_are_refused_on_a_server_without_them(
    kube_env: KubeEnv,
) -> None:
    if kube_env.indexed_jobs:
        pytest.skip("this server has Indexed Jobs")
    async with scheduler(kube_env) as sched:
        cfg = {
            "namespace": kube_env.namespace,
            "job_api": "indexed",
            **kube_env.run_cfg,
        }
        with pytest.raises(
            InvalidRunConfigException, match=r"v1\.20\.2.*completionMode"
        ):
            await sched.submit(make_app("echo x", replicas=2), cfg)
        assert await sched.list() == []
    async with await kube_env.api_client() as api:
        jobs = await client.BatchV1Api(api).list_namespaced_job(kube_env.namespace)
        services = await client.CoreV1Api(api).list_namespaced_service(
            kube_env.namespace
        )
    assert jobs.items == []
    assert services.items == []
    assert await _pods(kube_env) == []


def _documented_role() -> Any:
    """The RBAC Role of docs/backends/kubernetes.md, as a user would apply it."""
    doc = (
        Path(__file__).parents[2] / "docs" / "backends" / "kubernetes.md"
    ).read_text()
    block = re.search(
        r"```yaml\n(apiVersion: rbac\.authorization\.k8s\.io/v1\nkind: Role\n.*?)```",
        doc,
        re.DOTALL,
    )
    assert block is not None, "the RBAC Role is no longer in the docs"
    return yaml.safe_load(block.group(1))


async def test_the_documented_rbac_role_is_all_a_user_needs(kube_env: KubeEnv) -> None:
    cluster = _cluster(kube_env)
    user = cluster.nobody_kubeconfig
    app = make_app(STOPPABLE)
    cfg = cfg_for(kube_env, "volcano")
    async with KubernetesScheduler(
        "rbac", kubeconfig=str(user), namespace=kube_env.namespace
    ) as sched:
        # the create is refused (no cache is started by a submit): the error
        # names RBAC and quotes the server
        with pytest.raises(SubmitError, match="RBAC does not allow creating") as info:
            await sched.submit(app, cfg)
        assert "forbidden" in str(info.value)
        with pytest.raises(SchedulerUnavailableError):
            await sched.list()
    role = _documented_role()
    async with await kube_env.api_client() as api:
        rbac = client.RbacAuthorizationV1Api(api)
        await rbac.create_namespaced_role(kube_env.namespace, role)
        binding: Any = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "asyncsched"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": role["metadata"]["name"],
            },
            "subjects": [
                {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "User",
                    "name": NOBODY_USER,
                }
            ],
        }
        await rbac.create_namespaced_role_binding(kube_env.namespace, binding)
    async with KubernetesScheduler(
        "rbac", kubeconfig=str(user), namespace=kube_env.namespace
    ) as sched:
        done = await sched.submit(make_app("echo granted"), cfg)
        running = await sched.submit(app, cfg)
        desc = await sched.wait(done, timeout=90)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
        assert [line async for line in sched.log_iter(done, "worker")] == ["granted\n"]
        await wait_for_state(sched, running, AppState.RUNNING, timeout=60)
        await sched.cancel(running)
        await wait_for_state(sched, running, AppState.CANCELLED, timeout=60)
        assert {a.app_id for a in await sched.list()} == {done, running}
        await sched.delete(done)
        assert await sched.describe(done) is None
