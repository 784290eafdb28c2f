"""The web example's JSON API and SSE streams, over HTTP against a real uvicorn."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx2
import pytest

from tests.web.conftest import eventually, gone, process_tree, serving, sse_events

WAIT_FOR_FILE = 'echo started; while [ ! -e "$0" ]; do sleep 0.02; done; echo {}'


@pytest.mark.parametrize(
    ("body", "error_type", "message"),
    [
        (b"{not json", "InvalidArgumentError", "not JSON"),
        (b'["echo"]', "InvalidArgumentError", "must be a JSON object"),
        (b'{"cmd": []}', "InvalidArgumentError", "cmd: must be a non-empty list"),
        (b'{"cmd": ["echo"], "replica": 2}', "InvalidArgumentError", "'replica'"),
        (b'{"cmd": ["/no/such/program"]}', "SpecError", "entrypoint"),
        (b'{"cmd": ["no-such-command-x"]}', "SpecError", "not found on the replica"),
        (b'{"cmd": ["echo"], "replicas": -1}', "AppFileError", "num_replicas"),
        (b'{"cmd": ["echo"], "replicas": "2"}', "AppFileError", "num_replicas"),
        (
            b'{"cmd": ["echo"], "cfg": {"prepend_cwd": "maybe"}}',
            "InvalidRunConfigException",
            "prepend_cwd",
        ),
        (b'{"app": {"name": "a", "roles": []}}', "AppFileError", "app: roles"),
    ],
    ids=[
        "not-json",
        "not-an-object",
        "empty-cmd",
        "unknown-field",
        "missing-entrypoint",
        "entrypoint-not-on-path",
        "negative-replicas",
        "replicas-not-an-int",
        "bad-run-option",
        "appdef-without-roles",
    ],
)
async def test_bad_submission_is_400_with_the_error_message(
    client: httpx2.AsyncClient, body: bytes, error_type: str, message: str
) -> None:
    headers = {"Content-Type": "application/json"}
    response = await client.post("/apps", content=body, headers=headers)
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["type"] == error_type
    assert message in error["error"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/apps/web-nosuchapp"),
        ("DELETE", "/apps/web-nosuchapp"),
        ("POST", "/apps/web-nosuchapp/cancel"),
        ("GET", "/apps/web-nosuchapp/logs"),
        ("GET", "/apps/web-nosuchapp/events"),
    ],
)
async def test_unknown_app_is_404_with_the_error_message(
    client: httpx2.AsyncClient, method: str, path: str
) -> None:
    response = await client.request(method, path)
    assert response.status_code == 404
    assert response.json()["type"] == "UnknownAppException"
    assert "web-nosuchapp" in response.json()["error"]


async def test_page_is_served_at_the_root(client: httpx2.AsyncClient) -> None:
    response = await client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert 'id="submit-form"' in response.text


async def test_submitted_app_streams_every_replica_line_then_its_final_state(
    client: httpx2.AsyncClient,
) -> None:
    cmd = ["sh", "-c", 'echo "hi from $0"; sleep 0.1; echo bye', "x"]
    created = await client.post("/apps", json={"cmd": cmd, "replicas": 2})
    assert created.status_code == 201, created.text
    app = created.json()
    assert app["handle"] == f"local_cwd://web/{app['app_id']}"
    assert app["state"] in {"SUBMITTED", "PENDING", "RUNNING", "SUCCEEDED"}
    assert [r["id"] for r in app["replicas"]] == [0, 1]

    async with client.stream("GET", f"/apps/{app['app_id']}/logs") as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [e async for e in sse_events(response)]
    lines = sorted((d["replica"], d["line"]) for kind, d in events if kind == "message")
    assert lines == [(0, "bye"), (0, "hi from x"), (1, "bye"), (1, "hi from x")]
    kind, final = events[-1]
    assert kind == "end"
    assert final["state"] == "SUCCEEDED"
    assert [(r["state"], r["exit_code"]) for r in final["replicas"]] == [
        ("SUCCEEDED", 0),
        ("SUCCEEDED", 0),
    ]

    status = await client.get(f"/apps/{app['app_id']}")
    assert status.json()["state"] == "SUCCEEDED"
    listed = (await client.get("/apps")).json()["apps"]
    row = next(a for a in listed if a["app_id"] == app["app_id"])
    assert row == {
        "app_id": app["app_id"],
        "handle": app["handle"],
        "name": "web",
        "state": "SUCCEEDED",
    }


async def test_status_stream_reports_each_change_by_name_then_ends(
    client: httpx2.AsyncClient, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    cmd = ["sh", "-c", WAIT_FOR_FILE.format("done"), str(go)]
    app_id = (await client.post("/apps", json={"cmd": cmd})).json()["app_id"]
    states: list[tuple[str, str, list[str]]] = []
    async with client.stream("GET", f"/apps/{app_id}/events") as response:
        async for kind, status in sse_events(response):
            replica_states = [r["state"] for r in status["replicas"]]
            states.append((kind, status["state"], replica_states))
            if kind == "status" and status["state"] == "RUNNING":
                go.touch()
    assert states[0] == ("status", "RUNNING", ["RUNNING"])
    assert states[-2:] == [
        ("status", "SUCCEEDED", ["SUCCEEDED"]),
        ("end", "SUCCEEDED", ["SUCCEEDED"]),
    ]


@pytest.mark.parametrize(
    ("method", "suffix"), [("POST", "/cancel"), ("DELETE", "")], ids=["post", "delete"]
)
async def test_cancel_stops_the_replica_processes_and_answers_cancelled(
    client: httpx2.AsyncClient, tmp_path: Path, method: str, suffix: str
) -> None:
    never = tmp_path / "never"
    cmd = ["sh", "-c", WAIT_FOR_FILE.format("unreachable"), str(never)]
    app = (await client.post("/apps", json={"cmd": cmd, "replicas": 2})).json()
    app_id = app["app_id"]
    async with client.stream("GET", f"/apps/{app_id}/logs") as response:
        async for _ in sse_events(response):
            break  # a replica printed: it runs
    pids = [p for r in app["replicas"] for p in process_tree(r["pid"])]
    assert pids

    cancelled = await client.request(method, f"/apps/{app_id}{suffix}")
    assert cancelled.status_code == 200, cancelled.text
    body = cancelled.json()
    assert body["state"] == "CANCELLED"
    assert [r["state"] for r in body["replicas"]] == ["CANCELLED", "CANCELLED"]
    await eventually(lambda: gone(pids), "the replica processes are gone")

    again = await client.request(method, f"/apps/{app_id}{suffix}")
    assert again.json()["state"] == "CANCELLED"  # a finished app stays as it is


async def test_full_appdef_body_is_accepted(client: httpx2.AsyncClient) -> None:
    app = {
        "name": "greeter",
        "roles": [
            {
                "name": "hello",
                "entrypoint": "sh",
                "args": ["-c", 'echo "$GREETING"'],
                "env": {"GREETING": "hello there"},
            }
        ],
    }
    created = await client.post("/apps", json={"app": app})
    assert created.status_code == 201, created.text
    app_id = created.json()["app_id"]
    async with client.stream("GET", f"/apps/{app_id}/logs") as response:
        events = [e async for e in sse_events(response)]
    assert events[0] == (
        "message",
        {"role": "hello", "replica": 0, "line": "hello there"},
    )
    assert events[-1][1]["state"] == "SUCCEEDED"


async def test_server_shutdown_stops_the_apps_still_running(tmp_path: Path) -> None:
    with serving(tmp_path) as service:
        async with httpx2.AsyncClient(base_url=service.url, timeout=30) as client:
            cmd = ["sh", "-c", "echo up; sleep 60"]
            app = (await client.post("/apps", json={"cmd": cmd})).json()
            async with client.stream("GET", f"/apps/{app['app_id']}/logs") as stream:
                async for _ in sse_events(stream):
                    break  # it runs
        pids = process_tree(app["replicas"][0]["pid"])
        assert pids
    # uvicorn ran its shutdown (the lifespan closed the runner), then re-raised SIGTERM
    assert service.proc.returncode in (0, -signal.SIGTERM)
    assert "Application shutdown complete" in service.log.read_text()
    await eventually(lambda: gone(pids), "the app's processes are gone")
