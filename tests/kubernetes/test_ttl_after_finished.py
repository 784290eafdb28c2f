"""``ttl_seconds_after_finished``: the cluster deletes a finished job for us.

The option sets ``ttlSecondsAfterFinished`` on each Indexed Job and on the
Volcano Job; a bad value is refused before anything is launched.
"""

from __future__ import annotations

import pytest

from asyncsched.errors import InvalidRunConfigException
from asyncsched.schedulers.kubernetes import KubernetesScheduler
from asyncsched.specs import AppDef, CfgVal, Role


def _app() -> AppDef:
    return AppDef(
        "ttl",
        roles=[
            Role("a", image="busybox", entrypoint="true", num_replicas=2),
            Role("b", image="busybox", entrypoint="true"),
        ],
    )


@pytest.mark.parametrize("job_api", ["volcano", "indexed"])
async def test_the_option_sets_ttl_seconds_after_finished_on_every_job(
    job_api: str,
) -> None:
    async with KubernetesScheduler("ttl", namespace="ns") as sched:
        cfg: dict[str, CfgVal] = {
            "queue": "q",
            "job_api": job_api,
            "ttl_seconds_after_finished": 120,
        }
        info = await sched.submit_dryrun(_app(), cfg)
        jobs = [m for m in info.request.manifests if m["kind"] == "Job"]
        assert jobs
        assert [j["spec"]["ttlSecondsAfterFinished"] for j in jobs] == [120] * len(jobs)
        info = await sched.submit_dryrun(_app(), {"queue": "q", "job_api": job_api})
        jobs = [m for m in info.request.manifests if m["kind"] == "Job"]
        assert all("ttlSecondsAfterFinished" not in j["spec"] for j in jobs)


async def test_a_negative_ttl_is_refused_before_launch() -> None:
    async with KubernetesScheduler("ttl", namespace="ns") as sched:
        with pytest.raises(InvalidRunConfigException, match="ttl_seconds_after"):
            await sched.submit_dryrun(
                _app(), {"queue": "q", "ttl_seconds_after_finished": -1}
            )
