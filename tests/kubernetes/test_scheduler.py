"""KubernetesScheduler over real HTTP: the kubernetes_asyncio client against the
fake API server (or a real one, see conftest), with the fixture controller."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from kubernetes_asyncio import client

from asyncsched.errors import (
    InvalidArgumentError,
    InvalidRunConfigException,
    SchedulerUnavailableError,
    SubmitError,
    UnknownAppException,
    UnknownReplicaError,
)
from asyncsched.schedulers.kubernetes._logs import parse_timestamp
from asyncsched.schedulers.kubernetes_scheduler import create_scheduler
from asyncsched.specs import AppState, Resource, is_terminal
from asyncsched.testing import wait_for_state

from .fakeapi.controller import FakeController
from .fakeapi.env import KubeEnv
from .helpers import JOB_APIS, cfg_for, make_app, scheduler

pytestmark = pytest.mark.usefixtures("kube_controller")


def needs_logs(env: KubeEnv) -> None:
    if not env.logs_available:
        pytest.skip("pods cannot run on this API server (no fake kubelet)")


@pytest.mark.parametrize("job_api", JOB_APIS)
async def test_submitted_app_succeeds_with_per_replica_status(
    kube_env: KubeEnv, job_api: str
) -> None:
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(
            make_app("echo hi", replicas=2), cfg_for(kube_env, job_api)
        )
        assert app_id.startswith(f"{kube_env.namespace}:app-")
        desc = await sched.wait(app_id, timeout=20)
    assert desc is not None
    assert desc.state == AppState.SUCCEEDED
    [role] = desc.roles_statuses
    assert role.role == "worker"
    assert [(r.id, r.state, r.exit_code) for r in role.replicas] == [
        (0, AppState.SUCCEEDED, 0),
        (1, AppState.SUCCEEDED, 0),
    ]
    # {pod hostname}.{the app's headless Service}: resolvable inside the namespace
    name = app_id.partition(":")[2]
    assert all(r.hostname.endswith(f".{name}") for r in role.replicas)
    assert [r.num_replicas for r in desc.roles] == [2]


@pytest.mark.parametrize("job_api", JOB_APIS)
async def test_failing_replica_fails_the_app_with_its_exit_code(
    kube_env: KubeEnv, job_api: str
) -> None:
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(make_app("exit 7"), cfg_for(kube_env, job_api))
        desc = await sched.wait(app_id, timeout=20)
    assert desc is not None
    assert desc.state == AppState.FAILED
    replica = desc.roles_statuses[0].replicas[0]
    assert replica.exit_code == 7
    assert "exited with code 7" in desc.msg


async def test_unknown_or_deleted_app_is_none(kube_env: KubeEnv) -> None:
    async with scheduler(kube_env) as sched:
        assert await sched.describe(f"{kube_env.namespace}:no-such-app") is None
        assert await sched.wait(f"{kube_env.namespace}:no-such-app") is None
        app_id = await sched.submit(make_app("echo x"), cfg_for(kube_env, "volcano"))
        await sched.wait(app_id, timeout=20)
        await sched.delete(app_id)
        with anyio.fail_after(10):
            while await sched.describe(app_id) is not None:
                await anyio.sleep(0.02)
        await sched.cancel(app_id)  # nothing left: a no-op, not an error
        with pytest.raises(UnknownAppException):
            [line async for line in sched.log_iter(app_id, "worker")]


async def test_app_made_by_another_process_is_described(kube_env: KubeEnv) -> None:
    async with scheduler(kube_env) as first, scheduler(kube_env) as second:
        assert await second.list() == []  # its caches are running
        app_id = await first.submit(make_app("echo x"), cfg_for(kube_env, "volcano"))
        desc = await second.describe(app_id)
        assert desc is not None
        assert desc.app_id == app_id


async def test_name_conflict_on_create_is_a_clear_submit_error(
    kube_env: KubeEnv,
) -> None:
    async with scheduler(kube_env) as sched:
        info = await sched.submit_dryrun(
            make_app("echo x"), cfg_for(kube_env, "volcano")
        )
        await sched.schedule(info)
        with pytest.raises(SubmitError, match="already exists") as exc_info:
            await sched.schedule(info)
    assert info.request.name in str(exc_info.value)


@pytest.mark.fake_api
async def test_indexed_submit_is_all_or_nothing(kube_env: KubeEnv) -> None:
    if kube_env.faults is None:
        pytest.skip("needs the fake server's fault hooks")
    async with scheduler(kube_env) as sched:
        info = await sched.submit_dryrun(
            make_app("echo x"), cfg_for(kube_env, "indexed")
        )
        kube_env.faults.fail_next(409, verb="create", resource="jobs")
        with pytest.raises(SubmitError):
            await sched.schedule(info)
        assert await sched.describe(info.request.app_id) is None
    async with await kube_env.api_client() as api:
        services = await client.CoreV1Api(api).list_namespaced_service(
            kube_env.namespace
        )
    assert [s.metadata.name for s in services.items] == []


@pytest.mark.parametrize("job_api", JOB_APIS)
async def test_cancel_aborts_keeping_status_and_finished_pods_logs(
    kube_env: KubeEnv, job_api: str
) -> None:
    needs_logs(kube_env)
    app = make_app("sleep 30")
    quick = copy.deepcopy(app.roles[0])
    quick.name, quick.args = "quick", ["-c", "echo quick-done"]
    app.roles.insert(0, quick)
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(app, cfg_for(kube_env, job_api))
        with anyio.fail_after(15):
            while True:
                desc = await sched.describe(app_id)
                assert desc is not None
                states = [r.replicas[0].state for r in desc.roles_statuses]
                if states == [AppState.SUCCEEDED, AppState.RUNNING]:
                    break
                await anyio.sleep(0.02)
        await sched.cancel(app_id)
        await sched.cancel(app_id)  # idempotent
        # wait returns once the pod has stopped: a real kubelet gives a PID 1
        # that ignores SIGTERM its 30 s grace
        desc = await sched.wait(app_id, timeout=60)
        assert desc is not None
        assert desc.state == AppState.CANCELLED
        assert [r.replicas[0].state for r in desc.roles_statuses] == [
            AppState.SUCCEEDED,
            AppState.CANCELLED,
        ]
        # the Job stays; the pod that had finished keeps its log
        assert [line async for line in sched.log_iter(app_id, "quick")] == [
            "quick-done\n"
        ]
    if kube_env.requests is not None and job_api == "volcano":
        assert kube_env.requests.count("patch", "jobs/status") == 1


async def test_delete_removes_job_and_pods(kube_env: KubeEnv) -> None:
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(make_app("sleep 30"), cfg_for(kube_env, "indexed"))
        await wait_for_state(sched, app_id, AppState.RUNNING)
        await sched.delete(app_id)
        with anyio.fail_after(10):
            while await sched.describe(app_id) is not None:
                await anyio.sleep(0.02)
    async with await kube_env.api_client() as api:
        core = client.CoreV1Api(api)
        services = await core.list_namespaced_service(kube_env.namespace)
        assert services.items == []


async def test_list_shows_own_apps_and_tolerates_jobs_without_status(
    kube_env: KubeEnv, kube_controller: FakeController
) -> None:
    await kube_controller.aclose()  # nobody will give the new jobs a status
    async with scheduler(kube_env) as sched:
        volcano = await sched.submit(
            make_app("echo x", name="vc"), cfg_for(kube_env, "volcano")
        )
        indexed = await sched.submit(
            make_app("echo x", name="ix"), cfg_for(kube_env, "indexed")
        )
        async with await kube_env.api_client() as api:
            foreign = {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "metadata": {"name": "not-ours"},
                "spec": {"tasks": []},
            }
            await client.CustomObjectsApi(api).create_namespaced_custom_object(
                "batch.volcano.sh", "v1alpha1", kube_env.namespace, "jobs", foreign
            )
        # a Volcano job made by someone else can be described, but is not listed
        foreign_desc = await sched.describe(f"{kube_env.namespace}:not-ours")
        assert foreign_desc is not None
        assert foreign_desc.state == AppState.SUBMITTED
        # an empty name would make "GET .../jobs/" a list of every job
        with pytest.raises(InvalidArgumentError, match="name after ':' is empty"):
            await sched.describe(f"{kube_env.namespace}:")
        rows = {row.app_id: row for row in await sched.list()}
    assert set(rows) == {volcano, indexed}
    assert rows[volcano].state == AppState.SUBMITTED
    assert rows[volcano].name == "vc"
    assert rows[indexed].state == AppState.PENDING


# -- logs ----------------------------------------------------------------------


@pytest.mark.parametrize("job_api", JOB_APIS)
async def test_logs_of_a_finished_replica_with_regex(
    kube_env: KubeEnv, job_api: str
) -> None:
    needs_logs(kube_env)
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(
            make_app(
                "echo one${replica_id}$ASYNCSCHED_REPLICA_ID; echo two; echo three",
                replicas=2,
            ),
            cfg_for(kube_env, job_api),
        )
        await sched.wait(app_id, timeout=20)
        lines = [line async for line in sched.log_iter(app_id, "worker", k=1)]
        # the macro (rendered, or expanded by the kubelet for indexed Jobs)
        # and the identity variable agree
        assert lines == ["one11\n", "two\n", "three\n"]
        matching = [line async for line in sched.log_iter(app_id, "worker", regex="^t")]
        assert matching == ["two\n", "three\n"]
        with pytest.raises(UnknownReplicaError, match="no replica 5"):
            [line async for line in sched.log_iter(app_id, "worker", k=5)]
        with pytest.raises(UnknownReplicaError, match="of role 'nobody'"):
            [line async for line in sched.log_iter(app_id, "nobody")]
        with pytest.raises(InvalidArgumentError, match="stream"):
            sched.log_iter(app_id, "worker", streams="stderr")


@pytest.mark.parametrize("job_api", JOB_APIS)
async def test_follow_waits_for_the_pod_and_ends_when_it_is_done(
    kube_env: KubeEnv, job_api: str
) -> None:
    needs_logs(kube_env)
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(
            make_app("echo first; sleep 0.3; echo second"), cfg_for(kube_env, job_api)
        )
        with anyio.fail_after(20):
            lines = [
                line
                async for line in sched.log_iter(app_id, "worker", should_tail=True)
            ]
    assert lines == ["first\n", "second\n"]


async def test_since_and_until_select_by_line_timestamp(kube_env: KubeEnv) -> None:
    needs_logs(kube_env)
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(
            make_app("echo early; sleep 1.2; echo late"), cfg_for(kube_env, "volcano")
        )
        await sched.wait(app_id, timeout=20)
        name = app_id.partition(":")[2]
        async with await kube_env.api_client() as api:
            raw = await client.CoreV1Api(api).read_namespaced_pod_log(
                f"{name}-worker-0-0", kube_env.namespace, timestamps=True
            )
        stamps = [parse_timestamp(line.split(" ")[0]) for line in raw.splitlines()]
        epoch = datetime.fromtimestamp(0, UTC)
        # datetimes hold microseconds: round towards including the line
        late = epoch + timedelta(microseconds=stamps[1] // 1000)
        early = epoch + timedelta(microseconds=-(-stamps[0] // 1000))
        assert [l async for l in sched.log_iter(app_id, "worker", since=late)] == [
            "late\n"
        ]
        assert [l async for l in sched.log_iter(app_id, "worker", until=early)] == [
            "early\n"
        ]


async def test_closing_a_followed_log_releases_the_response(kube_env: KubeEnv) -> None:
    needs_logs(kube_env)
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(
            make_app("echo tick; sleep 30"), cfg_for(kube_env, "volcano")
        )
        lines = sched.log_iter(app_id, "worker", should_tail=True)
        with anyio.fail_after(15):
            assert await anext(lines) == "tick\n"
        assert sched.api is not None
        # streams have a client (a connection pool) of their own
        connector = sched.api.stream_client.rest_client.pool_manager.connector
        busy_before = len(connector._acquired)
        await lines.aclose()
        assert len(connector._acquired) == busy_before - 1
        await sched.cancel(app_id)


@pytest.mark.fake_api
async def test_denied_listing_is_a_clear_unavailable_error(kube_env: KubeEnv) -> None:
    if kube_env.faults is None:
        pytest.skip("needs the fake server's fault hooks")
    kube_env.faults.fail_next(403, verb="list", resource="pods", message="no pods")
    async with scheduler(kube_env) as sched:
        with pytest.raises(SchedulerUnavailableError, match="RBAC") as info:
            await sched.list()  # starts the caches, which list pods
    assert "no pods" in str(info.value)


@pytest.mark.fake_api
async def test_validate_spec_asks_the_server(kube_env: KubeEnv) -> None:
    if kube_env.faults is None:
        pytest.skip("needs the fake server's fault hooks")
    cfg = {**cfg_for(kube_env, "volcano"), "validate_spec": True}
    async with scheduler(kube_env) as sched:
        info = await sched.submit_dryrun(make_app("echo x"), cfg)
        assert await sched.describe(info.request.app_id) is None  # dry run only
        kube_env.faults.fail_next(422, verb="create", message="spec.tasks: Invalid")
        with pytest.raises(SubmitError, match=r"spec\.tasks: Invalid"):
            await sched.submit_dryrun(make_app("echo x"), cfg)


async def test_injected_client_is_used_and_left_open(kube_env: KubeEnv) -> None:
    async with await kube_env.api_client() as api:
        sched = create_scheduler("k8s-test", client=api, namespace=kube_env.namespace)
        async with sched:
            app_id = await sched.submit(
                make_app("echo x"), cfg_for(kube_env, "volcano")
            )
            assert sched.api is not None
            assert sched.api.client is api
        # still usable after the scheduler closed
        jobs = await client.CustomObjectsApi(api).list_namespaced_custom_object(
            "batch.volcano.sh", "v1alpha1", kube_env.namespace, "jobs"
        )
    assert [j["metadata"]["name"] for j in jobs["items"]] == [app_id.split(":")[1]]


async def test_a_scheduler_stays_on_its_context(kube_env: KubeEnv) -> None:
    async with scheduler(kube_env) as sched:
        await sched.list()
        cfg = {**cfg_for(kube_env, "volcano"), "context": "some-other-cluster"}
        with pytest.raises(InvalidRunConfigException) as info:
            await sched.submit(make_app("echo x"), cfg)
    assert info.value.cfg_key == "context"


async def test_reopened_follow_yields_no_line_twice(kube_env: KubeEnv) -> None:
    needs_logs(kube_env)
    # a follow silent for 0.3 s is re-opened from the last line's second,
    # which replays the lines of that second: none may come out twice
    async with scheduler(kube_env, log_idle_timeout=0.3) as sched:
        app_id = await sched.submit(
            make_app("echo a; echo b; sleep 0.8; echo c; sleep 0.8; echo d"),
            cfg_for(kube_env, "volcano"),
        )
        with anyio.fail_after(20):
            lines = [
                line
                async for line in sched.log_iter(app_id, "worker", should_tail=True)
            ]
    assert lines == ["a\n", "b\n", "c\n", "d\n"]
    if kube_env.requests is not None:
        assert kube_env.requests.count("log") >= 3  # it was re-opened


async def test_workspace_without_image_repo_is_refused_before_building(
    kube_env: KubeEnv, tmp_path: Path
) -> None:
    async with scheduler(kube_env) as sched:
        opts = sched.run_opts()
        assert opts.get("image_repo") is not None
        assert opts.get("quiet") is not None
        with pytest.raises(InvalidRunConfigException) as info:
            await sched.submit(
                make_app("echo x"),
                cfg_for(kube_env, "volcano"),
                workspace=str(tmp_path),
            )
        assert info.value.cfg_key == "image_repo"
        assert await sched.list() == []


@pytest.mark.fake_api
async def test_only_the_job_kind_in_use_needs_permissions(kube_env: KubeEnv) -> None:
    if kube_env.faults is None:
        pytest.skip("needs the fake server's fault hooks")
    # not allowed to list batch/v1 Jobs: Volcano apps still work
    kube_env.faults.fail_next(403, verb="list", resource="jobs", group="batch")
    async with scheduler(kube_env) as sched:
        app_id = await sched.submit(make_app("echo x"), cfg_for(kube_env, "volcano"))
        desc = await sched.wait(app_id, timeout=20)
        assert desc is not None
        assert desc.state == AppState.SUCCEEDED
    # allowed neither: a clear error, not an empty answer
    kube_env.faults.fail_next(403, verb="list", resource="jobs", times=2)
    async with scheduler(kube_env) as sched:
        with pytest.raises(SchedulerUnavailableError, match="nor batch jobs"):
            await sched.list()


@pytest.mark.fake_api
@pytest.mark.parametrize("job_api", JOB_APIS)
async def test_pods_that_cannot_start_say_why(kube_env: KubeEnv, job_api: str) -> None:
    if kube_env.real:
        pytest.skip("relies on the fake kubelet's image and node model")
    async with scheduler(kube_env) as sched:
        bad_image = make_app("echo x")
        bad_image.roles[0].image = "registry.example/does-not-exist:1"
        too_big = make_app("echo x")
        too_big.roles[0].resource = Resource(cpu=1000, gpu=0, memMB=128)
        cfg = cfg_for(kube_env, job_api)
        pull_id = await sched.submit(bad_image, cfg)
        big_id = await sched.submit(too_big, cfg)
        pull = await wait_for_state(
            sched, pull_id, lambda d: "ImagePull" in d.msg, timeout=15
        )
        big = await wait_for_state(
            sched, big_id, lambda d: "Unschedulable" in d.msg, timeout=15
        )
        assert not is_terminal(pull.state)
        assert not is_terminal(big.state)
