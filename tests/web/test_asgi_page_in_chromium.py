"""The web example's page, driven in headless Chromium against a real uvicorn.

Needs Debian's ``chromium`` (``tests/web/provision.sh`` installs it when root;
``nox -s tests`` runs that script). Skips only when it is missing and cannot be
installed here (not root on Debian); under CI it never skips.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest

from tests.web.conftest import Service, eventually, gone, process_tree

try:
    from playwright.async_api import BrowserContext, Page, async_playwright, expect
except ImportError:  # pragma: no cover - the test dependency group has it
    if os.environ.get("CI"):
        raise
    pytest.skip("needs playwright (pip install playwright)", allow_module_level=True)

CHROMIUM = Path("/usr/bin/chromium")
ROOT_ON_DEBIAN = (
    os.geteuid() == 0
    and Path("/etc/debian_version").exists()
    and shutil.which("apt-get") is not None
)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 10_000

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists() and not ROOT_ON_DEBIAN and not os.environ.get("CI"),
    reason=f"needs Debian's chromium at {CHROMIUM}: as root, run"
    " `bash tests/web/provision.sh` (or `apt-get install chromium`)",
)


@pytest.fixture
async def page(tmp_path: Path) -> AsyncIterator[Page]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run `bash tests/web/provision.sh` as root")
    async with async_playwright() as playwright:
        context: BrowserContext = await playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=str(CHROMIUM),
            headless=True,
            args=FLAGS,
        )
        try:
            context.set_default_timeout(TIMEOUT_MS)
            yield context.pages[0] if context.pages else await context.new_page()
        finally:
            await context.close()


async def test_page_submits_an_app_streams_its_logs_live_and_cancels_it(
    service: Service, page: Page, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    script = (
        f'echo first; while [ ! -e "{go}" ]; do sleep 0.02; done; echo second; sleep 60'
    )
    await page.goto(service.url)
    await page.fill("#cmd", script)
    await page.fill("#replicas", "2")
    await page.click("#submit")

    # replica states, live
    await expect(page.locator("#app-state")).to_have_text("RUNNING")
    rows = page.locator("#replicas-body tr")
    await expect(rows).to_have_count(2)
    await expect(page.locator("#replicas-body td.RUNNING")).to_have_count(2)

    # log lines appear while the app runs, before it goes on
    log = page.locator("#log")
    await expect(log).to_contain_text("main/0 first")
    await expect(log).to_contain_text("main/1 first")
    assert "second" not in (await log.text_content() or "")
    go.touch()
    await expect(log).to_contain_text("main/0 second")
    await expect(log).to_contain_text("main/1 second")

    app_id = await page.locator("#app-id").text_content()
    assert app_id
    async with httpx2.AsyncClient(base_url=service.url) as client:
        status = (await client.get(f"/apps/{app_id}")).json()
    pids = [p for r in status["replicas"] for p in process_tree(r["pid"])]
    assert pids

    # the cancel button cancels: the page shows it, the processes are gone
    await page.click("#cancel")
    await expect(page.locator("#app-state")).to_have_text("CANCELLED")
    await expect(page.locator("#replicas-body td.CANCELLED")).to_have_count(2)
    await expect(page.locator("#cancel")).to_be_disabled()
    await eventually(lambda: gone(pids), "the replica processes are gone")
    await expect(page.locator("#apps")).to_contain_text(f"{app_id} CANCELLED")
    await expect(page.locator("#error")).to_have_text("")


async def test_page_shows_the_servers_error_for_a_bad_submission(
    service: Service, page: Page
) -> None:
    await page.goto(service.url)
    await page.fill("#cmd", "echo never")
    await page.fill("#replicas", "-1")
    await page.click("#submit")
    await expect(page.locator("#error")).to_contain_text("num_replicas")
    await expect(page.locator("#app")).to_be_hidden()


async def test_page_shows_why_an_app_failed(service: Service, page: Page) -> None:
    await page.goto(service.url)
    await page.fill("#cmd", "echo working; exit 3")
    await page.fill("#replicas", "1")
    await page.click("#submit")
    await expect(page.locator("#app-state")).to_have_text("FAILED")
    await expect(page.locator("#app-reason")).to_have_text("(EXIT_CODE)")
    row = page.locator("#replicas-body tr")
    await expect(row).to_have_count(1)
    await expect(row.locator("td.FAILED")).to_have_count(1)
    await expect(row.locator("td.why")).to_contain_text("EXIT_CODE: ")
    await expect(row.locator("td.why")).to_contain_text("3")
