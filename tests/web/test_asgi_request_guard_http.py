"""The web example refuses what another web page could make a browser send.

Over HTTP against a real uvicorn: a request that is refused starts nothing
(no app in the list, the command's marker file never appears).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import httpx2
import pytest

from tests.web.conftest import ROOT, SERVE, Service, serving, sse_events

JSON = {"Content-Type": "application/json"}
MAX_BODY = 1024 * 1024  # the example's default
WAIT_FOREVER = 'echo started; while [ ! -e "$0" ]; do sleep 0.05; done'


def touch_cmd(marker: Path) -> list[str]:
    return ["sh", "-c", 'touch "$0"', str(marker)]


async def app_ids(client: httpx2.AsyncClient) -> set[str]:
    listed = await client.get("/apps")
    assert listed.status_code == 200, listed.text
    return {a["app_id"] for a in listed.json()["apps"]}


class NothingStarted:
    """Asserts that the requests of a block started no app."""

    def __init__(self, client: httpx2.AsyncClient, marker: Path) -> None:
        self.client = client
        self.marker = marker

    async def __aenter__(self) -> None:
        self.before = await app_ids(self.client)

    async def __aexit__(self, *exc: object) -> None:
        if exc[0] is not None:
            return
        assert await app_ids(self.client) == self.before, "an app was started"
        assert not self.marker.exists(), "the command ran"


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "pwned"


def refused(response: httpx2.Response, status: int, kind: str) -> str:
    """The error message of a refusal, after checking its status and type."""
    assert response.status_code == status, response.text
    error = response.json()
    assert error["type"] == kind
    message: str = error["error"]
    return message


# -- only JSON bodies ------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        None,
    ],
)
async def test_submission_that_is_not_declared_json_is_415_and_starts_nothing(
    client: httpx2.AsyncClient, marker: Path, content_type: str | None
) -> None:
    body = json.dumps({"cmd": touch_cmd(marker)}).encode()
    headers = {"Content-Type": content_type} if content_type else {}
    async with NothingStarted(client, marker):
        response = await client.post("/apps", content=body, headers=headers)
    message = refused(response, 415, "UnsupportedMediaType")
    assert "application/json" in message


async def test_json_with_a_charset_parameter_is_accepted(
    client: httpx2.AsyncClient,
) -> None:
    body = json.dumps({"cmd": ["true"]}).encode()
    headers = {"Content-Type": "Application/JSON; charset=utf-8"}
    response = await client.post("/apps", content=body, headers=headers)
    assert response.status_code == 201, response.text


# -- Origin ------------------------------------------------------------------------


def foreign_origins(service: Service) -> list[str]:
    port = service.url.rsplit(":", 1)[1]
    return [
        "http://evil.example",
        "http://127.0.0.1:1",  # another port of the same host
        f"http://localhost:{port}",  # the same server by another name
        f"https://127.0.0.1:{port}",  # another scheme
        "null",  # a sandboxed frame, a file:// page
    ]


async def test_submission_from_a_foreign_origin_is_403_and_starts_nothing(
    service: Service, client: httpx2.AsyncClient, marker: Path
) -> None:
    for origin in foreign_origins(service):
        async with NothingStarted(client, marker):
            response = await client.post(
                "/apps",
                json={"cmd": touch_cmd(marker)},
                headers={"Origin": origin},
            )
        assert origin in refused(response, 403, "CrossOriginRequest")


@pytest.mark.parametrize("site", ["cross-site", "same-site"])
async def test_cross_site_fetch_metadata_without_origin_is_403(
    client: httpx2.AsyncClient, marker: Path, site: str
) -> None:
    async with NothingStarted(client, marker):
        response = await client.post(
            "/apps",
            json={"cmd": touch_cmd(marker)},
            headers={"Sec-Fetch-Site": site},
        )
    assert site in refused(response, 403, "CrossOriginRequest")


@pytest.fixture
async def running_app(client: httpx2.AsyncClient, tmp_path: Path) -> AsyncIterator[str]:
    """A running app's id; cancelled at the end."""
    cmd = ["sh", "-c", WAIT_FOREVER, str(tmp_path / "never")]
    created = await client.post("/apps", json={"cmd": cmd})
    assert created.status_code == 201, created.text
    app_id: str = created.json()["app_id"]
    async with client.stream("GET", f"/apps/{app_id}/logs") as response:
        async for _ in sse_events(response):
            break  # it printed: it runs
    yield app_id
    await client.delete(f"/apps/{app_id}")


