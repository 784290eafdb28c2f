"""Why an app failed, in the web example's status JSON (over HTTP, real uvicorn)."""

from __future__ import annotations

from typing import Any

import anyio
import httpx2


async def _until_final(client: httpx2.AsyncClient, app_id: str) -> dict[str, Any]:
    with anyio.fail_after(30):
        while True:
            status: dict[str, Any] = (await client.get(f"/apps/{app_id}")).json()
            if status["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
                return status
            await anyio.sleep(0.05)


async def test_failed_app_status_names_the_exit_code_reason(
    client: httpx2.AsyncClient,
) -> None:
    submitted = await client.post("/apps", json={"cmd": ["sh", "-c", "exit 3"]})
    assert submitted.status_code == 201, submitted.text
    status = await _until_final(client, submitted.json()["app_id"])
    assert status["state"] == "FAILED"
    assert status["reason"] == "EXIT_CODE"
    [replica] = status["replicas"]
    assert replica["state"] == "FAILED"
    assert replica["exit_code"] == 3
    assert replica["reason"] == "EXIT_CODE"
    assert "3" in replica["message"]


async def test_succeeded_app_has_no_reason(client: httpx2.AsyncClient) -> None:
    submitted = await client.post("/apps", json={"cmd": ["true"]})
    status = await _until_final(client, submitted.json()["app_id"])
    assert status["state"] == "SUCCEEDED"
    assert status["reason"] is None
    assert [r["reason"] for r in status["replicas"]] == [None]
