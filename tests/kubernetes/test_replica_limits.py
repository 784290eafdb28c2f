"""An app over the job API's replica maximum is refused before any request is sent."""

from __future__ import annotations

import pytest

from asyncsched.errors import SpecError

from .fakeapi.env import KubeEnv
from .helpers import cfg_for, make_app, scheduler


@pytest.mark.parametrize(
    ("job_api", "maximum"), [("volcano", 1000), ("indexed", 100_000)]
)
async def test_too_many_replicas_are_refused_before_anything_is_created(
    kube_env: KubeEnv, job_api: str, maximum: int
) -> None:
    async with scheduler(kube_env) as sched:
        with pytest.raises(SpecError) as info:
            await sched.submit(
                make_app("echo x", replicas=maximum + 1), cfg_for(kube_env, job_api)
            )
        assert await sched.list() == []
    assert info.value.field == "roles[0].num_replicas"
    assert f"asks for {maximum + 1} replicas" in info.value.message
    assert f"at most {maximum} per role" in info.value.message
