"""Kubernetes events resume from their cursor in a new process's scheduler.

The cursor holds the namespaces' resourceVersions: a new scheduler watches
from them and the server replays what changed meanwhile. A version the
server no longer has (410) yields RESYNC, then CURRENT of every app, and
the cursors after it resume natively again.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from asyncsched import AppEvent, EventKind
from asyncsched.schedulers.kit import decode_cursor
from asyncsched.specs import AppState

from .fakeapi.env import KubeEnv
from .helpers import app_ended, cfg_for, events_until, make_app, scheduler

pytestmark = [pytest.mark.usefixtures("kube_controller"), pytest.mark.fake_api]


def _failed_with(app_id: str, code: int) -> Callable[[AppEvent], bool]:
    """The app's own FAILED change, its replica's exit code known (the Jobs'
    and the pods' watches are two streams: the app's end waits for the pods)."""
    return lambda e: (
        e.app_id == app_id
        and e.kind == EventKind.APP
        and e.state == AppState.FAILED
        and any(r.exit_code == code for r in e.replicas)
    )


async def test_a_new_scheduler_resumes_from_a_cursor_with_exactly_the_later_changes(
    kube_env: KubeEnv,
) -> None:
    cfg = cfg_for(kube_env, "volcano")
    async with scheduler(kube_env) as sched:
        first = await sched.submit(make_app("exit 0", name="first"), cfg)
        seen = await events_until(sched, None, app_ended(first))
        cursor = seen[-1].cursor
    # changes made while no reader exists
    async with scheduler(kube_env) as sched:
        second = await sched.submit(make_app("exit 3", name="second"), cfg)
        final = await sched.wait(second, timeout=30)
        assert final is not None
        assert final.state == AppState.FAILED
    # a new scheduler (as a new process would) resumes from the cursor
    async with scheduler(kube_env) as sched:
        later = await events_until(sched, cursor, _failed_with(second, 3))
    assert {e.app_id for e in later} == {second}, later
    kinds = [e.kind for e in later]
    assert EventKind.RESYNC not in kinds
    assert EventKind.CURRENT not in kinds
    assert kinds[0] == EventKind.SUBMITTED
    assert any(e.kind == EventKind.APP and e.state == AppState.FAILED for e in later)
    codes = [e.replica.exit_code for e in later if e.replica is not None]
    assert 3 in codes, later


async def test_a_cursor_the_server_forgot_gives_resync_then_current_then_resumes(
    kube_env: KubeEnv,
) -> None:
    cfg = cfg_for(kube_env, "volcano")
    async with scheduler(kube_env) as sched:
        first = await sched.submit(make_app("exit 0", name="first"), cfg)
        cursor = (await events_until(sched, None, app_ended(first)))[-1].cursor
        second = await sched.submit(make_app("exit 0", name="second"), cfg)
        await sched.wait(second, timeout=30)
    kube_env.fake_server().compact()  # the cursor's versions: 410 Expired
    async with scheduler(kube_env) as sched:
        got = await events_until(
            sched, cursor, lambda e: e.kind == EventKind.CURRENT and e.app_id == second
        )
    assert got[0].kind == EventKind.RESYNC
    current = {e.app_id: e.state for e in got if e.kind == EventKind.CURRENT}
    assert current == {first: AppState.SUCCEEDED, second: AppState.SUCCEEDED}
    # a reader that saved the RESYNC's cursor and stopped before the
    # CURRENT events gets the RESYNC and all of them again
    async with scheduler(kube_env) as sched:
        again = await events_until(
            sched,
            got[0].cursor,
            lambda e: e.kind == EventKind.CURRENT and e.app_id == second,
        )
    assert again[0].kind == EventKind.RESYNC
    assert {e.app_id for e in again if e.kind == EventKind.CURRENT} == {first, second}
    # the cursors after a RESYNC are the server's versions again
    async with scheduler(kube_env) as sched:
        third = await sched.submit(make_app("exit 0", name="third"), cfg)
        later = await events_until(sched, got[-1].cursor, app_ended(third))
    assert {e.app_id for e in later} == {third}, later


async def test_a_watch_answered_410_while_following_yields_resync_then_current(
    kube_env: KubeEnv,
) -> None:
    cfg = cfg_for(kube_env, "volcano")
    async with scheduler(kube_env, watch_timeout=1) as sched:
        app_id = await sched.submit(make_app("exit 0"), cfg)
        got: list[AppEvent] = []
        expired = False
        with anyio.fail_after(30):
            async with sched.events() as stream:
                async for event in stream:
                    got.append(event)
                    if event.app_id == app_id and event.terminal and not expired:
                        # the next reconnect of a watch is answered 410
                        kube_env.fake_server().faults.expire_next_watch()
                        expired = True
                    if event.kind == EventKind.CURRENT and any(
                        e.kind == EventKind.RESYNC for e in got
                    ):
                        break
    kinds = [e.kind for e in got]
    at = kinds.index(EventKind.RESYNC)
    assert got[at + 1].kind == EventKind.CURRENT
    assert got[at + 1].app_id == app_id
    assert got[at + 1].state == AppState.SUCCEEDED


async def test_a_restarted_server_still_serving_the_cursor_gives_the_later_changes_without_resync(
    kube_env: KubeEnv,
) -> None:
    cfg = cfg_for(kube_env, "volcano")
    async with scheduler(kube_env) as sched:
        first = await sched.submit(make_app("exit 0", name="first"), cfg)
        await sched.wait(first, timeout=30)
        # one app: its CURRENT ends the burst; the cursor holds the versions
        # of the lists, the newest version there is
        (current,) = await events_until(sched, None, lambda e: e.app_id == first)
    server = kube_env.fake_server()
    versions = decode_cursor(current.cursor, "kubernetes")["ns"][kube_env.namespace]
    assert versions == [str(server.store.rv)] * 3
    # nothing changed since: the new watch cache starts at those versions
    # (etcd moves only through API servers: a single one's restart leaves it)
    await kube_env.restart_api_server()
    async with scheduler(kube_env) as sched:
        second = await sched.submit(make_app("exit 3", name="second"), cfg)
        got = await events_until(sched, current.cursor, _failed_with(second, 3))
    # the watches from the cursor were served: the changes since, no RESYNC
    assert [e.kind for e in got if e.app_id != second] == []
    assert got[0].kind == EventKind.SUBMITTED, got
