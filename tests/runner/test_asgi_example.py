"""The ASGI example (docs/examples/asgi_app.py) submits apps and streams SSE logs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("httpx2", reason="starlette's TestClient needs httpx2")
pytest.importorskip("asyncsched.schedulers.local_scheduler")
TestClient = pytest.importorskip("starlette.testclient").TestClient

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "asgi_app.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("asgi_app_example", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_submit_then_stream_logs_as_server_sent_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASYNCSCHED_STATE_DIR", str(tmp_path))
    module = _load()
    with TestClient(module.app) as client:
        created = client.post(
            "/apps",
            json={"cmd": ["sh", "-c", "echo hi; sleep 0.2; echo bye"], "replicas": 2},
        )
        assert created.status_code == 201
        app_id = created.json()["app_id"]
        with client.stream("GET", f"/apps/{app_id}/logs") as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            body = "".join(response.iter_text())
        events = [e for e in body.split("\n\n") if e]
        data = sorted(
            e.removeprefix("data: ") for e in events if e.startswith("data: ")
        )
        assert data == ["main/0 bye", "main/0 hi", "main/1 bye", "main/1 hi"]
        assert events[-1] == 'event: end\ndata: {"state": "SUCCEEDED"}'
        status = client.get(f"/apps/{app_id}")
        assert json.loads(status.text)["state"] == "SUCCEEDED"
        assert client.get("/apps/nope-1").status_code == 404
        assert client.post("/apps", json={"cmd": []}).status_code == 400
