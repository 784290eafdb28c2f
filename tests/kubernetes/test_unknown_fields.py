"""A field the server does not know is not dropped in silence.

From Kubernetes 1.25 a create is sent with ``fieldValidation=Strict`` and an
unknown field refuses the submit; an older server (1.20 has no field
validation) is sent no such parameter; ``Warning`` headers of any server
become :class:`~asyncsched.errors.ServerWarning` warnings.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from asyncsched.errors import ServerWarning, SubmitError
from asyncsched.schedulers.kubernetes._warnings import parse_warnings
from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler
from asyncsched.specs import AppDef, CfgVal

from .fakeapi import FakeKubeServer
from .helpers import make_app

NS = "team"


def _app_with_typo() -> AppDef:
    app = make_app("echo hi")
    # "nodeSelecter": a typo the server would drop, so would the node choice
    app.roles[0].metadata["kubernetes"] = {"spec": {"nodeSelecter": {"gpu": "a100"}}}
    return app


@pytest.fixture(params=[(1, 31), (1, 25)], ids=["1.31", "1.25"])
async def new_server(request: pytest.FixtureRequest) -> AsyncIterator[FakeKubeServer]:
    async with FakeKubeServer() as server:
        server.version = request.param
        server.create_namespace(NS)
        yield server


@pytest.fixture
async def old_server() -> AsyncIterator[FakeKubeServer]:
    async with FakeKubeServer() as server:
        server.version = (1, 20)
        server.create_namespace(NS)
        yield server


def _scheduler(server: FakeKubeServer, tmp_path: Path) -> KubernetesScheduler:
    path = server.write_kubeconfig(tmp_path / "kubeconfig", namespace=NS)
    return KubernetesScheduler("k8s-test", kubeconfig=str(path), namespace=NS)


@pytest.mark.parametrize("job_api", ["volcano", "indexed"])
async def test_an_unknown_field_refuses_the_submit_on_a_server_that_validates(
    new_server: FakeKubeServer, tmp_path: Path, job_api: str
) -> None:
    cfg = {"namespace": NS, "queue": "default", "job_api": job_api}
    async with _scheduler(new_server, tmp_path) as sched:
        with pytest.raises(SubmitError, match=r"unknown field.*nodeSelecter"):
            await sched.submit(_app_with_typo(), cfg)
        assert await sched.list() == []  # nothing was left behind
        await sched.submit(make_app("echo ok"), cfg)  # a valid app still goes


async def test_the_dry_run_check_refuses_an_unknown_field_too(
    new_server: FakeKubeServer, tmp_path: Path
) -> None:
    cfg: dict[str, CfgVal] = {
        "namespace": NS,
        "queue": "default",
        "validate_spec": True,
    }
    async with _scheduler(new_server, tmp_path) as sched:
        with pytest.raises(SubmitError, match=r"nodeSelecter"):
            await sched.submit_dryrun(_app_with_typo(), cfg)


async def test_an_old_server_is_sent_no_field_validation_and_still_runs_the_app(
    old_server: FakeKubeServer, tmp_path: Path
) -> None:
    cfg = {"namespace": NS, "queue": "default"}
    async with _scheduler(old_server, tmp_path) as sched:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # and it sends no Warning either
            app_id = await sched.submit(_app_with_typo(), cfg)
        assert await sched.describe(app_id) is not None


async def test_a_server_warning_becomes_a_server_warning(
    new_server: FakeKubeServer, tmp_path: Path
) -> None:
    # an object that is not sent with Strict (a status patch) still warns
    # under the server's default mode: the warning reaches the caller
    cfg = {"namespace": NS, "queue": "default"}
    async with _scheduler(new_server, tmp_path) as sched:
        app_id = await sched.submit(make_app("echo hi"), cfg)
        assert sched.api is not None
        name = app_id.split(":", 1)[1]
        with pytest.warns(ServerWarning, match=r'unknown field "spec\.bogus"'):
            await sched.api.request(
                "PATCH",
                f"/apis/batch.volcano.sh/v1alpha1/namespaces/{NS}/jobs/{name}",
                body={"spec": {"bogus": 1}},
                content_type="application/merge-patch+json",
            )


def test_warning_headers_are_read_as_the_rfc_writes_them() -> None:
    assert parse_warnings(
        [
            '299 - "unknown field \\"spec.foo\\""',
            '299 - "a", 299 - "b"',
            "not in the usual form",
        ]
    ) == ['unknown field "spec.foo"', "a", "b", "not in the usual form"]
