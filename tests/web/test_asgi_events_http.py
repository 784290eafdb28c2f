"""The web example's ``GET /events``: ids, ``retry:``, keep-alives, Last-Event-ID."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2

from tests.web.conftest import serving

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


@dataclass
class Frame:
    """One server-sent event, or a comment / a bare ``retry:`` field."""

    event: str = "message"
    data: Any = None
    id: str | None = None
    retry: int | None = None
    comments: list[str] = field(default_factory=list)


async def frames(response: httpx2.Response) -> AsyncIterator[Frame]:
    """Every frame of an SSE response, fields as the SSE format defines them."""
    frame = Frame()
    async for line in response.aiter_lines():
        if not line:
            yield frame
            frame = Frame()
        elif line.startswith(":"):
            frame.comments.append(line[1:].strip())
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                frame.event = value
            elif name == "data":
                frame.data = json.loads(value)
            elif name == "id":
                frame.id = value
            elif name == "retry":
                frame.retry = int(value)


async def until_final(
    client: httpx2.AsyncClient, app_id: str, headers: dict[str, str] | None = None
) -> list[Frame]:
    """The frames of ``/events`` up to the terminal event of ``app_id``."""
    got: list[Frame] = []
    with anyio.fail_after(30):
        async with client.stream("GET", "/events", headers=headers) as response:
            assert response.status_code == 200, await response.aread()
            async for frame in frames(response):
                got.append(frame)
                data = frame.data or {}
                if data.get("app_id") == app_id and data.get("state") in TERMINAL:
                    return got
    raise AssertionError(f"the stream ended before {app_id} did")


async def submit(client: httpx2.AsyncClient, script: str) -> str:
    created = await client.post("/apps", json={"cmd": ["sh", "-c", script]})
    assert created.status_code == 201, created.text
    return str(created.json()["app_id"])


async def test_events_carry_cursor_ids_and_resume_after_last_event_id(
    client: httpx2.AsyncClient,
) -> None:
    first = await submit(client, "exit 0")
    before = await until_final(client, first)
    assert before[0].retry == 1000  # the stream tells the browser how soon to reconnect
    events = [f for f in before if f.data is not None]
    assert all(f.id == f.data["cursor"] for f in events)
    assert {f.event for f in events} <= {"current", "submitted", "app", "replica"}
    last_id = events[-1].id
    assert last_id

    later = await submit(client, "exit 2")
    async with client.stream("GET", f"/apps/{later}/events") as done:
        async for _ in frames(done):
            pass  # it ends once the app is over: the change happened unread
    resumed = await until_final(client, later, {"Last-Event-ID": last_id})

    def key(f: Frame) -> tuple[object, ...]:
        return (
            f.id,
            f.event,
            f.data["app_id"],
            f.data.get("role"),
            f.data.get("replica_id"),
        )

    again = [f for f in resumed if f.data is not None]
    assert not {key(f) for f in again} & {key(f) for f in events}  # none twice
    assert all(f.event not in ("current", "resync") for f in again)  # resumed
    kinds = [f.event for f in again if f.data["app_id"] == later]
    assert kinds[0] == "submitted"
    assert resumed[-1].data["state"] == "FAILED"


async def test_app_status_stream_sends_ids_and_ends_at_once_when_resumed_after_the_end(
    client: httpx2.AsyncClient,
) -> None:
    app_id = await submit(client, "exit 0")
    async with client.stream("GET", f"/apps/{app_id}/events") as response:
        got = [f async for f in frames(response)]
    assert got[0].retry == 1000
    statuses = [f for f in got if f.data is not None]
    assert all(f.id for f in statuses)
    assert statuses[-1].event == "end"
    headers = {"Last-Event-ID": str(statuses[-1].id)}
    with anyio.fail_after(10):
        async with client.stream(
            "GET", f"/apps/{app_id}/events", headers=headers
        ) as again:
            resumed = [f async for f in frames(again) if f.data is not None]
    assert [(f.event, f.data["state"]) for f in resumed] == [("end", "SUCCEEDED")]


async def test_a_silent_stream_sends_keep_alives_and_a_bad_cursor_answers_400(
    tmp_path: Path,
) -> None:
    env = {"ASYNCSCHED_WEB_SSE_KEEPALIVE": "0.2"}
    with serving(tmp_path, env=env) as service:
        async with httpx2.AsyncClient(base_url=service.url, timeout=30) as client:
            bad = await client.get("/events", headers={"Last-Event-ID": "nope"})
            assert bad.status_code == 400
            assert bad.json()["type"] == "InvalidArgumentError"
            comments: list[str] = []
            with anyio.fail_after(20):
                async with client.stream("GET", "/events") as response:
                    async for frame in frames(response):
                        comments += frame.comments
                        if len(comments) >= 2:
                            break
            assert comments == ["keep-alive", "keep-alive"]


async def test_a_browser_that_stopped_inside_the_current_events_gets_all_of_them_again(
    client: httpx2.AsyncClient,
) -> None:
    apps = [await submit(client, f"exit {code}") for code in (0, 3, 0)]
    for app_id in apps:
        await until_final(client, app_id)
    current: list[Frame] = []
    with anyio.fail_after(30):
        async with client.stream("GET", "/events") as response:
            async for frame in frames(response):
                if frame.event == "current" and frame.data["app_id"] in apps:
                    current.append(frame)
                if len(current) == len(apps):
                    break
    stopped_at = current[0].id  # the connection dropped after the first one
    assert stopped_at
    later = await submit(client, "exit 0")
    resumed = await until_final(client, later, {"Last-Event-ID": stopped_at})
    states = {
        f.data["app_id"]: f.data["state"] for f in resumed if f.event == "current"
    }
    assert {a: states.get(a) for a in apps} == dict(
        zip(apps, ("SUCCEEDED", "FAILED", "SUCCEEDED"), strict=True)
    )


async def test_events_stream_and_resume_on_the_pure_python_server(
    tmp_path: Path,
) -> None:
    """Without uvloop and httptools (asyncio's loop, h11), as with them."""
    with serving(tmp_path, pure_python=True) as service:
        async with httpx2.AsyncClient(base_url=service.url, timeout=30) as client:
            first = await submit(client, "exit 0")
            before = [f for f in await until_final(client, first) if f.id]
            later = await submit(client, "exit 0")
            headers = {"Last-Event-ID": str(before[-1].id)}
            resumed = await until_final(client, later, headers)
    kinds = [f.event for f in resumed if f.data and f.data["app_id"] == later]
    assert kinds[0] == "submitted"  # resumed after the last id, not from the start
    assert "current" not in kinds
