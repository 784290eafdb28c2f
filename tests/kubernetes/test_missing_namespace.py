"""A submit to a namespace that does not exist says so (not "install Volcano")."""

from __future__ import annotations

import pytest

from asyncsched.errors import SubmitError

from .fakeapi.env import KubeEnv
from .helpers import JOB_APIS, cfg_for, make_app, scheduler


@pytest.mark.parametrize("job_api", JOB_APIS)
async def test_a_missing_namespace_is_named_as_missing(
    kube_env: KubeEnv, job_api: str
) -> None:
    cfg = cfg_for(kube_env, job_api)
    cfg["namespace"] = f"{kube_env.namespace}-absent"
    async with scheduler(kube_env) as sched:
        with pytest.raises(SubmitError, match="does not exist") as info:
            await sched.submit(make_app("echo x"), cfg)
        assert "Volcano" not in str(info.value)
        assert f"{kube_env.namespace}-absent" in str(info.value)
        assert await sched.list() == []
