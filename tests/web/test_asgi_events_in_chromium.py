"""The page's live table across a server crash: uvicorn SIGKILLed and restarted.

The browser reconnects the ``/events`` stream by itself, sending the last
cursor as ``Last-Event-ID``; the page dedups events by cursor and replaces
its rows on ``resync``. Whatever the server can resume, the page ends with
exactly one row per app, each showing the state the server reports.
"""

from __future__ import annotations

import signal
from pathlib import Path

import httpx2
from playwright.async_api import Page, expect

from tests.web.conftest import serving
from tests.web.test_asgi_page_in_chromium import (  # the Chromium page fixture
    page as chromium_page,  # noqa: F401
    pytestmark,  # noqa: F401
)


async def submit(client: httpx2.AsyncClient, script: str) -> str:
    created = await client.post("/apps", json={"cmd": ["sh", "-c", script]})
    assert created.status_code == 201, created.text
    return str(created.json()["app_id"])


async def expect_row(page: Page, app_id: str, state: str) -> None:
    row = page.locator(f'#live-body tr[data-app="{app_id}"]')
    await expect(row).to_have_count(1)
    await expect(row.locator("td").nth(1)).to_have_text(state)


async def test_live_table_shows_every_app_once_after_the_server_is_killed_and_restarted(
    page: Page, tmp_path: Path
) -> None:
    expected: dict[str, str] = {}
    with serving(tmp_path) as first:
        port = int(first.url.rsplit(":", 1)[1])
        await page.goto(first.url)
        await expect(page.locator("#live-status")).to_have_text("live")
        await page.evaluate("window.notReloaded = true")
        async with httpx2.AsyncClient(base_url=first.url, timeout=30) as client:
            for script, state in [("exit 0", "SUCCEEDED"), ("exit 3", "FAILED")]:
                expected[await submit(client, script)] = state
            running = await submit(client, "sleep 60")
        for app_id, state in expected.items():
            await expect_row(page, app_id, state)
        await expect_row(page, running, "RUNNING")
        first.proc.send_signal(signal.SIGKILL)  # a crash: no shutdown at all
        first.proc.wait(timeout=20)
        await expect(page.locator("#live-status")).to_have_text("reconnecting")

    with serving(tmp_path, port=port) as second:  # same address, same state dir
        async with httpx2.AsyncClient(base_url=second.url, timeout=30) as client:
            for script, state in [("exit 0", "SUCCEEDED"), ("exit 1", "FAILED")]:
                expected[await submit(client, script)] = state
            await expect(page.locator("#live-status")).to_have_text(
                "live", timeout=20_000
            )
            for app_id, state in expected.items():
                await expect_row(page, app_id, state)
            # the app the crash interrupted: whatever the server says now
            now = (await client.get(f"/apps/{running}")).json()["state"]
            await expect_row(page, running, now)
        rows = page.locator("#live-body tr")
        ids = await rows.evaluate_all("(rows) => rows.map((r) => r.dataset.app)")
        assert sorted(ids) == sorted([*expected, running])  # no duplicate rows
        assert await page.evaluate("window.notReloaded") is True
