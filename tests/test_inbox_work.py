"""The inbox people work in all day, in a real headless browser against a real ``parkway serve``,
workers and Redis: the interrupts as a dense table with the current one's card in a side panel,
answered from the keyboard and in bulk; a run page that asks before it cancels or forks and shows
its children as a tree and the time between its events; answer-link pages at phone width that say
who answered and when. axe-core checks each page (``check_page``)."""

from __future__ import annotations

import re
from typing import Any

import httpx

from parkway import Parkway
from parkway.config import Settings
from tests import test_inbox_page as inbox
from tests.conftest import SECRET
from tests.procs import ROOT, wait_for
from tests.test_api import Server, _token, _wait_status
from tests.test_inbox_page import Page, check_page, filter_tenant, row, sign_in, start

deployment, browser, page, api, tenant = inbox.deployment, inbox.browser, inbox.page, inbox.api, inbox.tenant
"""the inbox page tests' fixtures: one server and two workers for the module, one browser, a phone-wide tab"""

DOCS_ASSETS = ROOT / "docs" / "assets"


def _request_ids(tab: Page) -> list[str]:
    ids: list[str] = tab.eval_on_selector_all("#items tr", "rows => rows.map(r => r.dataset.requestId)")
    return ids


def _runs_of(client: httpx.Client, tenant_id: str) -> dict[str, str]:
    """The run of each pending interrupt of a tenant, by request id."""
    items = client.get("/v1/interrupts", params={"tenant": tenant_id}).json()["items"]
    return {i["requestId"]: i["runId"] for i in items}


def test_j_k_move_and_a_number_key_answers_the_current_line(
    deployment: Server, api: httpx.Client, page: Page, tenant: str
) -> None:
    """j and k move the current line (its card opens in the side panel); 2 answers it with its
    second option and the run completes with it; the next line is then current, and a answers it
    with its first option."""
    runs = {start(api, "tests.flows:one_choice", {"n": n}, tenant) for n in range(2)}
    sign_in(page, deployment.url)
    filter_tenant(page, tenant)
    page.wait_for_function("() => document.querySelectorAll('#items tr').length === 2")
    first, second = _request_ids(page)
    run_of = _runs_of(api, tenant)
    page.locator("#queue").click(position={"x": 1, "y": 1})  # the page has the keys, no field does
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("k")
    current = page.locator("#items tr[aria-current='true']")
    assert current.get_attribute("data-request-id") == first
    page.locator("#panel-card li.card", has_text="Pick a color").wait_for()
    check_page(page, "inbox-panel")
    page.keyboard.press("2")
    blue = run_of[first]
    assert _wait_status(api, blue, "completed")["output"]["painted"] == "blue"
    page.wait_for_function(f"() => document.querySelector('#items tr[aria-current]').dataset.requestId === '{second}'")
    assert row(page, "Pick a color").first.get_attribute("data-status") == "answered"
    red = run_of[second]
    page.keyboard.press("a")
    assert _wait_status(api, red, "completed")["output"]["painted"] == "red"
    assert runs == {blue, red}
    # both lines answered on the page first: on a loaded machine the second one's refresh could still
    # be redrawing its row and panel when "/" is pressed
    page.wait_for_function(
        "() => [...document.querySelectorAll('#items tr')].every((tr) => tr.dataset.status === 'answered')")
    page.keyboard.press("/")
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'f-q'", timeout=5_000)


def test_several_selected_are_answered_alike_and_the_page_says_what_was_refused(
    deployment: Server, api: httpx.Client, page: Page, tenant: str
) -> None:
    """Three approvals picked with a click and a shift-click, a refund added: "Approve" for all four
    records the three approvals (their runs go on approved) and reports the refund refused (it has
    no such option); the refund stays open."""
    approvals = [start(api, "tests.flows_inbox:approvals", {"n": n}, tenant) for n in range(3)]
    refund = start(api, "tests.flows_inbox:refunds", {"n": 9}, tenant)
    sign_in(page, deployment.url)
    filter_tenant(page, tenant)
    page.wait_for_function("() => document.querySelectorAll('#items tr').length === 4")
    lines = page.locator("#items tr", has_text="Approve order")
    lines.nth(0).locator("input.pick").click()
    lines.nth(2).locator("input.pick").click(modifiers=["Shift"])
    page.get_by_text("3 selected").wait_for()
    row(page, "Refund order 9?").locator("input.pick").click()
    page.get_by_text("4 selected").wait_for()
    page.select_option("#bulk-option", label="Approve (3 of 4)")
    check_page(page, "inbox-bulk")
    page.click("#bulk-answer")
    summary = page.locator("#bulk-summary")
    summary.locator("p").first.wait_for(timeout=45_000)  # three answers sent, on a loaded machine
    assert "recorded 3, refused 1" in summary.inner_text(), summary.inner_text()
    assert "Refund order 9?" in summary.locator("ul.refused").inner_text()
    assert "no option “Approve”" in summary.inner_text()
    for run_id in approvals:
        assert _wait_status(api, run_id, "completed")["output"]["approved"] is True
    assert api.get(f"/v1/runs/{refund}").json()["status"] == "waiting"
    assert page.locator("#items tr input.pick:checked").count() == 1  # the refused one stays selected