@pytest.mark.parametrize(
    ("method", "suffix"), [("POST", "/cancel"), ("DELETE", "")], ids=["post", "delete"]
)
async def test_cancel_from_a_foreign_origin_is_403_and_the_app_keeps_running(
    service: Service,
    client: httpx2.AsyncClient,
    running_app: str,
    method: str,
    suffix: str,
) -> None:
    for origin in foreign_origins(service):
        response = await client.request(
            method, f"/apps/{running_app}{suffix}", headers={"Origin": origin}
        )
        refused(response, 403, "CrossOriginRequest")
    status = (await client.get(f"/apps/{running_app}")).json()
    assert status["state"] == "RUNNING"


async def test_same_origin_and_originless_requests_are_served(
    service: Service, client: httpx2.AsyncClient, running_app: str
) -> None:
    same_origin = {"Origin": service.url, "Sec-Fetch-Site": "same-origin"}
    for headers in (same_origin, {"Origin": service.url}, {}):
        created = await client.post("/apps", json={"cmd": ["true"]}, headers=headers)
        assert created.status_code == 201, created.text
    cancelled = await client.post(f"/apps/{running_app}/cancel", headers=same_origin)
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["state"] == "CANCELLED"


async def test_reads_from_a_foreign_origin_are_answered(
    client: httpx2.AsyncClient,
) -> None:
    # The browser keeps the answer from a foreign page (no CORS headers); the
    # server has no reason to refuse a GET.
    response = await client.get("/apps", headers={"Origin": "http://evil.example"})
    assert response.status_code == 200
    assert "access-control-allow-origin" not in response.headers


# -- Host --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:{port}", "127.0.0.1.nip.io:{port}"]
)
async def test_foreign_host_is_421_on_every_route_and_starts_nothing(
    service: Service, client: httpx2.AsyncClient, marker: Path, host: str
) -> None:
    # A DNS-rebinding page: its name resolves to 127.0.0.1, the browser sends it.
    host = host.format(port=service.url.rsplit(":", 1)[1])
    for path in ("/", "/apps", "/apps/web-nosuchapp", "/apps/web-nosuchapp/events"):
        response = await client.get(path, headers={"Host": host})
        message = refused(response, 421, "HostNotServed")
        assert host.split(":")[0] in message
        assert "ASYNCSCHED_WEB_ALLOWED_HOSTS" in message
    async with NothingStarted(client, marker):
        response = await client.post(
            "/apps", json={"cmd": touch_cmd(marker)}, headers={"Host": host}
        )
    refused(response, 421, "HostNotServed")


@pytest.mark.parametrize(
    "host", ["localhost:{port}", "LocalHost", "127.0.0.1:{port}", "[::1]:{port}"]
)
async def test_loopback_host_names_are_served_on_any_port(
    service: Service, client: httpx2.AsyncClient, host: str
) -> None:
    host = host.format(port=service.url.rsplit(":", 1)[1])
    response = await client.get("/apps", headers={"Host": host})
    assert response.status_code == 200, response.text


async def test_missing_or_malformed_host_is_400(service: Service) -> None:
    port = int(service.url.rsplit(":", 1)[1])
    for host_line in (b"", b"Host: a b\r\n", b"Host: x@127.0.0.1\r\n"):
        request = b"GET /apps HTTP/1.0\r\n" + host_line + b"\r\n"
        with anyio.fail_after(10):
            async with await anyio.connect_tcp("127.0.0.1", port) as stream:
                await stream.send(request)
                answer = b""
                async for chunk in stream:
                    answer += chunk
        assert answer.startswith(b"HTTP/1.1 400"), answer


# -- body size -------------------------------------------------------------------


