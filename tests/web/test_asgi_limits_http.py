"""The web example's limits, over HTTP against a real uvicorn.

Security headers on every response, a stalled request body answered 408 with
the connection closed, at most ``ASYNCSCHED_WEB_MAX_STREAMS`` SSE streams,
and an SSE client that reads nothing holds at most its byte bound on the
server, then is told to reconnect.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.web.conftest import ROOT, Service, eventually, serving, sse_events

MiB = 1024 * 1024
FRAME_BLOCKING = {
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cross-origin-resource-policy": "same-origin",
}
WAIT_FOR_FILE = 'echo started; while [ ! -e "$0" ]; do sleep 0.05; done'


def port_of(service: Service) -> int:
    return int(service.url.rsplit(":", 1)[1])


def assert_frame_blocking_headers(response: httpx2.Response) -> None:
    for name, value in FRAME_BLOCKING.items():
        assert response.headers.get(name) == value, (name, response.headers)
    policy = response.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy, policy


# -- security headers -----------------------------------------------------------


async def test_page_api_errors_and_streams_carry_the_frame_blocking_headers(
    client: httpx2.AsyncClient,
) -> None:
    page = await client.get("/")
    assert page.status_code == 200
    assert_frame_blocking_headers(page)
    policy = page.headers["content-security-policy"]
    assert "script-src 'sha256-" in policy  # the page's own inline script only
    assert "style-src 'sha256-" in policy  # and style
    assert "unsafe-inline" not in policy
    assert "connect-src 'self'" in policy

    created = await client.post("/apps", json={"cmd": ["echo", "hi"]})
    assert created.status_code == 201, created.text
    app_id = created.json()["app_id"]
    answers = [
        created,
        await client.get("/apps"),
        await client.get(f"/apps/{app_id}"),
        await client.get("/apps/web-nosuchapp"),  # 404
        await client.post("/apps", content=b"x"),  # 415
        await client.post("/apps", json={}, headers={"Origin": "http://evil.example"}),
        await client.get("/apps", headers={"Host": "evil.example"}),  # 421
    ]
    for path in (f"/apps/{app_id}/logs", f"/apps/{app_id}/events"):
        async with client.stream("GET", path) as stream:
            assert [e async for e in sse_events(stream)][-1][0] == "end"
        answers.append(stream)
    for response in answers:
        assert_frame_blocking_headers(response)
        assert "default-src 'none'" in response.headers["content-security-policy"]


# -- long log lines ---------------------------------------------------------------


async def test_log_line_over_64_kib_comes_in_partial_pieces_that_join_back(
    client: httpx2.AsyncClient,
) -> None:
    long = 150 * 1024  # 64 KiB + 64 KiB + 22 KiB
    script = f'head -c {long} /dev/zero | tr "\\0" y; echo; echo short; printf end'
    cmd = ["sh", "-c", script]
    created = await client.post("/apps", json={"cmd": cmd})
    assert created.status_code == 201, created.text
    async with client.stream("GET", f"/apps/{created.json()['app_id']}/logs") as s:
        messages = [data async for kind, data in sse_events(s) if kind == "message"]
    assert [len(m["line"]) for m in messages] == [65536, 65536, long - 131072, 5, 3]
    partial = [m.get("partial", False) for m in messages]
    assert partial == [True, True, False, False, True]  # "end" has no newline
    assert "".join(m["line"] for m in messages[:3]) == "y" * long


# -- settings ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ASYNCSCHED_WEB_BODY_TIMEOUT", "0"),
        ("ASYNCSCHED_WEB_BODY_TIMEOUT", "soon"),
        ("ASYNCSCHED_WEB_SSE_STALL_TIMEOUT", "inf"),
        ("ASYNCSCHED_WEB_MAX_STREAMS", "0"),
        ("ASYNCSCHED_WEB_SSE_BUFFER", "1MiB"),
    ],
)
async def test_bad_limit_setting_stops_the_example_from_loading_naming_it(
    name: str, value: str
) -> None:
    result = await anyio.run_process(
        [sys.executable, "-c", "import docs.examples.asgi_app"],
        cwd=ROOT,
        env={**os.environ, name: value},
        check=False,
    )
    assert result.returncode != 0
    assert f"{name}={value!r}: must be a".encode() in result.stderr


# -- request bodies ---------------------------------------------------------------

BODY_TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """The example with a 1 s body timeout and at most 2 open streams."""
    settings = {
        "ASYNCSCHED_WEB_BODY_TIMEOUT": str(BODY_TIMEOUT_S),
        "ASYNCSCHED_WEB_MAX_STREAMS": "2",
    }
    with serving(tmp_path_factory.mktemp("limited"), env=settings) as running:
        yield running


async def read_to_eof(stream: anyio.abc.ByteStream) -> bytes:
    answer = b""
    try:
        async for chunk in stream:
            answer += chunk
    except (anyio.BrokenResourceError, ConnectionResetError):
        pass
    return answer


@pytest.mark.parametrize(
    ("framing", "partial"),
    [
        ("Content-Length: 100", b'{"cmd": ["tr'),
        ("Transfer-Encoding: chunked", b'40\r\n{"cmd": ["tr'),
    ],
    ids=["content-length", "chunked"],
)
async def test_stalled_partial_body_is_408_and_closed_while_others_are_served(
    limited: Service, framing: str, partial: bytes
) -> None:
    head = (
        f"POST /apps HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\n{framing}\r\n\r\n"
    )
    async with (
        await anyio.connect_tcp("127.0.0.1", port_of(limited)) as stalled,
        httpx2.AsyncClient(base_url=limited.url, timeout=30) as others,
    ):
        await stalled.send(head.encode() + partial)
        sent = time.monotonic()
        listed = await others.get("/apps")  # the server serves others meanwhile
        assert listed.status_code == 200
        with anyio.fail_after(BODY_TIMEOUT_S + 10):
            answer = await read_to_eof(stalled)  # ends: the server closed it
        waited = time.monotonic() - sent
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b'"type":"BodyTimeout"' in answer
    assert b"connection: close" in answer.lower()
    assert waited >= BODY_TIMEOUT_S - 0.1


async def test_body_sent_slowly_within_the_timeout_is_served(limited: Service) -> None:
    body = json.dumps({"cmd": ["true"]}).encode()

    async def slowly() -> AsyncIterator[bytes]:
        for i in range(0, len(body), 4):
            yield body[i : i + 4]
            await anyio.sleep(0.01)

    async with httpx2.AsyncClient(base_url=limited.url, timeout=30) as client:
        headers = {"Content-Type": "application/json"}
        created = await client.post("/apps", content=slowly(), headers=headers)
    assert created.status_code == 201, created.text


def status_after_headers(url: str, header_bytes: int) -> bytes:
    """The status line answered to a GET with ``header_bytes`` of headers,
    sent 64 KiB at a time until they end or the server has answered."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        line = b"X-Pad: " + b"a" * 1000 + b"\r\n"
        head = b"GET /apps HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        head += line * (header_bytes // len(line)) + b"\r\n"
        with contextlib.suppress(OSError):  # the server answered and closed
            for start in range(0, len(head), 64 * 1024):
                if select.select([sock], [], [], 0.05)[0]:
                    break  # it answered before the headers ended
                sock.sendall(head[start : start + 64 * 1024])
        return sock.makefile("rb").readline().strip()


