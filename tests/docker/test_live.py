"""Submit, describe, logs and cancel against a real Docker engine, plus events, resync and cross-instance use."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiodocker
import anyio
import pytest

from asyncsched.schedulers.api import ListAppResponse, Stream
from asyncsched.schedulers.docker._client import ensure_network
from asyncsched.schedulers.docker_scheduler import DockerScheduler
from asyncsched.specs import AppState, BindMount
from asyncsched.testing import wait_for_state

from .conftest import NETWORK, SESSION, Engine
from .helpers import DropProxy, counting_client, lines, sh_app, submit_all

pytestmark = pytest.mark.docker


async def _container_exited(host: str, app_id: str, timeout: float = 30) -> None:
    """Poll the engine itself (not the scheduler) until the app's container exits."""
    label = f"asyncsched.io/app-id={app_id}"
    client = aiodocker.Docker(url=host)
    try:
        with anyio.fail_after(timeout):
            while True:
                found = await client.containers.list(
                    all=True, filters={"label": [label]}
                )
                if found and all(c["State"] == "exited" for c in found):
                    return
                await anyio.sleep(0.05)
    finally:
        await client.close()


async def test_echo_succeeds_and_is_listed(sched: DockerScheduler) -> None:
    app_id = await sched.submit(sh_app("echo foo"), {})
    desc = await sched.wait(app_id, timeout=30)
    assert desc is not None
    assert desc.app_id == app_id
    assert desc.state == AppState.SUCCEEDED
    assert len(desc.roles) == 1
    assert desc.roles[0].num_replicas == 1
    [role] = desc.roles_statuses
    [replica] = role.replicas
    assert replica.state == AppState.SUCCEEDED
    assert replica.exit_code == 0
    assert replica.hostname == f"{app_id}-worker-0"
    assert ListAppResponse(app_id, AppState.SUCCEEDED, name="app") in await sched.list()


async def test_logs_since_until_regex_tail(sched: DockerScheduler) -> None:
    start = datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=1)  # naive = UTC
    app_id = await sched.submit(sh_app("printf 'foo\\nbar\\n'"), {})
    await sched.wait(app_id, timeout=30)
    end = datetime.now(UTC) + timedelta(seconds=1)
    assert await lines(sched, app_id, since=start, until=end) == ["foo\n", "bar\n"]
    assert await lines(sched, app_id, regex="bar") == ["bar\n"]
    assert await lines(sched, app_id, since=end + timedelta(seconds=1)) == []
    assert await lines(sched, app_id, until=start - timedelta(seconds=5)) == []
    with anyio.fail_after(10):
        assert await lines(sched, app_id, should_tail=True) == ["foo\n", "bar\n"]


async def test_log_streams(sched: DockerScheduler) -> None:
    app_id = await sched.submit(sh_app("echo stdout; echo stderr >&2"), {})
    await sched.wait(app_id, timeout=30)
    assert set(await lines(sched, app_id)) == {"stdout\n", "stderr\n"}
    assert set(await lines(sched, app_id, streams=Stream.COMBINED)) == {
        "stdout\n",
        "stderr\n",
    }
    assert await lines(sched, app_id, streams=Stream.STDERR) == ["stderr\n"]
    assert await lines(sched, app_id, streams="stdout") == ["stdout\n"]


async def test_tail_follows_a_running_app(sched: DockerScheduler) -> None:
    # (a final line without "\n" is only in the non-followed log: the daemon
    # ends a follow before flushing it)
    app_id = await sched.submit(sh_app("echo a; sleep 1; printf 'b\\nc\\n'"), {})
    with anyio.fail_after(20):
        assert await lines(sched, app_id, should_tail=True) == ["a\n", "b\n", "c\n"]
    assert await lines(sched, app_id) == ["a\n", "b\n", "c\n"]


async def test_cancel_gives_cancelled_keeps_logs_delete_removes(
    sched: DockerScheduler, raw_docker: aiodocker.Docker
) -> None:
    app_id = await sched.submit(sh_app("echo started; sleep 10000"), {})
    await wait_for_state(sched, app_id, AppState.RUNNING, timeout=20)
    await sched.cancel(app_id)
    desc = await sched.wait(app_id, timeout=30)
    assert desc is not None
    assert desc.state == AppState.CANCELLED  # TorchX: FAILED
    assert desc.roles_statuses[0].replicas[0].state == AppState.CANCELLED
    assert await lines(sched, app_id) == ["started\n"]  # kept: logs still readable
    # still cancelled for a fresh process (the mark lives in the daemon)
    async with DockerScheduler(SESSION, network=NETWORK) as fresh:
        again = await fresh.describe(app_id)
        assert again is not None
        assert again.state == AppState.CANCELLED
        assert any(
            a.app_id == app_id and a.state == AppState.CANCELLED
            for a in await fresh.list()
        )
    await sched.delete(app_id)
    assert await sched.describe(app_id) is None
    left = await raw_docker.containers.list(
        all=True, filters=json.dumps({"label": [f"asyncsched.io/app-id={app_id}"]})
    )
    assert left == []


async def test_exit_code_and_retries(sched: DockerScheduler) -> None:
    failed, retried = await submit_all(
        sched, [sh_app("exit 3"), sh_app("exit 1", max_retries=1)]
    )
    desc = await sched.wait(failed, timeout=30)
    assert desc is not None
    assert desc.state == AppState.FAILED
    [replica] = desc.roles_statuses[0].replicas
    assert (replica.state, replica.exit_code) == (AppState.FAILED, 3)
    assert "exited with code 3" in desc.msg
    desc = await sched.wait(retried, timeout=30)
    assert desc is not None
    assert desc.state == AppState.FAILED
    assert desc.roles_statuses[0].replicas[0].num_restarts == 1


