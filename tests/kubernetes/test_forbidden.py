"""A 403 names its cause: RBAC, quota, a terminating namespace or a policy.

The cause is read from the server's ``Status`` (its message and
``details.causes``); only an RBAC refusal points to the RBAC Role.
"""

from __future__ import annotations

import pytest

from asyncsched.errors import SchedulerUnavailableError

from .fakeapi.env import KubeEnv
from .helpers import scheduler

CASES = {
    "rbac": (
        'pods is forbidden: User "u" cannot list resource "pods" in API group ""',
        "RBAC",
    ),
    "terminating": (
        "unable to create new content in namespace x because it is being terminated",
        "the namespace is being terminated",
    ),
    "quota": (
        'pods "p" is forbidden: exceeded quota: compute, requested: cpu=2',
        "quota exceeded",
    ),
    "webhook": (
        'admission webhook "validate.kyverno.svc" denied the request: no latest',
        "admission webhook",
    ),
}


@pytest.mark.fake_api
@pytest.mark.parametrize("case", sorted(CASES))
async def test_a_403_on_a_list_names_its_cause(kube_env: KubeEnv, case: str) -> None:
    message, expected = CASES[case]
    faults = kube_env.fake_server().faults
    faults.fail_next(403, verb="list", resource="pods", message=message)
    async with scheduler(kube_env) as sched:
        with pytest.raises(SchedulerUnavailableError) as info:
            await sched.list()  # starts the caches, which list pods
    text = str(info.value)
    assert expected in text
    assert message in text
    assert ("RBAC Role" in text) == (case == "rbac")
