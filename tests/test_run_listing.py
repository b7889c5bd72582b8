"""The run listing (``Parkway.list_runs``, ``GET /v1/runs``, ``parkway runs``): newest first from a
store-wide run index the scripts that create runs write, filtered before paging, cursor pages, a
caller's own runs only, and an index the reconciler keeps no longer than the runs' summaries."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
import redis

from parkway import Caller, Parkway, Settings, ValidationError
from parkway.adapters.limits import Limits
from parkway.adapters.redis import keys
from parkway.runtime.listing import RunsQuery
from parkway.workers.reconciler import reconcile_once
from tests import flows, indexes
from tests import flows_fork as ff
from tests.conftest import SECRET, Harness
from tests.procs import wait_for
from tests.test_api import USER_KEY, _api, serving


def _all_pages(pw: Parkway, limit: int, **filters: Any) -> list[str]:
    seen, cursor = [], None
    while True:
        page = pw.list_runs(limit=limit, cursor=cursor, **filters)
        assert len(page.items) <= limit
        seen += [r.run_id for r in page.items]
        if page.next_cursor is None:
            return seen
        cursor = page.next_cursor


def _start_apart(pw: Parkway, workflow: Any, data: dict[str, Any], n: int, **kw: Any) -> list[str]:
    """n runs, each created in a millisecond of its own; their ids, oldest first."""
    out = []
    for _ in range(n):
        out.append(pw.start(workflow, data, **kw))
        time.sleep(0.002)
    return out


def test_runs_list_newest_first_and_page_on_with_their_cursor(harness: Harness) -> None:
    """Every run is listed once, newest first, across pages of two."""
    ids = _start_apart(harness.pw, flows.one_choice, {}, 5)
    assert _all_pages(harness.pw, 2) == ids[::-1]
    first = harness.pw.list_runs(limit=1).items[0]
    assert (first.run_id, first.workflow) == (ids[-1], "one_choice")
    # embedded, the in-process worker may already have begun it (and parked it) by now
    assert first.status.value in ({"queued"} if harness.kind == "redis" else {"queued", "running", "waiting"})


def test_filters_apply_before_paging(harness: Harness) -> None:
    """Status, workflow prefix, tenant and creation time filter what a page holds, so pages of one
    still reach every match (and a page of the rest never holds a run the filter refused)."""
    done = _start_apart(harness.pw, ff.quick, {"a": 1, "b": 2}, 2)
    parked = _start_apart(harness.pw, flows.one_choice, {}, 3, tenant="acme")
    harness.run_jobs()
    assert _all_pages(harness.pw, 1, status="completed") == done[::-1]
    assert _all_pages(harness.pw, 1, status="waiting") == parked[::-1]
    assert _all_pages(harness.pw, 1, workflow_prefix="first_") == done[::-1]
    assert _all_pages(harness.pw, 1, workflow="one_choice", tenant="acme") == parked[::-1]
    middle = harness.pw.get_run(parked[1]).created_at
    assert _all_pages(harness.pw, 1, created_after=middle) == [parked[2], parked[1]]
    assert _all_pages(harness.pw, 1, created_before=middle) == [parked[0], *done[::-1]]


def test_a_child_run_is_listed_with_its_parent(harness: Harness) -> None:
    """A child run (use_workflow) joins the index when it is created and names its parent."""
    root = harness.start_and_run(flows.middle, {"depth": 1})
    harness.run_jobs()
    listed = {r.run_id: r for r in harness.pw.list_runs().items}
    children = [r for r in listed.values() if r.parent_run_id == root]
    assert len(listed) == 2 and [c.workflow for c in children] == ["leaf"]


def test_a_caller_lists_only_the_runs_it_may_read(harness: Harness) -> None:
    """A user sees its own runs, a key bound to a tenant its tenant's, before paging."""
    mine = harness.pw.start(flows.one_choice, {}, tenant="acme", owner="ada", origin="frontend")
    harness.pw.start(flows.one_choice, {}, tenant="acme", owner="bob", origin="frontend")
    harness.pw.start(flows.one_choice, {}, tenant="acme")
    harness.pw.start(flows.one_choice, {}, tenant="other")
    harness.pw.start(flows.one_choice, {})
    ada = Caller("user", owner="ada", tenant="acme")
    assert [r.run_id for r in harness.pw.list_runs(caller=ada, limit=1).items] == [mine]
    assert len(harness.pw.list_runs(caller=Caller("machine", tenant="acme")).items) == 3
    assert harness.pw.list_runs(caller=Caller("machine", tenant="acme"), tenant="other").items == ()
    assert len(harness.pw.list_runs(caller=Caller("system")).items) == 5


def test_a_changed_cursor_or_a_bad_filter_is_refused(harness: Harness) -> None:
    harness.pw.start(flows.one_choice, {})
    harness.pw.start(flows.one_choice, {})
    cursor = harness.pw.list_runs(limit=1).next_cursor
    assert cursor is not None
    with pytest.raises(ValidationError, match="cursor"):
        harness.pw.list_runs(cursor=cursor[:-2] + ("A" if cursor[-2] != "A" else "B") + cursor[-1])
    with pytest.raises(ValidationError, match="status must be one of"):
        harness.pw.list_runs(status="done")
    with pytest.raises(ValidationError, match="not both"):
        harness.pw.list_runs(RunsQuery(limit=1), limit=2)


