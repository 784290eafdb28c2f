"""Submission is paced by the API server, not by a fixed client-side guess.

Against the fake API server only (its rate limit answers ``429`` with a
``Retry-After`` past N requests per second, like API Priority and Fairness):
a permissive server lets the client's rate rise far past its start; a strict
one throttles, and the user still sees every submit succeed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from asyncsched.errors import InvalidArgumentError, SchedulerUnavailableError
from asyncsched.schedulers.kubernetes._client import KubeApi
from asyncsched.schedulers.kubernetes._config import load_api_client
from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler
from asyncsched.schedulers.shared.pacer import AdaptivePacer
from asyncsched.specs import CfgVal

from .fakeapi import FakeKubeServer
from .fakeapi.env import unique_namespace
from .helpers import make_app


@dataclass
class Fake:
    server: FakeKubeServer
    kubeconfig: str
    namespace: str

    def cfg(self) -> dict[str, CfgVal]:
        return {"namespace": self.namespace, "queue": "default"}

    def jobs(self) -> int:
        """Volcano Jobs stored in the namespace."""
        return sum(
            1
            for ((group, _, plural), ns, _) in self.server.store.objects
            if group == "batch.volcano.sh" and plural == "jobs" and ns == self.namespace
        )


@pytest.fixture
async def fake(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Fake]:
    namespace = unique_namespace(request.node.name)
    async with FakeKubeServer(bookmark_interval=0.5) as server:
        path = server.write_kubeconfig(tmp_path / "kubeconfig", namespace=namespace)
        server.create_namespace(namespace)
        yield Fake(server, str(path), namespace)


async def submit_many(sched: KubernetesScheduler, fake: Fake, n: int) -> list[str]:
    ids: list[str] = []

    async def one(i: int) -> None:
        ids.append(await sched.submit(make_app("true", name=f"p{i}"), fake.cfg()))

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
    return ids


def pacer_of(sched: KubernetesScheduler) -> AdaptivePacer:
    assert sched.api is not None
    assert sched.api.pacer is not None
    return sched.api.pacer


async def test_a_permissive_server_lets_the_rate_rise_past_300_per_second(
    fake: Fake,
) -> None:
    async with KubernetesScheduler(
        "pace", kubeconfig=fake.kubeconfig, namespace=fake.namespace
    ) as sched:
        ids = await submit_many(sched, fake, 400)
        pacer = pacer_of(sched)
    assert len(set(ids)) == 400
    assert fake.jobs() == 400
    assert pacer.throttled_count == 0
    assert pacer.qps >= 300  # started at 50: the server accepted every request
    assert pacer.qps <= pacer.max_qps == 1000  # the client-side safety net


async def test_the_client_side_ceiling_holds_on_a_permissive_server(
    fake: Fake,
) -> None:
    async with KubernetesScheduler(
        "pace", kubeconfig=fake.kubeconfig, namespace=fake.namespace, max_qps=120
    ) as sched:
        await submit_many(sched, fake, 200)
        pacer = pacer_of(sched)
    assert pacer.qps == 120
    assert fake.jobs() == 200


async def test_a_strict_server_throttles_and_every_submit_still_succeeds(
    fake: Fake,
) -> None:
    fake.server.faults.limit_rate(40, retry_after=1)
    async with KubernetesScheduler(
        "pace", kubeconfig=fake.kubeconfig, namespace=fake.namespace, qps=200
    ) as sched:
        with anyio.fail_after(90):
            ids = await submit_many(sched, fake, 300)
        pacer = pacer_of(sched)
        listed = await sched.list()
    throttled = [r for r in fake.server.requests.client_requests() if r.throttled]
    assert throttled  # the server did push back ...
    assert pacer.throttled_count >= 1
    assert pacer.qps < 200  # ... and the client slowed down
    assert len(set(ids)) == 300  # ... yet no submit failed
    assert fake.jobs() == 300
    assert {a.app_id for a in listed} == set(ids)


async def test_retry_after_holds_every_request_until_it_elapses(fake: Fake) -> None:
    retry_after = 3
    fake.server.faults.limit_rate(30, retry_after=retry_after)
    # A client rate near the server's keeps few requests on the wire when the
    # first 429 is answered: the burst caps the bucket, not what is in flight.
    # At qps=300 the client sent ~all 80 creates before the server (in this
    # process, loaded) had looked at the 31st, and it reached the last of
    # them over a second after its first 429, once its window let them in.
    async with KubernetesScheduler(
        "pace", kubeconfig=fake.kubeconfig, namespace=fake.namespace, qps=20, burst=5
    ) as sched:
        await sched.list()  # caches up (their watches are exempt anyway)
        with anyio.fail_after(90):
            ids = await submit_many(sched, fake, 80)
    assert len(set(ids)) == 80
    log = [r for r in fake.server.requests.client_requests() if r.verb != "watch"]
    first = next(r.at for r in log if r.throttled)
    # requests already on their way when the 429 was answered may still land
    # just after it; then nothing until the Retry-After has elapsed
    quiet = [r for r in log if first + 0.5 < r.at < first + retry_after - 0.1]
    assert quiet == []
    assert any(r.at >= first + retry_after - 0.1 for r in log)


async def test_a_server_that_never_relents_fails_the_request_after_its_budget(
    fake: Fake,
) -> None:
    fake.server.faults.limit_rate(0, retry_after=0)
    api = KubeApi(await load_api_client(kubeconfig=fake.kubeconfig), max_throttled=3)
    try:
        with pytest.raises(SchedulerUnavailableError, match="kept throttling"):
            await api.request("GET", f"/api/v1/namespaces/{fake.namespace}/pods")
    finally:
        await api.aclose()
    assert fake.server.requests.count("list", "pods") == 4  # 1 + 3 retries


async def test_a_503_naming_retry_after_is_a_throttle_not_an_error(
    fake: Fake,
) -> None:
    # more answers than the 5 retries of errors: only the throttle budget fits
    fake.server.faults.fail_next(503, verb="create", retry_after=0, times=8)
    async with KubernetesScheduler(
        "pace", kubeconfig=fake.kubeconfig, namespace=fake.namespace
    ) as sched:
        await sched.submit(make_app("true"), fake.cfg())
        pacer = pacer_of(sched)
    assert fake.server.faults.rules == []
    assert pacer.throttled_count == 8
    assert fake.jobs() == 1


@pytest.mark.parametrize(
    ("max_hold", "least", "most"), [(0, 0.0, 1.5), (0.5, 0.4, 3.0)]
)
async def test_a_long_retry_after_holds_the_other_requests_max_hold_seconds(
    fake: Fake, max_hold: float, least: float, most: float
) -> None:
    fake.server.faults.fail_next(429, verb="create", retry_after=30)
    async with KubernetesScheduler(
        "pace", kubeconfig=fake.kubeconfig, namespace=fake.namespace, max_hold=max_hold
    ) as sched:
        async with anyio.create_task_group() as tg:
            tg.start_soon(sched.submit, make_app("true"), fake.cfg())
            with anyio.fail_after(10):
                while not fake.server.requests.count("create", "jobs"):
                    await anyio.sleep(0.01)
            began = anyio.current_time()
            # a GET: held by the throttle, max_hold seconds and no more
            assert await sched.describe(f"{fake.namespace}:nope") is None
            held = anyio.current_time() - began
            tg.cancel_scope.cancel()
    assert least <= held <= most


async def test_a_negative_max_hold_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="max_hold"):
        KubernetesScheduler("pace", max_hold=-1)