def test_cancel_and_fork_ask_first_in_a_dialog(
    deployment: Server, api: httpx.Client, page: Page, tenant: str
) -> None:
    """Fork and cancel open a modal dialog: Keep or Escape does nothing (no fork, still waiting);
    the dialog's yes, reached by the keyboard, forks and cancels."""
    run_id = start(api, "tests.flows:one_choice", {}, tenant)
    sign_in(page, deployment.url, path=f"/ui/runs/{run_id}")
    dialog = page.locator("dialog#confirm")
    page.click("#fork-run")
    dialog.wait_for(state="visible")
    check_page(page, "run-confirm")
    page.click("#confirm-no")
    page.get_by_text("Not forked.").wait_for()
    page.click("#cancel-run")
    dialog.wait_for(state="visible")
    assert "Cancel run" in dialog.inner_text()
    page.keyboard.press("Escape")
    page.get_by_text("Not cancelled.").wait_for()
    page.wait_for_timeout(300)
    assert api.get(f"/v1/runs/{run_id}").json()["status"] == "waiting"
    assert len(api.get("/v1/runs", params={"tenant": tenant}).json()["items"]) == 1  # no fork either

    page.click("#fork-run")
    dialog.wait_for(state="visible")
    assert page.evaluate("document.activeElement.id") == "confirm-no"  # the safe answer first
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "confirm-yes"
    page.keyboard.press("Enter")
    page.locator("#run-note a").wait_for()
    assert len(api.get("/v1/runs", params={"tenant": tenant}).json()["items"]) == 2
    page.click("#cancel-run")
    page.click("#confirm-yes")
    _wait_status(api, run_id, "cancelled")


def test_a_run_page_shows_its_fan_out_as_a_tree_and_the_time_between_events(
    deployment: Server, api: httpx.Client, page: Page, tenant: str
) -> None:
    """A run that fans out to three children shows them under it, each linked to its page with its
    status (a child answered meanwhile turns completed); each timeline line after the first says
    the time since the one before."""
    response = api.post("/v1/runs", json={"workflow": "tests.flows_life:fans_out", "tenant": tenant,
                                          "input": {"n": 3, "ask": True, "limit": 3}})
    run_id = response.json()["runId"]
    sign_in(page, deployment.url, path=f"/ui/runs/{run_id}")
    children = page.locator("#run-children li[data-child]")
    page.wait_for_function("() => document.querySelectorAll('#run-children li[data-child]').length === 3")
    ids = children.evaluate_all("lines => lines.map(l => l.dataset.child)")
    assert all(i.startswith(run_id) and i != run_id for i in ids)
    assert children.first.locator("a").get_attribute("href") == f"/ui/runs/{ids[0]}"
    assert "asks" in children.first.inner_text()
    gaps = page.locator("#timeline li .gap")
    gaps.first.wait_for()
    assert re.fullmatch(r"\+\d+(\.\d)? m?s", gaps.first.inner_text().strip())
    assert page.locator("#timeline li").first.locator(".gap").count() == 0
    check_page(page, "run-children")
    token, _ = _token(api, ids[0])
    assert api.post("/v1/resume", json={"token": token, "selected": "red"}).status_code == 200
    page.locator(f"#run-children li[data-child='{ids[0]}'] .tag", has_text="completed").wait_for()


