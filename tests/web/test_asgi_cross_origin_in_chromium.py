"""A page on another site cannot use the web example through the user's browser.

Headless Chromium (Debian's ``chromium``, as in test_asgi_page_in_chromium)
opens a page served from another origin (``127.0.0.2``, a different site to
the browser) that posts to the example on ``127.0.0.1`` the ways a page can
without asking the browser first: a ``no-cors`` ``fetch`` with a
``text/plain`` JSON body and a ``text/plain`` form. Then it opens the example
under a rebound DNS name. Nothing may start, while the example's own page
still works.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread

import anyio
import httpx2
import pytest

from tests.web import test_asgi_page_in_chromium as page_test
from tests.web.conftest import eventually, serving

try:
    from playwright.async_api import Page, async_playwright, expect
except ImportError:  # pragma: no cover - test_asgi_page_in_chromium skipped already
    pytest.skip("needs playwright", allow_module_level=True)

pytestmark = page_test.pytestmark
REBOUND = "rebind.test"  # a name the browser resolves to 127.0.0.1 (DNS rebinding)
ACCESS_LOG = re.compile(r'"POST /apps HTTP/1\.1" (\d{3})')


@pytest.fixture
async def page(tmp_path: Path) -> AsyncIterator[Page]:
    if not page_test.CHROMIUM.exists():
        pytest.fail(f"{page_test.CHROMIUM} is missing: run tests/web/provision.sh")
    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=str(page_test.CHROMIUM),
            headless=True,
            args=[*page_test.FLAGS, f"--host-resolver-rules=MAP {REBOUND} 127.0.0.1"],
        )
        try:
            context.set_default_timeout(page_test.TIMEOUT_MS)
            yield context.pages[0] if context.pages else await context.new_page()
        finally:
            await context.close()


@asynccontextmanager
async def other_site(page_html: str) -> AsyncIterator[str]:
    """Serve ``page_html`` at ``http://127.0.0.2:<port>/`` until the block ends."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = page_html.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.2", 0), Handler)
    thread = Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.2:{server.server_address[1]}/"
    finally:
        await anyio.to_thread.run_sync(server.shutdown)
        server.server_close()


def attack_page(app_url: str, fetch_marker: Path, form_marker: Path) -> str:
    """A page that posts a submission to ``app_url`` by ``fetch`` and by a form.

    The form's one field is ``name=value`` in ``text/plain``: split so the
    body reads as the JSON ``{"cmd": [..., "="]}``.
    """
    fetch_body = json.dumps({"cmd": ["sh", "-c", 'touch "$0"', str(fetch_marker)]})
    field = '{"cmd": ["sh", "-c", "touch ' + str(form_marker) + '", "'
    return f"""<!doctype html>
<title>another site</title>
<iframe name="sink"></iframe>
<form id="form" method="POST" action="{html.escape(app_url)}/apps"
      enctype="text/plain" target="sink">
  <input name="{html.escape(field)}" value="{html.escape('"]}')}">
</form>
<script>
window.sent = (async () => {{
  await fetch({json.dumps(app_url + "/apps")}, {{
    method: "POST", mode: "no-cors",
    headers: {{"Content-Type": "text/plain"}}, body: {json.dumps(fetch_body)},
  }}).catch(() => {{}});
  document.getElementById("form").submit();
  return "sent";
}})();
</script>
"""


async def test_page_on_another_site_cannot_start_an_app_and_the_own_page_still_can(
    page: Page, tmp_path: Path
) -> None:
    fetch_marker, form_marker = tmp_path / "by-fetch", tmp_path / "by-form"
    (tmp_path / "service").mkdir()
    with serving(tmp_path / "service") as service:
        async with other_site(
            attack_page(service.url, fetch_marker, form_marker)
        ) as url:
            await page.goto(url)
            assert await page.evaluate("window.sent") == "sent"

            def answered() -> list[str]:
                return ACCESS_LOG.findall(service.log.read_text())

            await eventually(
                lambda: len(answered()) == 2,
                "the example answered both posts (fetch and form)",
            )
        assert answered() == ["403", "403"]  # cross-site: refused before anything
        async with httpx2.AsyncClient(base_url=service.url) as client:
            assert (await client.get("/apps")).json() == {"apps": []}
        assert not fetch_marker.exists()
        assert not form_marker.exists()

        # after DNS rebinding, the page's origin is the example's address under
        # another name: the example does not serve that name, not even its page
        port = service.url.rsplit(":", 1)[1]
        rebound = await page.goto(f"http://{REBOUND}:{port}/")
        assert rebound is not None
        assert rebound.status == 421
        assert "is not served here" in await rebound.text()

        # the example's own page still submits and shows the app
        await page.goto(service.url)
        await page.fill("#cmd", "echo own page works")
        await page.click("#submit")
        await expect(page.locator("#app-state")).to_have_text("SUCCEEDED")
        await expect(page.locator("#log")).to_contain_text("main/0 own page works")
        await expect(page.locator("#error")).to_have_text("")
        assert answered()[2:] == ["201"]


async def test_page_on_another_site_cannot_show_the_example_in_a_frame(
    page: Page, tmp_path: Path
) -> None:
    (tmp_path / "service").mkdir()
    with serving(tmp_path / "service") as service:
        framing = (
            "<!doctype html><title>another site</title>"
            f'<iframe id="victim" src="{html.escape(service.url)}/"></iframe>'
        )
        refusals: list[str] = []
        page.on("console", lambda m: refusals.append(m.text))
        async with other_site(framing) as url:
            await page.goto(url)  # waits for the frame's load event too
        assert '"GET / HTTP/1.1" 200' in service.log.read_text()  # it was sent
        victim = next(f for f in page.frames if f is not page.main_frame)
        assert not victim.url.startswith(service.url), victim.url  # not shown
        assert await victim.locator("#submit-form").count() == 0
        assert any("frame" in text and "'none'" in text for text in refusals), refusals

        # its own page runs under its policy: nothing of it is refused
        refusals.clear()
        await page.goto(service.url)
        await page.fill("#cmd", "echo framed nowhere")
        await page.click("#submit")
        await expect(page.locator("#app-state")).to_have_text("SUCCEEDED")
        await expect(page.locator("#log")).to_contain_text("main/0 framed nowhere")
        assert not [t for t in refusals if "Content Security Policy" in t], refusals