async def test_body_over_the_cap_is_413_and_starts_nothing(
    client: httpx2.AsyncClient, marker: Path
) -> None:
    body = json.dumps({"cmd": touch_cmd(marker)}).encode()
    padded = body[:-1] + b" " * (MAX_BODY + 1 - len(body)) + b"}"  # still JSON
    assert len(padded) == MAX_BODY + 1
    async with NothingStarted(client, marker):
        response = await client.post("/apps", content=padded, headers=JSON)
    assert "larger than 1048576 bytes" in refused(response, 413, "BodyTooLarge")

    fits = body[:-1] + b" " * (MAX_BODY - len(body)) + b"}"
    response = await client.post("/apps", content=fits, headers=JSON)
    assert response.status_code == 201, response.text


async def test_chunked_body_over_the_cap_is_413_and_starts_nothing(
    client: httpx2.AsyncClient, marker: Path
) -> None:
    body = json.dumps({"cmd": touch_cmd(marker)}).encode()
    chunk = b" " * 65536

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: chunked
        yield body[:-1]
        for _ in range(MAX_BODY // len(chunk) + 1):
            yield chunk
        yield b"}"

    async with NothingStarted(client, marker):
        response = await client.post("/apps", content=chunks(), headers=JSON)
    refused(response, 413, "BodyTooLarge")

    async def small() -> AsyncIterator[bytes]:
        yield body[:-1]
        yield b"}"

    response = await client.post("/apps", content=small(), headers=JSON)
    assert response.status_code == 201, response.text


async def test_announced_oversized_body_is_refused_before_it_is_sent(
    service: Service,
) -> None:
    port = int(service.url.rsplit(":", 1)[1])
    head = (
        "POST /apps HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n"
    )
    with anyio.fail_after(10):  # it does not wait for the gigabyte
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            await stream.send(head.encode())
            answer = await stream.receive()
    assert answer.startswith(b"HTTP/1.1 413"), answer


# -- JSON --------------------------------------------------------------------------


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    "body",
    [
        nested(100_000),
        nested(2_000),
        '{"cmd": ["true"], "cfg": {"x": ' + nested(40) + "}}",
        '{"cmd": ["true"], "env": {"A": ' + nested(200_000) + "}}",
    ],
    ids=["top-level-100000", "top-level-2000", "cfg-40", "env-200000"],
)
async def test_deeply_nested_json_is_400(client: httpx2.AsyncClient, body: str) -> None:
    response = await client.post("/apps", content=body.encode(), headers=JSON)
    assert response.status_code == 400, response.text
    assert response.json() == {
        "error": "the request body is nested deeper than 32 levels",
        "type": "InvalidArgumentError",
    }


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b'{"cmd": ["true"]',
        b"",
        b'{"cmd": ["\xff"]}',
        b"1e999999",
        b'{"cmd": ["echo", "\\ud800"]}',
        b'{"cmd": ["echo"], "name": "\\udfff"}',
        b'{"cmd": ["echo"], "env": {"\\ud800": "x"}}',
    ],
    ids=[
        "garbage",
        "truncated",
        "empty",
        "not-utf8",
        "number-overflow",
        "lone-surrogate-in-cmd",
        "lone-surrogate-in-name",
        "lone-surrogate-in-a-key",
    ],
)
async def test_malformed_json_is_400(client: httpx2.AsyncClient, body: bytes) -> None:
    response = await client.post("/apps", content=body, headers=JSON)
    assert response.status_code == 400, response.text
    assert response.json()["type"] == "InvalidArgumentError"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"name": 5}, "name"),
        ({"name": None}, "name"),
        ({"name": ["web"]}, "name"),
        ({"env": {"SEED": 1}}, "env.SEED"),
        ({"env": {"SEED": True}}, "env.SEED"),
        ({"env": {"SEED": None}}, "env.SEED"),
        ({"env": {"SEED": 1.5}}, "env.SEED"),
        ({"env": ["SEED=1"]}, "env"),
    ],
)
async def test_non_string_name_or_env_value_is_400_naming_the_field(
    client: httpx2.AsyncClient, marker: Path, fields: dict[str, object], field: str
) -> None:
    async with NothingStarted(client, marker):
        response = await client.post("/apps", json={"cmd": touch_cmd(marker), **fields})
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith(f"{field}: must be ")


