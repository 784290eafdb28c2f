"""What an Indexed Job carries besides the replicas: priority, queue, retries.

Indexed Jobs have no gang scheduling: a ``min_replicas`` they cannot honour
is refused before anything is created. ``priority_class`` reaches the pods,
``queue`` becomes Kueue's queue label, disruptions do not use up retries, and
a REPLICA role retries each replica on its own -- with the optional Job
fields only where the API server has them (asked once per connection).
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from asyncsched.errors import (
    InvalidRunConfigException,
    SpecError,
)
from asyncsched.schedulers.kubernetes._render import render_job
from asyncsched.specs import AppDef, CfgVal, Resource, RetryPolicy, Role

from .fakeapi.env import KubeEnv
from .helpers import IMAGE, cfg_for, scheduler

KUEUE_LABEL = "kueue.x-k8s.io/queue-name"
IGNORE_DISRUPTIONS = {
    "rules": [
        {
            "action": "Ignore",
            "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
        }
    ]
}


def _app(**role: Any) -> AppDef:
    role.setdefault("num_replicas", 2)
    return AppDef(
        "fields",
        roles=[
            Role(
                "worker",
                image=IMAGE,
                entrypoint="sh",
                args=["-c", "sleep 30"],
                resource=Resource(cpu=1, gpu=0, memMB=128),
                **role,
            )
        ],
    )


def _render(app: AppDef, **cfg: CfgVal) -> list[dict[str, Any]]:
    cfg.setdefault("job_api", "indexed")
    job = render_job(app, cfg, name="fields-x", session="s", version="1")
    return [m for m in job.manifests if m["kind"] == "Job"]


async def _stored_jobs(env: KubeEnv) -> list[Any]:
    async with await env.api_client() as api:
        jobs = await client.BatchV1Api(api).list_namespaced_job(env.namespace)
        return [api.sanitize_for_serialization(j) for j in jobs.items]


# -- without a server -----------------------------------------------------------


def test_priority_class_reaches_the_pods_of_indexed_jobs() -> None:
    [job] = _render(_app(), priority_class="high")
    assert job["spec"]["template"]["spec"]["priorityClassName"] == "high"
    [job] = _render(_app())
    assert "priorityClassName" not in job["spec"]["template"]["spec"]


def test_a_pod_overlay_may_name_another_priority_class() -> None:
    app = _app(metadata={"kubernetes": {"spec": {"priorityClassName": "mine"}}})
    [job] = _render(app, priority_class="high")
    assert job["spec"]["template"]["spec"]["priorityClassName"] == "mine"


def test_min_replicas_below_num_replicas_is_refused_naming_the_field() -> None:
    with pytest.raises(SpecError) as info:
        _render(_app(min_replicas=1))
    assert info.value.field == "roles[0].min_replicas"
    assert "gang" in str(info.value)
    assert "job_api=volcano" in str(info.value)
    # equal to num_replicas asks for nothing an Indexed Job cannot do
    assert _render(_app(min_replicas=2))


def test_queue_becomes_the_kueue_queue_label_of_the_jobs_only() -> None:
    job = render_job(
        _app(),
        {"job_api": "indexed", "queue": "team-a"},
        name="q-x",
        session="s",
        version="1",
    )
    service, role_job = job.manifests
    assert role_job["metadata"]["labels"][KUEUE_LABEL] == "team-a"
    assert KUEUE_LABEL not in service["metadata"]["labels"]
    assert KUEUE_LABEL not in role_job["spec"]["template"]["metadata"]["labels"]
    [unlabelled] = _render(_app())
    assert KUEUE_LABEL not in unlabelled["metadata"]["labels"]
    with pytest.raises(InvalidRunConfigException) as bad:
        _render(_app(), queue="team a/b")
    assert bad.value.cfg_key == "queue"


def test_disruptions_do_not_use_up_retries_and_replica_roles_retry_per_index() -> None:
    [app_job] = _render(_app(max_retries=2))
    assert app_job["spec"]["podFailurePolicy"] == IGNORE_DISRUPTIONS
    assert app_job["spec"]["backoffLimit"] == 2
    assert "backoffLimitPerIndex" not in app_job["spec"]
    [replica_job] = _render(_app(max_retries=2, retry_policy=RetryPolicy.REPLICA))
    assert replica_job["spec"]["backoffLimitPerIndex"] == 2
    assert replica_job["spec"]["maxFailedIndexes"] == 0
    assert replica_job["spec"]["backoffLimit"] == 4


# -- what the API server gets, by its version -------------------------------------


@pytest.mark.fake_api
@pytest.mark.parametrize(
    ("version", "failure_policy", "per_index"),
    [((1, 31), True, True), ((1, 28), True, False), ((1, 25), False, False)],
)
async def test_optional_job_fields_are_sent_only_to_servers_that_have_them(
    kube_env: KubeEnv,
    version: tuple[int, int],
    failure_policy: bool,
    per_index: bool,
) -> None:
    kube_env.fake_server().version = version
    app = _app(max_retries=2, retry_policy=RetryPolicy.REPLICA)
    async with scheduler(kube_env) as sched:
        info = await sched.submit_dryrun(app, cfg_for(kube_env, "indexed"))
        await sched.schedule(info)
    [job] = await _stored_jobs(kube_env)
    spec = job["spec"]
    assert ("podFailurePolicy" in spec) is failure_policy
    assert ("backoffLimitPerIndex" in spec) is per_index
    assert ("maxFailedIndexes" in spec) is per_index
    # without per-index budgets the Job's backoffLimit is the replica's budget
    assert spec["backoffLimit"] == (4 if per_index else 2)
    # the dry run the user holds is left as rendered
    [rendered] = [m for m in info.request.manifests if m["kind"] == "Job"]
    assert rendered["spec"]["backoffLimitPerIndex"] == 2


@pytest.mark.fake_api
async def test_refused_min_replicas_creates_nothing(kube_env: KubeEnv) -> None:
    server = kube_env.fake_server()
    async with scheduler(kube_env) as sched:
        with pytest.raises(SpecError):
            await sched.submit(_app(min_replicas=1), cfg_for(kube_env, "indexed"))
    assert server.requests.count("create") == 0


@pytest.mark.fake_api
async def test_a_server_without_indexed_jobs_is_refused_before_any_create(
    kube_env: KubeEnv,
) -> None:
    server = kube_env.fake_server()
    server.version = (1, 20)  # the real CI cluster's version
    async with scheduler(kube_env) as sched:
        with pytest.raises(InvalidRunConfigException, match=r"v1\.20"):
            await sched.submit(_app(), cfg_for(kube_env, "indexed"))
    assert server.requests.count("create") == 0
