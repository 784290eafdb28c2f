"""The page's live table across a server crash: uvicorn SIGKILLed and restarted.

The browser reconnects the ``/events`` stream by itself, sending the last
cursor as ``Last-Event-ID``; the page dedups events by cursor and replaces
its rows on ``resync``. Whatever the server can resume, the page ends with
exactly one row per app, each showing the state the server reports.
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest

from tests.web import test_asgi_page_in_chromium as page_test
from tests.web.conftest import serving

try:
    from playwright.async_api import Page, async_playwright, expect
except ImportError:  # pragma: no cover - the test dependency group has it
    pytest.skip("needs playwright (pip install playwright)", allow_module_level=True)

pytestmark = page_test.pytestmark


@pytest.fixture
async def page(tmp_path: Path) -> AsyncIterator[Page]:
    if not page_test.CHROMIUM.exists():
        pytest.fail(f"{page_test.CHROMIUM} is missing: run tests/web/provision.sh")
    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=str(page_test.CHROMIUM),
            headless=True,
            args=page_test.FLAGS,
        )
        try:
            context.set_default_timeout(page_test.TIMEOUT_MS)
            yield context.pages[0] if context.pages else await context.new_page()
        finally:
            await context.close()


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
