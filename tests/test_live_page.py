"""The live page, in a real headless browser (Debian's chromium driven by Playwright)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import httpx
import pytest
import redis

from tests.conftest import SECRET
from tests.procs import ROOT, Worker
from tests.test_api import KEY, Server, _token, _wait_status

ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"), reason="no chromium here (CI installs Debian's)"
)


@pytest.fixture
def browser_page() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    assert CHROMIUM is not None, "CI must install chromium (apt-get install chromium)"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        try:
            yield page
        finally:
            browser.close()


def test_the_live_page_lists_interrupts_and_follows_a_run(
    browser_page: object, redis_url: str, redis_client: redis.Redis
) -> None:
    """The page lists an interrupt the test created, drops it when the test resumes it, and a run's
    timeline grows live as the run goes on; a screenshot is kept in test-artifacts/."""
    page: object = browser_page
    srv = Server(redis_url)
    worker = Worker(redis_url, SECRET)
    try:
        with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=15) as api:
            run_id = api.post("/v1/runs", json={"workflow": "tests.flows:two_questions", "input": {}}).json()["runId"]
            _wait_status(api, run_id, "waiting")
            page.goto(f"{srv.url}/ui")  # type: ignore[attr-defined]
            page.fill("#key", KEY)  # type: ignore[attr-defined]
            page.click("#key-form button")  # type: ignore[attr-defined]
            row = page.locator("#items tr", has_text="Your name?")  # type: ignore[attr-defined]
            row.wait_for(timeout=10_000)
            assert "two_questions" in row.inner_text()
            row.locator("button.open").click()  # its card, in the side panel
            assert run_id in page.locator("#panel-card li.card").inner_text()  # type: ignore[attr-defined]
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "live-page.png"), full_page=True)  # type: ignore[attr-defined]

            token, _ = _token(api, run_id)
            assert api.post("/v1/resume", json={"token": token, "value": "Ada"}).status_code == 200
            page.locator("#items tr", has_text="Pick a color").wait_for(timeout=10_000)  # type: ignore[attr-defined]
            assert page.locator("#items tr", has_text="Your name?").count() == 0  # type: ignore[attr-defined]

            page.goto(f"{srv.url}/ui/runs/{run_id}")  # type: ignore[attr-defined]
            timeline = page.locator("#timeline li")  # type: ignore[attr-defined]
            page.locator("#timeline li[data-type='interrupt']").nth(1).wait_for(timeout=10_000)  # type: ignore[attr-defined]
            before = timeline.count()
            token, _ = _token(api, run_id)
            assert api.post("/v1/resume", json={"token": token, "selected": "blue"}).status_code == 200
            page.locator("#timeline li[data-type='done']").wait_for(timeout=15_000)  # type: ignore[attr-defined]
            assert timeline.count() > before
            # the status line is read again once the stream has ended
            page.wait_for_function(  # type: ignore[attr-defined]
                "() => document.getElementById('run-status').textContent.includes('completed')", timeout=10_000
            )
            assert token not in page.content()  # type: ignore[attr-defined]
            page.screenshot(path=str(ARTIFACTS / "run-page.png"), full_page=True)  # type: ignore[attr-defined]
            assert (ARTIFACTS / "live-page.png").stat().st_size > 1000
    finally:
        worker.stop()
        srv.stop()


def test_the_page_without_a_key_shows_nothing(browser_page: object, redis_url: str, redis_client: redis.Redis) -> None:
    """Without a key the page asks for one and lists nothing; a wrong key is told so."""
    page: object = browser_page
    srv = Server(redis_url)
    try:
        page.goto(f"{srv.url}/ui")  # type: ignore[attr-defined]
        assert "Enter an API key" in page.inner_text("#status")  # type: ignore[attr-defined]
        page.fill("#key", "not-the-key")  # type: ignore[attr-defined]
        page.click("#key-form button")  # type: ignore[attr-defined]
        page.wait_for_function("() => document.getElementById('status').textContent.includes('not accepted')")  # type: ignore[attr-defined]
        assert page.locator("#items tr").count() == 0  # type: ignore[attr-defined]
    finally:
        srv.stop()