async def test_retry_that_succeeds_is_not_reported_failed_early(
    sched: DockerScheduler, tmp_path: Path
) -> None:
    marker = tmp_path / "ran-once"
    script = (
        "if [ -e /m/ran-once ]; then echo second; else touch /m/ran-once; exit 1; fi"
    )

    app = sh_app(script, max_retries=2, mounts=[BindMount(str(tmp_path), "/m")])
    app_id = await sched.submit(app, {})
    desc = await sched.wait(app_id, timeout=30)
    assert marker.exists()
    assert desc is not None
    assert desc.state == AppState.SUCCEEDED
    assert desc.roles_statuses[0].replicas[0].num_restarts == 1


async def test_replicas_reach_rank0_by_name_and_describe_right_after_submit(
    sched: DockerScheduler, tmp_path: Path
) -> None:
    # rank 0 stays up until replica 1 pinged it (at most 30 s)
    script = (
        'if [ "${replica_id}" = 0 ]; then i=0; '
        "while [ ! -e /m/pinged ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; "
        "else ping -c 1 -W 3 $TORCHX_RANK0_HOST && echo reached $TORCHX_RANK0_HOST"
        " && : > /m/pinged; fi"
    )
    app = sh_app(script, replicas=2, mounts=[BindMount(str(tmp_path), "/m")])
    app_id = await sched.submit(app, {})
    desc = await sched.describe(app_id)  # every container exists once submit returns
    assert desc is not None
    assert sorted(r.id for r in desc.roles_statuses[0].replicas) == [0, 1]
    desc = await sched.wait(app_id, timeout=30)
    assert desc is not None
    assert desc.state == AppState.SUCCEEDED, desc
    out = [line async for line in sched.log_iter(app_id, "worker", 1)]
    assert out[-1] == f"reached {app_id}-worker-0\n"


async def test_second_instance_describes_lists_logs_and_cancels(
    sched: DockerScheduler,
) -> None:
    app_id = await sched.submit(sh_app("echo hi; sleep 10000"), {})
    other = DockerScheduler("someone-else", network=NETWORK, stop_timeout=1)
    try:
        desc = await other.describe(app_id)
        assert desc is not None
        assert desc.roles_statuses[0].replicas[0].id == 0
        # list shows the apps of its own session only
        assert app_id not in {a.app_id for a in await other.list()}
        assert app_id in {a.app_id for a in await sched.list()}
        with anyio.fail_after(20):
            while await lines(other, app_id) != ["hi\n"]:
                await anyio.sleep(0.1)
        await other.cancel(app_id)
        desc = await sched.wait(app_id, timeout=30)  # the submitter sees it
        assert desc is not None
        assert desc.state == AppState.CANCELLED
    finally:
        await other.aclose()


async def test_wait_and_describe_make_no_api_calls(swept: Engine) -> None:
    docker_ready = swept
    async with counting_client(docker_ready.host) as (client, counter):
        sched = DockerScheduler(SESSION, client=client, network=NETWORK)
        try:
            app_id = await sched.submit(sh_app("sleep 1"), {})
            before = counter.count
            desc = await sched.describe(app_id)
            assert desc is not None
            assert desc.state.name != "SUCCEEDED"
            desc = await sched.wait(app_id, timeout=30)
            assert desc is not None
            assert desc.state == AppState.SUCCEEDED
            assert counter.count == before, counter.paths[before:]
            await sched.list()
            assert counter.count == before
        finally:
            await sched.aclose()
        assert not client.session.closed  # a caller-supplied client stays open


async def test_resync_after_the_events_stream_drops(
    swept: Engine, tmp_path: Path
) -> None:
    docker_ready = swept
    proxy = DropProxy(docker_ready.host, tmp_path / "proxy.sock")
    async with anyio.create_task_group() as tg:
        await proxy.serve(tg)
        sched = DockerScheduler(SESSION, docker_host=proxy.url, network=NETWORK)
        try:
            app_id = await sched.submit(sh_app("sleep 1"), {})
            proxy.refusing = True
            await proxy.drop()  # the stream is gone; the app finishes meanwhile
            await _container_exited(docker_ready.host, app_id)
            proxy.refusing = False
            desc = await sched.wait(app_id, timeout=30)  # direct calls meanwhile
            assert desc is not None
            assert desc.state == AppState.SUCCEEDED
            watcher = sched._watcher
            assert watcher is not None
            with anyio.fail_after(20):
                await watcher.wait_synced()
            assert watcher.resyncs >= 2
            desc = await sched.describe(app_id)  # from the resynced index
            assert desc is not None
            assert desc.state == AppState.SUCCEEDED
        finally:
            await sched.aclose()
            tg.cancel_scope.cancel()


async def test_network_creation_is_race_free(docker_ready: Engine) -> None:
    name = f"asyncsched-test-race-{os.getpid()}"
    clients = [aiodocker.Docker(url=docker_ready.host) for _ in range(4)]
    try:
        ids: list[str] = []

        async def ensure(client: aiodocker.Docker) -> None:
            ids.append(await ensure_network(client, name, docker_ready.host))

        async with anyio.create_task_group() as tg:
            for client in clients * 2:
                tg.start_soon(ensure, client)
        assert len(set(ids)) == 1  # everyone agrees on one network...
        nets = [n for n in await clients[0].networks.list() if n["Name"] == name]
        assert [n["Id"] for n in nets] == ids[:1]  # ...and the duplicates are gone
    finally:
        for net in await clients[0].networks.list():
            if net["Name"] == name:
                await (await clients[0].networks.get(net["Id"])).delete()
        for client in clients:
            await client.close()