def test_the_reconciler_drops_a_run_from_the_index_once_its_summary_is_gone(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """The index outlives no run: past the records' TTL and the retention, a reconciler pass takes
    the run out; a live run's member stays, and the index keeps nothing beside its members."""
    settings = Settings(redis_url=redis_url, secret=SECRET, limits=Limits(retention_ms=1000))
    with Parkway(settings) as pw:
        gone = pw.start(ff.quick, {"a": 1, "b": 2}, ttl_ms=1000)
        kept = pw.start(flows.one_choice, {}, ttl_ms=60_000)
        wait_for(lambda: not redis_client.exists(keys.summary(gone)), 10, "the quick run's summary to expire")
        assert [r.run_id for r in pw.list_runs().items] == [kept]  # a member with nothing behind it: skipped
        assert indexes.count(redis_client, keys.runs()) == 2
        reconcile_once(pw.store, pw.backend.dispatcher)
        members = indexes.members(redis_client, keys.runs())
        assert [m[6:].decode() for m in members] == [kept]
        assert not redis_client.exists(keys.runs_due())
        reconcile_once(pw.store, pw.backend.dispatcher, now=int(time.time() * 1000) + 62_000)
        assert indexes.count(redis_client, keys.runs()) == 1  # still there: looked at again on the next walk


def test_the_reconcilers_walk_goes_on_past_live_runs_to_one_whose_summary_is_gone(harness: Harness) -> None:
    """The walk looks at ``limit`` members a pass from where the last stopped, so a gone run behind
    live ones leaves within one walk; a walk that reaches the end starts again from the oldest, and
    the schedule parkway wrote before the walk is deleted."""
    if harness.connection is None:
        pytest.skip("writes the index by hand")
    conn, store = harness.connection, harness.pw.store
    live = [harness.pw.start(flows.one_choice, {}) for _ in range(3)]
    last = max(harness.pw.get_run(r).created_at for r in live)
    ghost = (last + 1).to_bytes(6, "big") + b"ghost-run"  # newest, and no summary behind it
    conn.zadd(keys.runs(), {ghost: 0})
    conn.zadd(keys.runs_due(), {ghost: 0})
    later = last + store.limits.retention_ms + 10
    assert [store.prune_runs(later, 1) for _ in range(3)] == [0, 0, 0]  # the live runs, one a pass
    assert conn.get(keys.runs_walked()) is not None
    assert store.prune_runs(later, 1) == 1  # the ghost, behind them
    assert indexes.count(conn, keys.runs()) == 3 and not conn.exists(keys.runs_due())
    assert store.prune_runs(later, 1) == 0 and not conn.exists(keys.runs_walked())  # the end: from the oldest
    assert store.prune_runs(last, 100) == 0  # none older than the retention: nothing looked at


def test_a_member_left_by_an_earlier_run_of_a_reused_id_is_neither_listed_nor_kept(harness: Harness) -> None:
    """An id taken again after its summary expired lists its new run once; the old member leaves."""
    if harness.connection is None:
        pytest.skip("writes the index by hand")
    run_id = harness.pw.start(flows.one_choice, {})
    created = harness.pw.get_run(run_id).created_at
    stale = (created - 5000).to_bytes(6, "big") + run_id.encode()
    harness.connection.zadd(keys.runs(), {stale: 0})
    assert [r.run_id for r in harness.pw.list_runs().items] == [run_id]
    harness.pw.store.prune_runs(created + harness.pw.store.limits.retention_ms + 1, 100)
    assert indexes.members(harness.connection, keys.runs()) == [created.to_bytes(6, "big") + run_id.encode()]


def test_get_v1_runs_lists_a_keys_runs_in_camel_case(redis_url: str, redis_client: redis.Redis) -> None:
    """Over HTTP, against a server process: filters as query parameters, a user key's own runs
    only, the page's cursor followed, and a bad filter refused as a problem."""
    with serving(redis_url) as srv:
        machine, user = _api(srv), _api(srv, USER_KEY)
        theirs = machine.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}, "tenant": "acme"})
        own = user.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}})
        assert theirs.status_code == own.status_code == 201
        wait_for(lambda: len(machine.get("/v1/runs", params={"status": "waiting"}).json()["items"]) == 2, 20,
                 "both runs to park")
        page = user.get("/v1/runs").json()
        assert [r["runId"] for r in page["items"]] == [own.json()["runId"]]
        assert page["items"][0]["owner"] == "ana" and "createdAt" in page["items"][0]
        first = machine.get("/v1/runs", params={"limit": 1, "workflow": "one_choice"}).json()
        second = machine.get("/v1/runs", params={"limit": 1, "cursor": first["nextCursor"]}).json()
        assert [first["items"][0]["runId"], second["items"][0]["runId"]] == [own.json()["runId"],
                                                                           theirs.json()["runId"]]
        bad = machine.get("/v1/runs", params={"status": "done"})
        assert bad.status_code == 422 and bad.headers["content-type"].startswith("application/problem+json")
        assert httpx.get(f"{srv.url}/v1/runs").status_code == 401


def test_parkway_runs_prints_a_line_per_run_and_pages_as_json(pw: Parkway, redis_url: str) -> None:
    """`parkway runs` as a process: one readable line per run, --status filters, --json pages."""
    from tests.test_cli import _env, parkway

    done_id = pw.start(ff.quick, {"a": 1, "b": 2})
    time.sleep(0.002)  # newest first is by creation time in ms: two starts in one ms list in id order
    waiting_id = pw.start(flows.one_choice, {})
    env = _env(PARKWAY_REDIS_URL=redis_url)
    shown = parkway("runs", env=env)
    assert shown.returncode == 0, shown.stderr
    assert [line.split()[0] for line in shown.stdout.splitlines()] == [waiting_id, done_id]
    assert "one_choice  queued" in shown.stdout and "created 20" in shown.stdout
    paged = parkway("runs", "--json", "--limit", "1", "--workflow-prefix", "first_", env=env)
    page = json.loads(paged.stdout)
    assert [r["runId"] for r in page["items"]] == [done_id] and page["nextCursor"] is None
    assert parkway("runs", "--status", "done", env=env).returncode == 2