def test_a_child_opens_to_its_own_children(deployment: Server, api: httpx.Client, page: Page, tenant: str) -> None:
    """A run whose child fans out: the run's tree shows the child; opening it reads the child's
    events and shows its two children beneath it, each linked to its page; closing folds it."""
    response = api.post("/v1/runs", json={"workflow": "tests.flows_life:nests_fan_out", "tenant": tenant,
                                          "input": {"n": 2, "ask": True, "limit": 2}})
    run_id = response.json()["runId"]
    wait_for(lambda: len(api.get("/v1/interrupts", params={"tenant": tenant}).json()["items"]) == 2, 20,
             "the grandchildren's questions")
    sign_in(page, deployment.url, path=f"/ui/runs/{run_id}")
    child = page.locator("#run-children > li > ul > li[data-child]")
    child.wait_for()
    assert "fans_out" in child.locator("a").first.inner_text()
    child.get_by_role("button", name="its children").click()
    grandchildren = child.locator("ul > li[data-child]")
    nested = "#run-children li[data-child] li[data-child]"
    page.wait_for_function(f"() => document.querySelectorAll('{nested}').length === 2")
    assert all("asks" in text for text in grandchildren.locator("a").all_inner_texts())
    assert child.get_by_role("button", name="its children").first.get_attribute("aria-expanded") == "true"
    check_page(page, "run-grandchildren")
    child.get_by_role("button", name="its children").first.click()
    page.wait_for_function(f"() => !document.querySelector('{nested}')")


def test_an_answer_link_page_fits_a_phone_and_says_who_answered_when(
    deployment: Server, api: httpx.Client, page: Page, tenant: str, redis_url: str
) -> None:
    """At 390 px the link's page has margins and no sideways scroll; once answered it says by whom
    and when, and the other option's link, opened after, says it was already answered, with what,
    by whom, when."""
    run_id = start(api, "tests.flows:one_choice", {}, tenant)
    token, _ = _token(api, run_id)
    with Parkway(Settings(redis_url=redis_url, secret=SECRET)) as pw:
        urls = pw.answer_links(token, deployment.url, responder="ana@example.com")
    page.goto(urls["blue"])
    check_page(page, "answer-link")
    assert page.evaluate("document.querySelector('h1').getBoundingClientRect().left") >= 16
    page.get_by_role("button", name="Answer “Blue”").click()
    said = page.locator("body")
    said.get_by_text("Your answer is recorded by ana@example.com at").wait_for()
    assert re.search(r"at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", said.inner_text())
    check_page(page, "answer-link-recorded")
    page.goto(urls["red"])
    text = page.locator("body").inner_text()
    assert "already answered with “Blue” by ana@example.com at" in text and "UTC" in text
    check_page(page, "answer-link-taken")
    assert _wait_status(api, run_id, "completed")["output"]["painted"] == "blue"


def test_the_inbox_table_and_panel_on_a_wide_screen(
    deployment: Server, api: httpx.Client, browser: Any, tenant: str, redis_url: str
) -> None:
    """On a wide screen the table and the open card's panel sit side by side (the panel beside the
    table, not under it); the docs' screenshot is taken from this page."""
    with Parkway(Settings(redis_url=redis_url, secret=SECRET)) as pw:
        for n in range(5):
            pw.start("tests.flows_inbox:approvals", {"n": 100 + n}, tenant=tenant)
        pw.start("tests.flows_inbox:refunds", {"n": 7}, tenant=tenant)
        pw.start("tests.flows:kinds", {}, tenant=tenant)
        pw.start("tests.flows:one_choice", {"ttl_ms": 100_000}, tenant=tenant)  # due soon
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    wide = context.new_page()
    wide.set_default_timeout(15_000)
    try:
        sign_in(wide, deployment.url)
        filter_tenant(wide, tenant)
        wait_for(lambda: wide.locator("#items tr").count() == 8, 30, "the eight interrupts")
        assert row(wide, "Pick a color").get_attribute("data-status") == "due-soon"
        row(wide, "Approve order 104?").locator("button.open").click()
        wide.keyboard.press("a")
        wide.wait_for_function("() => document.querySelector('#items tr[data-status=answered]')")
        row(wide, "Approve order 101?").locator("input.pick").click()
        row(wide, "Approve order 103?").locator("input.pick").click()
        row(wide, "Approve order 102?").locator("button.open").click()
        opened = wide.locator("#panel-card li.card", has_text="Approve order 102?")
        opened.get_by_text('input: {"n":102}').wait_for()
        assert "null" not in opened.inner_text()  # (a card once showed its left-out parts as "null")
        table, panel = (wide.locator(s).bounding_box() for s in (".queue-wrap", "#panel"))
        assert panel["x"] >= table["x"] + table["width"] and panel["y"] < table["y"] + table["height"]
        assert wide.evaluate("(w => w.scrollWidth <= w.clientWidth)(document.querySelector('.queue-wrap'))")
        wide.evaluate("() => document.activeElement && document.activeElement.blur()")
        DOCS_ASSETS.mkdir(exist_ok=True)
        shot = DOCS_ASSETS / "inbox-table.png"
        if not shot.exists():  # committed once; delete it to take it again
            wide.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
    finally:
        context.close()
