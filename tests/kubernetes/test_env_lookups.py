"""The proxy environment and ``~/.netrc`` are read once per connection.

Without a proxy or a ``.netrc`` entry for the API server, requests make no
per-request lookups (aiohttp would ask two worker threads before each one);
with either, the proxy or the password is still used.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from anyio.abc import SocketStream

from asyncsched.schedulers.kubernetes._env_lookups import env_names_server
from asyncsched.schedulers.kubernetes_scheduler import KubernetesScheduler

from .fakeapi.env import KubeEnv
from .helpers import scheduler

on_the_fake_server = pytest.mark.parametrize("kube_server", ["fake"], indirect=True)

_PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No proxy variables and a home without ``.netrc``; returns that home."""
    for name in _PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.delenv("NETRC", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def _looks_up_per_request(sched: KubernetesScheduler) -> bool:
    api = sched.api
    assert api is not None
    return bool(api.client.rest_client.pool_manager.trust_env)


@on_the_fake_server
async def test_requests_make_no_env_lookups_when_nothing_names_the_server(
    kube_env: KubeEnv, clean_env: Path
) -> None:
    async with scheduler(kube_env) as sched:
        assert await sched.describe(f"{kube_env.namespace}:absent") is None
        assert not _looks_up_per_request(sched)
        assert sched.api is not None
        streams = await sched.api._streams()  # what watches and followed logs use
        assert not streams.rest_client.pool_manager.trust_env


@pytest.mark.fake_api
@on_the_fake_server
async def test_a_proxy_named_in_the_environment_is_still_used(
    kube_env: KubeEnv, clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = kube_env.fake_server()
    seen: list[str] = []
    got_request = anyio.Event()

    async def proxy(stream: SocketStream) -> None:
        async with stream:
            head = await stream.receive(65536)
            seen.append(head.split(b"\r\n", 1)[0].decode())
            got_request.set()
            await stream.send(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
    server.requests.reset()
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, proxy)
        async with scheduler(kube_env) as sched:

            async def describe() -> None:
                await sched.describe(f"{kube_env.namespace}:absent")

            tg.start_soon(describe)
            with anyio.fail_after(15):
                await got_request.wait()
            assert _looks_up_per_request(sched)
        tg.cancel_scope.cancel()
    # the request went to the proxy, in absolute form, and not to the server
    assert seen
    assert seen[0].startswith("GET http://127.0.0.1:")
    assert server.requests.count("get") == 0


def test_a_netrc_entry_for_the_server_counts_as_named(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not env_names_server("https://10.1.2.3:6443")
    netrc = clean_env / ".netrc"
    netrc.write_text("machine 10.1.2.3 login user password secret\n")
    netrc.chmod(0o600)
    assert env_names_server("https://10.1.2.3:6443")
    assert not env_names_server("https://10.9.9.9:6443")
    monkeypatch.setenv("NO_PROXY", "10.9.9.9")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert env_names_server("https://10.8.8.8:6443")
    assert not env_names_server("https://10.9.9.9:6443")
