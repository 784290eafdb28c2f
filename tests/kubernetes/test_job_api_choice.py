"""An unknown ``job_api`` is refused by the dry run, naming the choices."""

from __future__ import annotations

import pytest

from asyncsched.errors import InvalidRunConfigException

from .fakeapi.env import KubeEnv
from .helpers import cfg_for, make_app, scheduler


async def test_an_unknown_job_api_is_refused_before_anything_is_created(
    kube_env: KubeEnv,
) -> None:
    cfg = {**cfg_for(kube_env, "volcano"), "job_api": "bogus"}
    async with scheduler(kube_env) as sched:
        with pytest.raises(InvalidRunConfigException) as info:
            await sched.submit(make_app("echo x"), cfg)
        assert await sched.list() == []
    assert info.value.cfg_key == "job_api"
    assert "job_api must be one of ['volcano', 'indexed'], got 'bogus'" in str(
        info.value
    )