def test_h11_caps_request_headers_at_16_kib_and_httptools_does_not(
    tmp_path: Path,
) -> None:
    (tmp_path / "h11").mkdir()
    (tmp_path / "httptools").mkdir()
    with serving(tmp_path / "h11", pure_python=True) as h11:
        answer = status_after_headers(h11.url, 1024 * 1024)
        assert answer.startswith(b"HTTP/1.1 400"), answer
    pytest.importorskip("httptools", reason="the web extra installs httptools")
    with serving(tmp_path / "httptools") as parsed_by_httptools:
        answer = status_after_headers(parsed_by_httptools.url, 1024 * 1024)
        assert answer == b"HTTP/1.1 200 OK"


# -- the number of streams --------------------------------------------------------


async def test_stream_beyond_the_cap_is_503_with_retry_after_until_one_closes(
    limited: Service, tmp_path: Path
) -> None:
    async with httpx2.AsyncClient(base_url=limited.url, timeout=30) as client:
        cmd = ["sh", "-c", WAIT_FOR_FILE, str(tmp_path / "go")]
        app_id = (await client.post("/apps", json={"cmd": cmd})).json()["app_id"]
        paths = [f"/apps/{app_id}/events", f"/apps/{app_id}/logs"]
        async with AsyncExitStack() as streams:
            readers = []  # kept: a reader that is collected closes its stream
            for path in paths:  # the two streams the cap allows
                stream = await streams.enter_async_context(client.stream("GET", path))
                assert stream.status_code == 200
                readers.append(sse_events(stream))
                await anext(readers[-1])  # it is open and sending
            for path in paths:
                busy = await client.get(path)
                assert busy.status_code == 503, busy.text
                assert busy.headers["retry-after"] == "5"
                assert busy.json()["type"] == "TooManyStreams"
                assert "ASYNCSCHED_WEB_MAX_STREAMS" in busy.json()["error"]
                assert_frame_blocking_headers(busy)
            assert (await client.get(f"/apps/{app_id}")).status_code == 200

        async def one_more_stream() -> int:
            async with client.stream("GET", paths[0]) as stream:
                return stream.status_code

        codes: list[int] = []

        async def freed() -> None:  # the server sees the streams closed soon
            deadline = time.monotonic() + 10
            while (code := await one_more_stream()) != 200:
                codes.append(code)
                assert time.monotonic() < deadline, codes
                await anyio.sleep(0.05)

        await freed()
        (tmp_path / "go").touch()


