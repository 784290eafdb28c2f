"""Kubernetes workspaces on a real registry: the manifest names what was pushed.

The local engine builds and pushes the workspace (``image_repo`` on a real
``docker-registry``); the Job goes to the fake API server over HTTP. The
image in the created manifest must be exactly the tag the registry holds,
and a push that fails creates no Job. (Here, not in tests/kubernetes: it
needs the Docker engine and registry fixtures of this package.)
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiodocker
import pytest
from kubernetes_asyncio import client, config

from asyncsched.errors import SchedulerError
from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler
from asyncsched.specs import AppDef, Resource, Role

from ..kubernetes.fakeapi import FakeKubeServer
from .conftest import SESSION, SESSION_LABEL, TEST_IMAGE, Engine
from .registry import Registry, free_port

pytestmark = pytest.mark.docker


@pytest.fixture
async def kube(tmp_path: Path) -> AsyncIterator[tuple[str, str]]:
    """(kubeconfig path, namespace) of a fresh fake API server."""
    namespace = f"ws-{secrets.token_hex(3)}"
    async with FakeKubeServer() as server:
        path = server.write_kubeconfig(tmp_path / "kubeconfig", namespace=namespace)
        server.create_namespace(namespace)
        yield str(path), namespace


def _app() -> AppDef:
    return AppDef(
        "wsapp",
        roles=[
            Role(
                "worker",
                image=TEST_IMAGE,
                entrypoint="cat",
                args=["ws.txt"],
                resource=Resource(cpu=1, gpu=0, memMB=64),
            )
        ],
    )


async def _job_images(kubeconfig: str, namespace: str) -> list[str]:
    api = await config.new_client_from_config(config_file=kubeconfig)
    async with api:
        jobs = await client.BatchV1Api(api).list_namespaced_job(namespace)
    return [c.image for job in jobs.items for c in job.spec.template.spec.containers]


def _cfg(namespace: str, image_repo: str) -> dict[str, Any]:
    return {
        "namespace": namespace,
        "job_api": "indexed",
        "image_repo": image_repo,
        "quiet": True,
    }


async def test_manifest_references_exactly_the_pushed_tag(
    swept: Engine,
    registry: Registry,
    kube: tuple[str, str],
    tmp_path: Path,
) -> None:
    kubeconfig, namespace = kube
    name = f"k8s-{secrets.token_hex(4)}"
    repo = f"{registry.address}/{name}"
    (tmp_path / "ws.txt").write_text("from-the-workspace\n")
    async with KubernetesScheduler(
        SESSION, kubeconfig=kubeconfig, namespace=namespace
    ) as sched:
        dryrun = await sched.submit_dryrun(_app(), _cfg(namespace, repo))
        assert dryrun.request.images_to_push == {}  # no workspace: nothing to push
        app_id = await sched.submit(
            _app(), _cfg(namespace, repo), workspace=str(tmp_path)
        )
        assert app_id.startswith(f"{namespace}:")
    [image] = await _job_images(kubeconfig, namespace)
    assert image.startswith(f"{repo}:")
    tag = image.rpartition(":")[2]
    assert await registry.tags(name) == [tag]
    assert name in await registry.catalog()
    async with aiodocker.Docker(url=swept.host) as docker:
        assert (await docker.images.inspect(image))["Id"] == f"sha256:{tag}"


async def test_failed_push_creates_no_job(
    swept: Engine,
    kube: tuple[str, str],
    tmp_path: Path,
) -> None:
    kubeconfig, namespace = kube
    address = f"127.0.0.1:{free_port()}"
    (tmp_path / "ws.txt").write_text("x\n")
    async with KubernetesScheduler(
        SESSION, kubeconfig=kubeconfig, namespace=namespace
    ) as sched:
        with pytest.raises(SchedulerError) as info:
            await sched.submit(
                _app(), _cfg(namespace, f"{address}/nowhere"), workspace=str(tmp_path)
            )
        assert address in str(info.value)
        assert await sched.list() == []
    assert await _job_images(kubeconfig, namespace) == []
    async with aiodocker.Docker(url=swept.host) as docker:  # kept for the next try
        built = await docker.images.list(filters={"label": [SESSION_LABEL]})
    assert len(built) == 1
