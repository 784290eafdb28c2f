"""A refused create names its real cause, read from the server's ``Status``.

The refusals are the fake API server's own (a missing namespace) or injected
with its fault hooks as a real server words them (``reason``, ``message``
and ``details``: kind, name, causes).
"""

from __future__ import annotations

from typing import Any

import pytest

from asyncsched.errors import SubmitError

from .fakeapi.env import KubeEnv
from .fakeapi.faults import Faults
from .helpers import JOB_APIS, cfg_for, make_app, scheduler

#: the group and plural each job API creates
CREATED = {"volcano": ("batch.volcano.sh", "jobs"), "indexed": ("batch", "jobs")}


def _faults(env: KubeEnv) -> Faults:
    if env.faults is None:
        pytest.skip("needs the fake server's fault hooks")
    return env.faults


async def _submit_error(env: KubeEnv, job_api: str, **cfg: Any) -> SubmitError:
    async with scheduler(env) as sched:
        with pytest.raises(SubmitError) as info:
            await sched.submit(make_app("echo x"), {**cfg_for(env, job_api), **cfg})
        # nothing is left behind
        assert await sched.list() == []
    return info.value


@pytest.mark.fake_api
@pytest.mark.parametrize("job_api", JOB_APIS)
async def test_missing_namespace_is_named_not_read_as_a_missing_crd(
    kube_env: KubeEnv, job_api: str
) -> None:
    if kube_env.server is None:
        pytest.skip("on the fake server the namespace surely does not exist")
    error = await _submit_error(kube_env, job_api, namespace="no-such-ns")
    assert "namespace 'no-such-ns' does not exist" in str(error)
    assert 'namespaces "no-such-ns" not found' in str(error)
    assert "Volcano" not in str(error)


@pytest.mark.fake_api
async def test_missing_volcano_crd_says_install_volcano(kube_env: KubeEnv) -> None:
    _faults(kube_env).fail_next(
        404,
        verb="create",
        group="batch.volcano.sh",
        reason="NotFound",
        message="the server could not find the requested resource",
    )
    error = await _submit_error(kube_env, "volcano")
    assert "install Volcano" in str(error)


def _forbidden(job_api: str, name: str, message: str, **extra: Any) -> dict[str, Any]:
    group, kind = CREATED[job_api]
    return {
        "reason": "Forbidden",
        "message": message,
        "details": {"name": name, "group": group, "kind": kind, **extra},
    }


@pytest.mark.fake_api
@pytest.mark.parametrize("job_api", JOB_APIS)
async def test_quota_exceeded_is_a_submit_error_naming_the_quota(
    kube_env: KubeEnv, job_api: str
) -> None:
    group, kind = CREATED[job_api]
    message = (
        f'{kind}.{group} "app-x" is forbidden: exceeded quota: compute, requested:'
        f" count/{kind}.{group}=1, used: count/{kind}.{group}=2,"
        f" limited: count/{kind}.{group}=2"
    )
    _faults(kube_env).fail_next(
        403, verb="create", group=group, **_forbidden(job_api, "app-x", message)
    )
    error = await _submit_error(kube_env, job_api)
    assert f"exceeds a ResourceQuota of namespace {kube_env.namespace!r}" in str(error)
    assert "exceeded quota: compute" in str(error)


@pytest.mark.fake_api
@pytest.mark.parametrize("job_api", JOB_APIS)
async def test_terminating_namespace_is_named(kube_env: KubeEnv, job_api: str) -> None:
    group, kind = CREATED[job_api]
    ns = kube_env.namespace
    cause = {
        "reason": "NamespaceTerminating",
        "message": f"namespace {ns} is being terminated",
        "field": "metadata.namespace",
    }
    message = (
        f'{kind}.{group} "app-x" is forbidden: unable to create new content in'
        f" namespace {ns} because it is being terminated"
    )
    _faults(kube_env).fail_next(
        403,
        verb="create",
        group=group,
        **_forbidden(job_api, "app-x", message, causes=[cause]),
    )
    error = await _submit_error(kube_env, job_api)
    assert f"namespace {ns!r} is being deleted" in str(error)


@pytest.mark.fake_api
async def test_rbac_refusal_is_a_submit_error_with_the_servers_words(
    kube_env: KubeEnv,
) -> None:
    ns = kube_env.namespace
    message = (
        'jobs.batch.volcano.sh is forbidden: User "alice" cannot create resource'
        f' "jobs" in API group "batch.volcano.sh" in the namespace "{ns}"'
    )
    _faults(kube_env).fail_next(
        403,
        verb="create",
        group="batch.volcano.sh",
        reason="Forbidden",
        message=message,
        details={"group": "batch.volcano.sh", "kind": "jobs"},
    )
    error = await _submit_error(kube_env, "volcano")
    assert "RBAC does not allow creating Job" in str(error)
    assert message in str(error)


@pytest.mark.fake_api
async def test_admission_policy_refusal_is_named(kube_env: KubeEnv) -> None:
    message = (
        'admission webhook "validation.gatekeeper.sh" denied the request:'
        " [must-have-team] you must provide labels: {team}"
    )
    _faults(kube_env).fail_next(
        403, verb="create", group="batch", reason="Forbidden", message=message
    )
    error = await _submit_error(kube_env, "indexed")
    assert "forbidden by the server's policy" in str(error)
    assert message in str(error)


@pytest.mark.fake_api
async def test_invalid_object_names_the_fields(kube_env: KubeEnv) -> None:
    causes = [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: -1: must be greater than or equal to 0",
            "field": "spec.backoffLimit",
        }
    ]
    _faults(kube_env).fail_next(
        422,
        verb="create",
        group="batch",
        reason="Invalid",
        message='Job.batch "app-x" is invalid: spec.backoffLimit: Invalid value: -1',
        details={"name": "app-x", "group": "batch", "kind": "Job", "causes": causes},
    )
    error = await _submit_error(kube_env, "indexed")
    assert "invalid (spec.backoffLimit: Invalid value: -1" in str(error)


@pytest.mark.fake_api
async def test_name_taken_is_named(kube_env: KubeEnv) -> None:
    _faults(kube_env).fail_next(
        409,
        verb="create",
        group="batch.volcano.sh",
        reason="AlreadyExists",
        message='jobs.batch.volcano.sh "app-x" already exists',
        details={"name": "app-x", "group": "batch.volcano.sh", "kind": "jobs"},
    )
    error = await _submit_error(kube_env, "volcano")
    assert f"already exists in namespace {kube_env.namespace!r}" in str(error)