# -- a client that reads nothing ------------------------------------------------

STALL_S = 3.0
LINE_BYTES = 512 * 1024
LINES = 128  # 64 MiB of output


@pytest.fixture(scope="module")
def stalling(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """The example dropping SSE clients that read nothing for 3 s."""
    settings = {"ASYNCSCHED_WEB_SSE_STALL_TIMEOUT": str(STALL_S)}
    with serving(tmp_path_factory.mktemp("stalling"), env=settings) as running:
        yield running


def kib(status_field: str, pid: int) -> int:
    """A ``/proc/<pid>/status`` field such as ``VmHWM`` (peak RSS), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{status_field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {status_field} for pid {pid}")


@contextmanager
def unread_connection(port: int) -> Iterator[socket.socket]:
    """A connection to ``port`` that reads nothing until told (no transport
    reading ahead), with a small receive window (16 KiB)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        sock.settimeout(10)
        sock.connect(("127.0.0.1", port))  # loopback: at once
        sock.setblocking(False)
        yield sock


async def peek_response_head(sock: socket.socket) -> bytes:
    """The response head that arrived on ``sock``, left unread in its buffer."""
    with anyio.fail_after(30):
        while True:
            await anyio.wait_readable(sock)
            try:
                data = sock.recv(1 << 12, socket.MSG_PEEK)
            except BlockingIOError:
                continue
            if b"\r\n\r\n" in data or not data:
                return data.partition(b"\r\n\r\n")[0]
            await anyio.sleep(0.01)  # a head in pieces: peek again


async def read_socket_to_eof(sock: socket.socket) -> bytes:
    chunks = []
    while True:
        await anyio.wait_readable(sock)
        try:
            chunk = sock.recv(1 << 20)
        except BlockingIOError:
            continue
        except ConnectionResetError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def parse_events(raw: bytes) -> list[tuple[str, Any]]:
    """The ``(event, data)`` of an SSE body (after the HTTP head; chunked)."""
    body = raw.partition(b"\r\n\r\n")[2].decode(errors="replace")
    events, event = [], "message"
    for line in body.splitlines():
        if line.startswith("event: "):
            event = line.removeprefix("event: ")
        elif line.startswith("data: "):
            try:
                events.append((event, json.loads(line.removeprefix("data: "))))
            except ValueError:  # a data line cut by a chunk header
                events.append((event, None))
            event = "message"
    return events


async def chatty_app(client: httpx2.AsyncClient) -> str:
    """The id of an app that printed 64 MiB in lines of 512 KiB, and ended."""
    script = (
        f"for i in $(seq {LINES}); do"
        f' head -c {LINE_BYTES} /dev/zero | tr "\\0" x; echo; done'
    )
    created = await client.post("/apps", json={"cmd": ["sh", "-c", script]})
    assert created.status_code == 201, created.text
    app_id: str = created.json()["app_id"]
    with anyio.fail_after(60):
        while (await client.get(f"/apps/{app_id}")).json()["state"] != "SUCCEEDED":
            await anyio.sleep(0.1)
    return app_id


def logs_request(app_id: str) -> bytes:
    return f"GET /apps/{app_id}/logs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()


async def test_unread_log_stream_of_a_chatty_app_is_bounded_then_told_to_reconnect(
    stalling: Service,
) -> None:
    server = stalling.proc.pid
    async with httpx2.AsyncClient(base_url=stalling.url, timeout=30) as client:
        app_id = await chatty_app(client)
    Path(f"/proc/{server}/clear_refs").write_text("5")  # VmHWM := VmRSS
    before = kib("VmRSS", server)
    with unread_connection(port_of(stalling)) as unread:
        unread.send(logs_request(app_id))

        def dropped() -> bool:
            grown = kib("VmHWM", server) - before
            assert grown < 16 * 1024, f"the server grew {grown} KiB for one client"
            return "dropped a stalled client" in stalling.log.read_text()

        await eventually(dropped, "the server drops the client", timeout=60)
        grown_mib = (kib("VmHWM", server) - before) / 1024
        with anyio.fail_after(30):
            raw = await read_socket_to_eof(unread)  # the client reads, at last
    got = parse_events(raw)
    kind, data = got[-1]
    assert kind == "lagged", got[-3:]
    assert "open it again" in data["error"]
    assert "read nothing for 3 s" in data["error"]
    lines = sum(1 for kind, _ in got if kind == "message")
    assert lines < LINES * LINE_BYTES // (64 * 1024)  # not all 1,024 pieces
    assert grown_mib < 16


@pytest.fixture(scope="module")
def one_stream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """The example serving one SSE stream at a time, stalled after 2 s."""
    settings = {
        "ASYNCSCHED_WEB_SSE_STALL_TIMEOUT": "2",
        "ASYNCSCHED_WEB_MAX_STREAMS": "1",
    }
    with serving(tmp_path_factory.mktemp("one-stream"), env=settings) as running:
        yield running


async def test_client_that_never_reads_is_given_up_and_frees_its_stream(
    one_stream: Service,
) -> None:
    async with httpx2.AsyncClient(base_url=one_stream.url, timeout=30) as client:
        app_id = await chatty_app(client)
        events = f"/apps/{app_id}/events"
        with unread_connection(port_of(one_stream)) as unread:
            unread.send(logs_request(app_id))
            # its stream has the only slot once its head arrived (a stream
            # asked for before that could take the slot first)
            head = await peek_response_head(unread)
            assert head.startswith(b"HTTP/1.1 200"), head
            busy = await client.get(events)
            assert busy.status_code == 503, busy.text

            def given_up() -> bool:
                log = one_stream.log.read_text()
                return "gave the stalled client's connection up" in log

            await eventually(given_up, "the server gives the client up", timeout=60)
            async with client.stream("GET", events) as stream:  # the slot is free
                assert stream.status_code == 200
                assert [e async for e in sse_events(stream)][-1][0] == "end"
