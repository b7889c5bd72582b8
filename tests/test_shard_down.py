"""One shard down costs that shard's runs only: a listing across shards returns, within a second,
what the shards that answer hold, and names the missing ones (``missing_shards`` in Python,
``missingShards`` over HTTP, a warning from the CLI); a process started while a shard is down
starts without it; the shard back, listings hold its runs again. Real Redis servers, a real
`parkway serve` process, worker and CLI processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest

from parkway import Caller, Parkway, Settings
from parkway.adapters.redis.connection.shards import ShardedStore
from tests import flows
from tests.conftest import SECRET, all_at_once
from tests.procs import ROOT, RedisServer, Worker, wait_for
from tests.test_api import KEY, USER_KEY, Server
from tests.test_inbox_page import CHROMIUM, Page, browser, check_page, page, sign_in  # noqa: F401 - fixtures
from tests.test_live_feeds import paused_until_caught_up
from tests.test_shards import _shard_env

ANA = Caller("user", "ana", "acme")


def _parked_on_both(pw: Parkway, urls: tuple[str, str]) -> dict[str, int]:
    """Runs of tenant acme started until each shard holds two, parked by a worker of each shard."""
    store = pw.store
    assert isinstance(store, ShardedStore)
    on: dict[str, int] = {}
    for k in range(60):
        run_id = pw.start(flows.one_choice, {"n": k}, tenant="acme")
        on[run_id] = store.shard_of(run_id)
        if min(list(on.values()).count(s) for s in (0, 1)) >= 2:
            break
    env = {"PARKWAY_SHARDS": ",".join(urls)}
    workers = [Worker(urls[k], SECRET, "--shard", str(k), env=env) for k in (0, 1)]
    try:
        wait_for(lambda: all(pw.get_run(r).status.value == "waiting" for r in on), 30, "every run to park")
    finally:
        for w in workers:
            w.stop()
    return on


def _timed(call: object) -> tuple[object, float]:
    started = time.monotonic()
    result = call()  # type: ignore[operator]
    return result, time.monotonic() - started


@pytest.mark.slow
def test_a_listing_across_shards_with_one_down_returns_the_others_within_a_second(
    two: tuple[RedisServer, RedisServer],
) -> None:
    """With shard 1's redis-server killed, every listing across shards (pending, filtered, a user's,
    one that waits, and the runs') returns shard 0's interrupts within a second and names shard 1 missing, as does
    GET /v1/interrupts of a server started before, whose pause feed stream sends shard 0's pauses;
    a CLI started while the shard is down lists
    shard 0's with a warning on stderr; the shard back, the listing holds every run again."""
    urls = (two[0].url, two[1].url)
    srv = Server(urls[0], PARKWAY_SHARDS=",".join(urls))
    try:
        with Parkway(Settings(shards=urls, secret=SECRET)) as pw:
            on = _parked_on_both(pw, urls)
            first = sorted(r for r, shard in on.items() if shard == 0)
            assert sorted(i.run_id for i in pw.list_interrupts(limit=100).items) == sorted(on)
            two[1].kill()

            for asked in ({}, {"tenant": "acme"}, {"caller": ANA}, {"search": "pick"}):
                page, took = _timed(lambda asked=asked: pw.list_interrupts(limit=100, **asked))  # type: ignore[arg-type]
                assert sorted(i.run_id for i in page.items) == first, asked  # type: ignore[attr-defined]
                assert page.missing_shards == (1,) and took <= 1.0, (asked, took)  # type: ignore[attr-defined]
            runs, took = _timed(lambda: pw.list_runs(limit=100))
            assert sorted(r.run_id for r in runs.items) == first and runs.missing_shards == (1,)  # type: ignore[attr-defined]
            assert took <= 1.0, took
            waited, took = _timed(lambda: pw.list_interrupts(workflow="two_questions", wait_ms=1000))
            assert waited.items == () and waited.missing_shards == (1,) and took <= 2.0, took  # type: ignore[attr-defined]

            with httpx.Client(base_url=srv.url, timeout=15) as api:
                for key in (KEY, USER_KEY):
                    started = time.monotonic()
                    got = api.get("/v1/interrupts", params={"limit": 100}, headers={"Authorization": f"Bearer {key}"})
                    took = time.monotonic() - started
                    assert got.status_code == 200, got.text
                    body = got.json()
                    assert sorted(i["runId"] for i in body["items"]) == first and body["missingShards"] == [1]
                    assert took <= 1.0, took
                ran = api.get("/v1/runs", params={"limit": 100}, headers={"Authorization": f"Bearer {KEY}"}).json()
                assert sorted(r["runId"] for r in ran["items"]) == first and ran["missingShards"] == [1]
            # the pause feed the inbox follows: shard 0's pauses, from its start and from now on
            assert sorted(e["runId"] for e in paused_until_caught_up(srv.url, KEY, after="0")) == first
            assert paused_until_caught_up(srv.url, KEY) == []

            started = time.monotonic()
            cli = subprocess.run([sys.executable, "-m", "parkway.cli", "interrupts", "--limit", "100"], cwd=ROOT,
                                 env=_shard_env(urls), capture_output=True, text=True, timeout=60,
                                 stdin=subprocess.DEVNULL)
            took = time.monotonic() - started
            assert cli.returncode == 0, cli.stderr
            assert "warning: shard 1 of PARKWAY_SHARDS did not answer" in cli.stderr, cli.stderr
            assert all(r in cli.stdout for r in first) and not any(r in cli.stdout for r in on if r not in first)
            assert took < 10, took  # a start and one listing, not a wait for the dead shard's retries
            runs_cli = subprocess.run([sys.executable, "-m", "parkway.cli", "runs", "--limit", "100"], cwd=ROOT,
                                      env=_shard_env(urls), capture_output=True, text=True, timeout=60,
                                      stdin=subprocess.DEVNULL)
            assert runs_cli.returncode == 0, runs_cli.stderr
            assert "warning: shard 1 of PARKWAY_SHARDS did not answer: its runs are not listed" in runs_cli.stderr

            two[1].start()  # the same port: the shard comes back with nothing (no persistence) or its runs

            def whole() -> bool:
                return pw.list_interrupts(limit=100).missing_shards == ()

            wait_for(whole, 30, "the shard to come back into the listing")
    finally:
        srv.stop()


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"), reason="no chromium here (CI installs Debian's)")
def test_the_inbox_page_says_which_shard_did_not_answer(
    two: tuple[RedisServer, RedisServer], page: Page,  # noqa: F811 - the inbox tests' fixture
) -> None:
    """The inbox of a server over two shards, one of them down: a banner names the shard whose
    interrupts are not listed; with both up there is none."""
    urls = (two[0].url, two[1].url)
    srv = Server(urls[0], PARKWAY_SHARDS=",".join(urls))
    try:
        sign_in(page, srv.url)
        page.wait_for_selector("#list:not([hidden])")
        page.wait_for_selector("#empty:not([hidden])")
        assert page.locator("#shards-missing").is_hidden()
        two[1].kill()
        page.click("#filters button[type=submit]")
        banner = page.locator("#shards-missing")
        banner.wait_for(state="visible")
        assert banner.inner_text() == "Shard 1 did not answer: its interrupts are not listed."
        check_page(page, "shard-missing")
    finally:
        page.close()  # its live stream open, the server would wait for it to end
        srv.stop()


def _calls_on(shard: int) -> int:
    """Calls of listings still out on ``shard`` (each runs on a thread of its own, by that name)."""
    return sum(1 for t in threading.enumerate() if t.name == f"pw-shard-call-{shard}")


def test_listings_racing_past_a_frozen_shard_start_no_new_call_on_it(two: tuple[RedisServer, RedisServer]) -> None:
    """With shard 1 frozen (SIGSTOP), 20 listings at once each return within the bound naming it;
    20 more at once return at once and start no call on it (one call at a time asks a shard that
    failed); thawed, the next listings hold it again."""
    urls = (two[0].url, two[1].url)
    with Parkway(Settings(shards=urls, secret=SECRET)) as pw:
        frozen = two[1].proc
        assert frozen is not None
        frozen.send_signal(signal.SIGSTOP)
        try:
            def listing(_: int) -> tuple[tuple[int, ...], float]:
                started = time.monotonic()
                missing = pw.list_interrupts(limit=10, tenant="acme").missing_shards
                return missing, time.monotonic() - started

            first = all_at_once(listing, 20)
            assert all(missing == (1,) and took <= 2.0 for missing, took in first), first
            out = _calls_on(1)
            assert 1 <= out <= 20
            second = all_at_once(listing, 20)
            assert all(missing == (1,) and took <= 0.5 for missing, took in second), second
            assert _calls_on(1) <= out
        finally:
            frozen.send_signal(signal.SIGCONT)
        wait_for(lambda: _calls_on(1) == 0, 30, "the calls on the thawed shard to end")
        wait_for(lambda: pw.list_interrupts(limit=10).missing_shards == (), 30, "the shard back in the listing")
