"""Env names Kubernetes would reject are refused before anything is created."""

from __future__ import annotations

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
