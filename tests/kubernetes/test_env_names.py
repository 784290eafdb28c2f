"""Env names Kubernetes would reject are refused before anything is created."""

from __future__ import annotations

from typing import Any

import pytest

from asyncsched.errors import SpecError

from .fakeapi.env import KubeEnv
from .helpers import JOB_APIS, cfg_for, make_app, scheduler


@pytest.mark.parametrize("job_api", JOB_APIS)
@pytest.mark.parametrize("bad", ["1BAD-NAME", "HAS SPACE", "a/b", ""])
async def test_an_env_name_kubernetes_rejects_is_a_spec_error_naming_it(
    kube_env: KubeEnv, job_api: str, bad: str
) -> None:
    app = make_app("echo x")
    app.roles[0].env = {"GOOD": "1", bad: "2"}
    async with scheduler(kube_env) as sched:
        with pytest.raises(SpecError) as info:
            await sched.submit(app, cfg_for(kube_env, job_api))
        assert info.value.field in (f"roles[0].env.{bad}", "roles[0].env")
        assert await sched.list() == []  # nothing was created


@pytest.mark.parametrize("good", ["A_1", "my.var", "-dash", "_x", "camelCase"])
async def test_env_names_kubernetes_accepts_pass(kube_env: KubeEnv, good: str) -> None:
    app = make_app("echo x")
    app.roles[0].env = {good: "v"}
    async with scheduler(kube_env) as sched:
        info = await sched.submit_dryrun(app, cfg_for(kube_env, "volcano"))
    assert info.request is not None


async def test_hostile_env_values_reach_the_manifest_unchanged(
    kube_env: KubeEnv,
) -> None:
    from tests.local.test_env_values_arrive_intact import HOSTILE

    app = make_app("echo x")
    app.roles[0].env = dict(HOSTILE)
    async with scheduler(kube_env) as sched:
        for job_api in JOB_APIS:
            info = await sched.submit_dryrun(app, cfg_for(kube_env, job_api))
            text = str(info.request)
            assert text  # the request renders
            containers = [
                c for manifest in info.request.manifests for c in _containers(manifest)
            ]
            assert containers
            for container in containers:
                env = {e["name"]: e.get("value") for e in container["env"]}
                for name, value in HOSTILE.items():
                    assert env[name] == value, (job_api, name)


def _containers(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """Every container of a Volcano job's tasks or a batch Job's template."""
    spec: dict[str, Any] = manifest.get("spec") or {}
    templates = [t["template"] for t in spec.get("tasks", [])]
    if "template" in spec:
        templates.append(spec["template"])
    return [c for t in templates for c in t["spec"]["containers"]]
