"""Submitting a rendered job: images, network, create, start; all or nothing.

Example:
    >>> async def main(conn: DockerConnection, index: ContainerIndex) -> None:
    ...     submitter = Submitter(conn, index, network="asyncsched")
    ...     app_id = await submitter.schedule(job, roles=["trainer"])  # doctest: +SKIP
"""

from __future__ import annotations

import builtins
import copy
import functools
import logging
import re

import aiodocker
import anyio
from aiodocker.exceptions import DockerError

from asyncsched.errors import AsyncschedError, SchedulerError, SpecError, SubmitError
from asyncsched.schedulers.kit import all_or_nothing
from asyncsched.schedulers.shared.docker_errors import (
    docker_errors,
    is_conflict,
    is_not_found,
)

from ._client import ensure_image, ensure_network
from ._connection import DockerConnection, bind
from ._events import list_records
from ._render import PULL_POLICIES, DockerContainer, DockerJob
from ._state import ContainerIndex, ContainerRecord

__all__ = ("UNDO_TIMEOUT", "Submitter")

logger = logging.getLogger(__name__)

#: seconds a failed submit may spend removing what it created (shielded)
UNDO_TIMEOUT = 60.0

#: what runc (through Docker) says when a container's command does not exist
_MISSING_EXECUTABLE = re.compile(
    r"executable file not found|exec: .*no such file or directory", re.IGNORECASE
)


class Submitter:
    """Creates and starts the containers of jobs; removes those of apps.

    Args:
        conn: The daemon and the API slots.
        index: Where created containers are filed at once.
        network: The scheduler's network (its id is remembered).
    """

    def __init__(
        self, conn: DockerConnection, index: ContainerIndex, *, network: str
    ) -> None:
        self._conn, self._index, self._network = conn, index, network
        self._network_id: str | None = None
        self._network_lock = anyio.Lock()

    async def schedule(self, job: DockerJob, roles: builtins.list[str]) -> str:
        """Create then start every container of ``job``; all or nothing.

        ``roles`` are the AppDef's role names (to name a missing command).

        Raises:
            SubmitError: an image, mount, name or daemon problem (named).
            SpecError: a role's entrypoint is not in its image.
            SchedulerUnavailableError: the daemon cannot be reached.
        """
        if job.image_pull_policy not in PULL_POLICIES:
            raise SubmitError(f"unknown image_pull_policy {job.image_pull_policy!r}")
        conn, host = self._conn, self._conn.host
        docker = conn.docker()
        await conn.run_all(
            [
                bind(ensure_image, docker, image, job.image_pull_policy, host)
                for image in job.images
            ]
        )
        existing = self._index.app(job.app_id)
        if existing is not None:
            raise SubmitError(
                f"app id {job.app_id!r} is already scheduled (containers "
                f"{[r.name for r in existing.records]} already in use); dry-run again "
                "for a new app id"
            )
        network_id = await self._ensure_network(job.network)
        created: builtins.list[str] = []
        # by label too: a create cancelled in flight may still have happened
        # (an app id is fresh, so the label is ours alone); if the undo takes
        # too long, delete(app_id) removes what is left
        async with all_or_nothing(job.app_id, undo_within=UNDO_TIMEOUT) as steps:
            steps.add(
                functools.partial(self.remove, job.app_id, created),
                name=f"the containers (delete({job.app_id!r}) removes them)",
            )
            await conn.run_all(
                [
                    bind(self._create, docker, job, c, network_id, created)
                    for c in job.containers
                ]
            )
            await conn.run_all(
                [bind(self._start, docker, cid, roles) for cid in created]
            )
        return job.app_id

    async def _ensure_network(self, name: str) -> str:
        async with self._network_lock:
            if self._network_id is None or name != self._network:
                async with self._conn.slot():
                    network_id = await ensure_network(
                        self._conn.docker(), name, self._conn.host
                    )
                if name != self._network:
                    return network_id
                self._network_id = network_id
            return self._network_id

    async def _create(
        self,
        docker: aiodocker.Docker,
        job: DockerJob,
        container: DockerContainer,
        network_id: str,
        created: builtins.list[str],
    ) -> None:
        body = copy.deepcopy(container.body)
        host_config = body.setdefault("HostConfig", {})
        if host_config.get("NetworkMode") == job.network:
            host_config["NetworkMode"] = network_id
        try:
            with docker_errors(
                f"create container {container.name!r}", self._conn.host, submit=True
            ):
                result = await docker.containers.create(body, name=container.name)
        except SubmitError as exc:
            cause = exc.__cause__
            if is_not_found(cause) and "network" in str(cause).lower():
                self._network_id = None  # removed behind our back: recreate next time
            raise _explain_create_error(exc, container, job) from cause
        created.append(result.id)
        record = ContainerRecord.from_labels(
            result.id,
            container.name,
            container.image,
            body.get("Labels") or {},
            "created",
        )
        if record is not None and result.id not in self._index.records:
            self._index.upsert(record)

    async def _start(
        self, docker: aiodocker.Docker, container_id: str, roles: builtins.list[str]
    ) -> None:
        """Start one container; an entrypoint the engine cannot find in the
        image is a SpecError on the role's entrypoint (as on local)."""
        try:
            with docker_errors("start a container", self._conn.host, submit=True):
                await docker.containers.container(container_id).start()
        except SubmitError as exc:
            record = self._index.records.get(container_id)
            cause = exc.__cause__
            if (
                record is None
                or record.role not in roles
                or not isinstance(cause, DockerError)
                or not _MISSING_EXECUTABLE.search(cause.message)
            ):
                raise
            raise SpecError(
                f"roles[{roles.index(record.role)}].entrypoint",
                f"the command was not found in image {record.image!r}: {cause.message}",
            ) from cause

    async def remove(self, app_id: str, known: builtins.list[str]) -> None:
        """Force-remove the app's containers: the known ids plus any found by label."""
        docker = self._conn.docker()
        ids = dict.fromkeys(known)
        try:
            async with self._conn.slot():
                found = await list_records(docker, self._conn.host, app_id)
        except AsyncschedError as exc:  # the daemon is gone: nothing more to find
            logger.warning("cannot list the containers of %s: %s", app_id, exc)
        else:
            ids.update(dict.fromkeys(r.id for r in found))
        await self._conn.run_all(
            [bind(self._remove_one, docker, cid) for cid in ids], fail_fast=False
        )

    async def _remove_one(self, docker: aiodocker.Docker, container_id: str) -> None:
        try:
            with docker_errors("remove a container", self._conn.host):
                await docker.containers.container(container_id).delete(
                    force=True, v=True
                )
        except SchedulerError as exc:
            if not is_not_found(exc.__cause__) and not is_conflict(exc.__cause__):
                raise
        self._index.remove(container_id)


def _explain_create_error(
    exc: SubmitError, container: DockerContainer, job: DockerJob
) -> SubmitError:
    cause = exc.__cause__
    if not isinstance(cause, DockerError):
        return exc
    message = cause.message
    if cause.status == 409:
        return SubmitError(
            f"container name {container.name!r} is already in use (app id "
            f"{job.app_id!r} was already scheduled?): {message}"
        )
    if cause.status == 404 and "image" in message.lower():
        return SubmitError(
            f"image {container.image!r} of {container.name!r}: {message}"
        )
    if cause.status == 404 and "network" in message.lower():
        return SubmitError(f"network {job.network!r} of {container.name!r}: {message}")
    if "mount" in message.lower() or "volume" in message.lower():
        return SubmitError(f"invalid mount for {container.name!r}: {message}")
    return exc
