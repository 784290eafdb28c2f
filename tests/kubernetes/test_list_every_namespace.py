"""``list()`` shows the apps in every namespace the scheduler submitted to."""

from __future__ import annotations

import pytest

from asyncsched.specs import AppState

from .fakeapi.env import KubeEnv
from .helpers import cfg_for, make_app, scheduler


@pytest.mark.fake_api
async def test_list_shows_apps_of_the_configured_and_every_submitted_namespace(
    kube_env: KubeEnv,
) -> None:
    if kube_env.server is None:
        pytest.skip("creates namespaces on the fake API server")
    other = f"{kube_env.namespace}-other"
    third = f"{kube_env.namespace}-third"
    kube_env.server.create_namespace(other)
    kube_env.server.create_namespace(third)
    async with scheduler(kube_env) as sched:
        home = await sched.submit(
            make_app("echo x", name="home"), cfg_for(kube_env, "volcano")
        )
        away = await sched.submit(
            make_app("echo x", name="away"),
            {**cfg_for(kube_env, "volcano"), "namespace": other},
        )
        indexed = await sched.submit(
            make_app("echo x", name="ix"),
            {**cfg_for(kube_env, "indexed"), "namespace": third},
        )
        assert away.startswith(f"{other}:")
        assert indexed.startswith(f"{third}:")
        rows = {row.app_id: row for row in await sched.list()}
        assert set(rows) == {home, away, indexed}
        assert rows[away].name == "away"
        assert rows[indexed].state == AppState.PENDING

    # a new scheduler only knows its configured namespace
    async with scheduler(kube_env, namespace=other) as fresh:
        assert {row.app_id for row in await fresh.list()} == {away}