@pytest.mark.parametrize(
    ("name", "role", "env", "field"),
    [
        (5, "r", {}, "app.name"),
        ("a", 7, {}, "app.roles[0].name"),
        ("a", "r", {"N": 2}, "app.roles[0].env.N"),
    ],
)
async def test_appdef_body_with_non_string_name_or_env_is_400_naming_the_field(
    client: httpx2.AsyncClient,
    marker: Path,
    name: object,
    role: object,
    env: dict[str, object],
    field: str,
) -> None:
    args = ["-c", 'touch "$0"', str(marker)]
    roles = [{"name": role, "entrypoint": "sh", "args": args, "env": env}]
    async with NothingStarted(client, marker):
        response = await client.post(
            "/apps", json={"app": {"name": name, "roles": roles}}
        )
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith(f"{field}: must be a string")


# -- settings ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def configured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """The example on 127.0.0.2, with every ASYNCSCHED_WEB_* setting given."""
    settings = {
        "ASYNCSCHED_WEB_ALLOWED_HOSTS": "box.test, Other.Test",
        "ASYNCSCHED_WEB_ALLOWED_ORIGINS": "http://ui.test:3000",
        "ASYNCSCHED_WEB_MAX_BODY": "2000",
    }
    tmp = tmp_path_factory.mktemp("configured")
    with serving(tmp, host="127.0.0.2", env=settings) as running:
        yield running


async def test_settings_choose_the_hosts_origins_and_body_cap(
    configured: Service, marker: Path
) -> None:
    async with httpx2.AsyncClient(base_url=configured.url, timeout=30) as client:
        port = configured.url.rsplit(":", 1)[1]
        served = ["box.test", f"other.test:{port}", f"127.0.0.2:{port}"]  # + bound
        for host in served:
            response = await client.get("/apps", headers={"Host": host})
            assert response.status_code == 200, (host, response.text)
        for host in ("localhost", "127.0.0.1"):  # the names given replace these
            response = await client.get("/apps", headers={"Host": host})
            refused(response, 421, "HostNotServed")

        ui = {"Host": "box.test", "Origin": "http://ui.test:3000"}
        created = await client.post("/apps", json={"cmd": ["true"]}, headers=ui)
        assert created.status_code == 201, created.text
        own = {"Host": "box.test", "Origin": "http://box.test"}
        created = await client.post("/apps", json={"cmd": ["true"]}, headers=own)
        assert created.status_code == 201, created.text

        body = json.dumps({"cmd": touch_cmd(marker)}).encode()
        padded = body[:-1] + b" " * (2001 - len(body)) + b"}"
        async with NothingStarted(client, marker):
            response = await client.post("/apps", content=padded, headers=JSON)
        assert "larger than 2000 bytes" in refused(response, 413, "BodyTooLarge")


async def test_bad_setting_stops_the_example_from_loading_naming_it() -> None:
    env = {**os.environ, "ASYNCSCHED_WEB_MAX_BODY": "1MB"}
    result = await anyio.run_process(
        [sys.executable, "-c", "import docs.examples.asgi_app"],
        cwd=ROOT,
        env=env,
        check=False,
    )
    assert result.returncode != 0
    assert b"ASYNCSCHED_WEB_MAX_BODY='1MB': must be a number of bytes" in result.stderr


def test_server_refuses_to_start_on_a_state_dir_writable_by_others(
    tmp_path: Path,
) -> None:
    """An unsafe state dir stops uvicorn at startup, naming the dir and the fix."""
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o777)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    env = {**os.environ, "ASYNCSCHED_STATE_DIR": str(state)}
    with sock:
        proc = subprocess.run(
            [sys.executable, "-c", SERVE, str(sock.fileno())],
            cwd=ROOT,
            env=env,
            pass_fds=[sock.fileno()],
            capture_output=True,
            timeout=60,
            check=False,
        )
    out = proc.stdout.decode() + proc.stderr.decode()
    assert proc.returncode != 0, out
    assert f"unsafe state dir {state}" in out, out
    assert "Application startup failed" in out, out
    assert not (state / "local").exists()
