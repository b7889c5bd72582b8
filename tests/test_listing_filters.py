"""Pending-interrupt listings filtered by audience, tenant, session and creation time, each a
cursor-paged read of an index of its own; bad filters are refused clearly."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest
import redis

from parkway import ValidationError
from parkway.adapters.redis import keys
from parkway.http.app import hash_key
from tests import flows_escalate as fe
from tests import indexes
from tests import session_flows as sf
from tests.conftest import Harness
from tests.procs import wait_for
from tests.test_api import KEY, Server, _api, serving

ACME_KEY = "acme-machine-" + "a" * 24
OTHER_KEY = "other-machine-" + "o" * 24


def _start_many(harness: Harness, n: int, **kw: Any) -> list[str]:
    """Start n runs of asks_audience (input ``kw["data"]``), each parked, a few ms apart; their ids, oldest first.
    An interrupt is created when its run parks: each run is parked before the next starts, so no two
    share a millisecond (a worker parks a batch of runs well within one)."""
    data = kw.pop("data", {})
    out = []
    for _ in range(n):
        out.append(harness.pw.start(fe.asks_audience, data, **kw))
        harness.run_jobs()
        time.sleep(0.003)  # distinct creation times
    return out


def _all_pages(harness: Harness, limit: int, **filters: Any) -> list[str]:
    """Every page of a listing, following its cursor; the run ids in order."""
    seen, cursor = [], None
    while True:
        page = harness.pw.list_interrupts(limit=limit, cursor=cursor, **filters)
        assert len(page.items) <= limit
        seen += [i.run_id for i in page.items]
        if page.next_cursor is None:
            return seen
        cursor = page.next_cursor


def test_an_audience_listing_pages_through_its_own_index(harness: Harness) -> None:
    """Only the interrupts asking an audience are listed for it, newest first, across pages with
    no gap and no repeat; the audience shows on each item and on the interrupt event."""
    ops = _start_many(harness, 5, data={"audience": "team:ops"})
    ann = _start_many(harness, 2, data={"audience": "user:ann"})
    nobody = _start_many(harness, 1)
    assert _all_pages(harness, 2, audience="team:ops") == ops[::-1]
    assert _all_pages(harness, 1, audience="user:ann") == ann[::-1]
    assert _all_pages(harness, 10, audience="team:nobody") == []
    page = harness.pw.list_interrupts(audience="user:ann")
    assert {i.audience for i in page.items} == {"user:ann"}
    assert harness.interrupt_event(ann[0])["audience"] == "user:ann"
    assert "audience" not in harness.interrupt_event(nobody[0])
    assert harness.pw.list_interrupts(run_id=nobody[0]).items[0].audience is None
    # a listing by run id applies the filters too
    assert [i.run_id for i in harness.pw.list_interrupts(run_id=ann[0], audience="user:ann").items] == [ann[0]]
    assert harness.pw.list_interrupts(run_id=ann[0], audience="team:ops").items == ()
    assert harness.pw.list_interrupts(run_id=ann[0], tenant="acme").items == ()
    assert harness.pw.list_interrupts(run_id=ann[0], created_before=0).items == ()


def test_an_answered_interrupt_leaves_its_audience_listing_and_index(harness: Harness) -> None:
    """Answering removes the interrupt from the audience index in the same step (no member left behind)."""
    (run_id,) = _start_many(harness, 1, data={"audience": "team:ops"})
    assert harness.pw.resume(harness.token(run_id), selected="red").accepted
    assert harness.pw.list_interrupts(audience="team:ops").items == ()
    client = harness.pw.store.client  # type: ignore[attr-defined]
    assert indexes.count(client, keys.filter_index("aud", "team:ops")) == 0


def test_only_interrupts_with_an_attribute_write_its_index(harness: Harness) -> None:
    """A run with no audience, tenant or session writes no filter-index member."""
    _start_many(harness, 1)
    client = harness.pw.store.client  # type: ignore[attr-defined]
    names = indexes.indexes(client, keys.PREFIX + ":ix:*")
    assert names == {keys.index("newest", "asks_audience"), keys.index("expiring", "asks_audience")}


def test_the_age_filter_bounds_creation_time_on_every_page(harness: Harness) -> None:
    """created_after / created_before keep the interrupts created in [after, before), paged, with
    and without another filter, in one workflow and across workflows."""
    runs = _start_many(harness, 6, data={"audience": "team:ops"})
    created = {i.run_id: i.created_at for i in harness.pw.list_interrupts(workflow="asks_audience").items}
    after, before = created[runs[1]], created[runs[4]]
    middle = [r for r in runs if after <= created[r] < before][::-1]
    assert middle == runs[1:4][::-1]
    for filters in ({}, {"workflow": "asks_audience"}, {"audience": "team:ops"}):
        assert _all_pages(harness, 2, created_after=after, created_before=before, **filters) == middle, filters
    assert _all_pages(harness, 4, created_before=created[runs[0]] + 1) == [runs[0]]
    assert _all_pages(harness, 4, created_after=created[runs[5]]) == [runs[5]]


def test_a_tenant_listing_shows_its_runs_and_their_children(harness: Harness) -> None:
    """start(tenant=) puts the run's interrupts in its tenant's listing and no other."""
    acme = _start_many(harness, 3, tenant="acme")
    other = _start_many(harness, 1, tenant="other")
    _start_many(harness, 1)
    assert _all_pages(harness, 2, tenant="acme") == acme[::-1]
    assert _all_pages(harness, 2, tenant="other") == other
    assert harness.pw.get_run(acme[0]).interrupt.tenant == "acme"  # type: ignore[union-attr]
    assert _all_pages(harness, 5, tenant="acme", audience="team:ops") == []


def test_a_run_started_again_after_an_expired_answer_keeps_its_tenant(harness: Harness) -> None:
    """resume_or_start's new run is in the old run's tenant (its interrupt lists under it)."""
    old = harness.start_and_run(fe.escalating, {"ttl_ms": 1000}, tenant="acme")
    token = harness.interrupt_event(old)["resumeToken"]
    time.sleep(max(0.0, harness.pw.get_run(old).expires_at / 1000 - time.time()) + 0.05)  # type: ignore[operator]
    # the new run asks for a minute (the old run's 1 s would expire it under a loaded machine's listing)
    started = harness.pw.resume_or_start(token, selected="red", input={"ttl_ms": 60_000})
    assert started.outcome == "started" and started.run_id != old
    harness.run_jobs()
    assert started.run_id in [i.run_id for i in harness.pw.list_interrupts(tenant="acme").items]


def test_a_session_listing_shows_its_branch_runs_interrupts(harness: Harness) -> None:
    """list_interrupts(session=) lists the session's interrupts (and they carry its tenant)."""
    sids = [harness.pw.sessions.open(sf.asking, owner="ada", tenant="acme") for _ in range(3)]
    runs = []
    for sid in sids:
        runs.append(harness.pw.sessions.send(sid, "hello").run_id)
        harness.run_jobs()  # parked before the next starts: creation times (the parks') never tie
        time.sleep(0.003)
    for sid, run_id in zip(sids, runs, strict=True):
        assert _all_pages(harness, 1, session=sid) == [run_id]
    assert _all_pages(harness, 2, tenant="acme") == runs[::-1]
    assert _all_pages(harness, 2, session="no-such-session") == []


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"audience": "team ops"}, "invalid audience"),
        ({"audience": "a:b:c"}, "invalid audience"),
        ({"audience": ""}, "invalid audience"),
        ({"tenant": "acme:1"}, "invalid tenant"),
        ({"session": "s*"}, "invalid session id"),
        ({"created_after": -1}, "created_after"),
        ({"created_before": "yesterday"}, "created_before"),
        ({"created_before": True}, "created_before"),
        ({"audience": "team:ops", "order": "expiring"}, "order 'newest'"),
        ({"created_after": 1, "order": "expiring"}, "order 'newest'"),
        ({"audience": "team:ops", "cursor": "e.0000000000001:0000000000001:run"}, "cursor"),
    ],
)
def test_bad_filters_are_refused_clearly(harness: Harness, filters: dict[str, Any], message: str) -> None:
    """Each bad filter raises ValidationError naming it."""
    with pytest.raises(ValidationError, match=message):
        harness.pw.list_interrupts(**filters)


def test_a_bad_audience_or_tenant_fails_at_its_source(harness: Harness) -> None:
    """use_interrupt(audience=) with a bad audience fails the node; start(tenant=) refuses a bad id."""
    run_id = harness.pw.start(fe.asks_audience, {"audience": "team ops"})
    harness.run_jobs()
    run = harness.pw.get_run(run_id)
    assert run.status.value == "failed" and run.error is not None and "invalid audience" in run.error.message
    with pytest.raises(ValidationError, match="invalid tenant"):
        harness.pw.start(fe.asks_audience, {}, tenant="a b")


def test_the_async_client_takes_the_same_filters(harness: Harness) -> None:
    """AsyncParkway.start(tenant=) and list_interrupts(audience=, tenant=, created_after=) awaited,
    with the same validation."""
    from parkway import AsyncParkway

    async def scenario() -> None:
        pw = AsyncParkway(client=harness.pw)
        run_id = await pw.start(fe.asks_audience, {"audience": "team:ops"}, tenant="acme")
        harness.run_jobs()
        await pw.wait(run_id, timeout=10)
        page = await pw.list_interrupts(audience="team:ops", tenant="acme", created_after=0)
        assert [i.run_id for i in page.items] == [run_id]
        with pytest.raises(ValidationError, match="invalid audience"):
            await pw.list_interrupts(audience="team ops")

    asyncio.run(scenario())


# --- HTTP ------------------------------------------------------------------------------------


@pytest.fixture
def tenant_server(redis_url: str, redis_client: redis.Redis) -> Any:
    with serving(redis_url, f",{hash_key(ACME_KEY)}=machine::acme,{hash_key(OTHER_KEY)}=machine::other") as srv:
        yield srv


def test_a_tenant_bound_key_sees_only_its_tenants_interrupts(tenant_server: Server) -> None:
    """Over HTTP a key bound to a tenant starts runs in it, lists only its interrupts (by filter
    or by run id), and is refused another tenant; an unbound key filters by any."""
    admin, acme, other = _api(tenant_server, KEY), _api(tenant_server, ACME_KEY), _api(tenant_server, OTHER_KEY)
    flow = {"workflow": "tests.flows_escalate:asks_audience", "input": {"audience": "team:ops"}}
    mine = acme.post("/v1/runs", json=flow).json()["runId"]
    theirs = other.post("/v1/runs", json=flow).json()["runId"]
    untenanted = admin.post("/v1/runs", json=flow).json()["runId"]
    assert acme.post("/v1/runs", json={**flow, "tenant": "other"}).status_code == 403

    def listed(client: httpx.Client, **params: Any) -> list[str]:
        return [i["runId"] for i in client.get("/v1/interrupts", params=params).json()["items"]]

    wait_for(lambda: len(listed(admin, audience="team:ops")) == 3, 20, "three pauses")
    assert listed(acme) == [mine] and listed(other) == [theirs]
    assert listed(acme, audience="team:ops") == [mine]
    assert listed(acme, runId=theirs) == [] and listed(acme, runId=untenanted) == []
    assert acme.get("/v1/interrupts", params={"tenant": "other"}).status_code == 403
    assert listed(admin, tenant="other") == [theirs]
    item = acme.get("/v1/interrupts").json()["items"][0]
    assert item["tenant"] == "acme" and item["audience"] == "team:ops"
    bad = admin.get("/v1/interrupts", params={"audience": "team ops"})
    assert bad.status_code == 422 and "audience" in json.dumps(bad.json())
    assert admin.get("/v1/interrupts", params={"createdBefore": "soon"}).status_code == 422
    created = item["createdAt"]
    assert listed(admin, audience="team:ops", createdAfter=created, createdBefore=created + 1) == [mine]



def test_a_tenant_bound_key_cannot_reach_another_tenants_run(tenant_server: Server) -> None:
    """Runs are their tenant's: a key bound to another tenant (or a run with none) gets 404, as for
    no run, for the run, its events, a cancel, a fork and an answer by token, and nothing changes;
    its own tenant's run it reaches as before."""
    admin, acme, other = _api(tenant_server, KEY), _api(tenant_server, ACME_KEY), _api(tenant_server, OTHER_KEY)
    flow = {"workflow": "tests.flows_escalate:asks_audience", "input": {"audience": "team:ops"}}
    theirs = other.post("/v1/runs", json=flow).json()["runId"]
    untenanted = admin.post("/v1/runs", json=flow).json()["runId"]
    mine = acme.post("/v1/runs", json=flow).json()["runId"]
    wait_for(lambda: all(admin.get(f"/v1/runs/{r}").json()["status"] == "waiting" for r in (theirs, untenanted, mine)),
             20, "three pauses")
    token = admin.get("/v1/interrupts", params={"runId": theirs, "tokens": "true"}).json()["items"][0]["resumeToken"]
    for run_id in (theirs, untenanted):
        assert acme.get(f"/v1/runs/{run_id}").status_code == 404
        assert acme.get(f"/v1/runs/{run_id}/events").status_code == 404
        assert acme.post(f"/v1/runs/{run_id}/cancel", json={}).status_code == 404
        assert acme.post(f"/v1/runs/{run_id}/fork", json={"step": 0}).status_code == 404
    assert acme.post("/v1/resume", json={"token": token, "selected": "red"}).status_code == 404
    assert acme.post("/v1/resume-or-start", json={"token": token, "selected": "red"}).status_code == 404
    assert admin.get(f"/v1/runs/{theirs}").json()["status"] == "waiting"
    assert acme.get(f"/v1/runs/{mine}").status_code == 200
    assert other.get(f"/v1/runs/{theirs}").status_code == 200



@pytest.mark.parametrize("how", ["start", "fork", "child"])
def test_a_runs_tenant_is_kept_in_its_summary_and_checked_after_its_records_expire(harness: Harness, how: str) -> None:
    """A run's tenant goes into its summary as well (a fork and a child take their run's): once
    only the summary is left, a caller of another tenant is still refused it, and its own is not."""
    from parkway import RunNotFound
    from parkway.runtime.authority import Caller
    from parkway.runtime.clock import now_ms

    run_id = harness.pw.start(fe.asks_audience, {}, tenant="acme")
    harness.run_jobs()
    if how == "fork":
        run_id = harness.pw.fork(run_id, step=0)
    elif how == "child":
        parent = harness.pw.start(fe.parent_of_escalating, {"policy": "expire"}, tenant="acme")
        harness.run_jobs()
        run_id = harness.pw.store.get_run(parent, now_ms()).waiting_on.removeprefix("child:")
    client = harness.pw.store.client
    assert client.hget(keys.summary(run_id), "tenant") == b"acme"
    client.delete(keys.run(run_id))  # as past its TTL: only the summary is left
    assert harness.pw.store.get_run(run_id, now_ms()).tenant == "acme"
    with pytest.raises(RunNotFound):
        harness.pw.check_run(run_id, Caller("machine", tenant="other"))
    harness.pw.check_run(run_id, Caller("machine", tenant="acme"))



def test_a_session_named_after_a_run_grants_nothing_over_the_runs_children(harness: Harness) -> None:
    """Session ids are chosen by callers and share the hash tag space with run ids: a session cannot
    be named after another tenant's run (its id is in that tenant's scope), and a session of the
    same name in its own tenant's scope opens nothing of that run's children."""
    from parkway import RunNotFound
    from parkway.errors import InvalidId
    from parkway.runtime.authority import Caller
    from parkway.runtime.clock import now_ms

    parent = harness.pw.start(fe.parent_of_escalating, {"policy": "expire"}, tenant="other")
    harness.run_jobs()
    child = harness.pw.store.get_run(parent, now_ms()).waiting_on.removeprefix("child:")
    acme = Caller("machine", tenant="acme")
    with pytest.raises(RunNotFound):
        harness.pw.check_run(child, acme)
    with pytest.raises(InvalidId):
        harness.pw.sessions.open(sf.echo, owner="ada", tenant="acme", session_id=parent)
    assert harness.pw.sessions.open(sf.echo, owner="ada", tenant="acme", session_id=parent.partition("~")[2]) == (
        "acme~" + parent.partition("~")[2])
    with pytest.raises(RunNotFound):
        harness.pw.check_run(child, acme)
    harness.pw.check_run(child, Caller("machine", tenant="other"))


# --- CLI -------------------------------------------------------------------------------------


def test_the_cli_starts_with_a_tenant_and_lists_by_each_filter(redis_client: redis.Redis, redis_url: str) -> None:
    """`parkway run --tenant` and `parkway interrupts --audience/--tenant/--older-than/--newer-than`;
    a bad audience is one error line (exit 1), a bad age a usage error (exit 2)."""
    from tests.test_cli import in_process as parkway

    url = ["--redis-url", redis_url]
    flow = "tests.flows_escalate:asks_audience"
    started = parkway("run", flow, "--input", '{"audience": "team:ops"}', "--tenant", "acme", "--detach", *url)
    assert started.returncode == 0, started.stderr
    other = parkway("run", flow, "--input", '{"audience": "user:ann"}', "--detach", *url)
    assert other.returncode == 0, other.stderr
    assert parkway("worker", "--burst", *url).returncode == 0

    def listed(*flags: str) -> list[dict[str, Any]]:
        done = parkway("interrupts", "--json", *flags, *url)
        assert done.returncode == 0, done.stderr
        items: list[dict[str, Any]] = json.loads(done.stdout)["items"]
        return items

    (ops,) = listed("--audience", "team:ops")
    assert ops["audience"] == "team:ops" and ops["tenant"] == "acme"
    assert [i["audience"] for i in listed("--tenant", "acme")] == ["team:ops"]
    assert [i["audience"] for i in listed("--audience", "user:ann")] == ["user:ann"]
    assert len(listed("--newer-than", "1h")) == 2 and listed("--older-than", "1h") == []
    human = parkway("interrupts", "--audience", "team:ops", *url)
    assert "asks team:ops, tenant acme" in human.stdout
    bad = parkway("interrupts", "--audience", "team ops", *url)
    assert bad.returncode == 1 and "invalid audience" in bad.stderr
    assert parkway("interrupts", "--older-than", "soon", *url).returncode == 2


def test_a_record_written_before_audience_and_tenant_reads_them_as_none() -> None:
    """An interrupt record of the shape before this change (two fields fewer) still decodes; a
    shorter one is corrupt."""
    from parkway.adapters import codec
    from parkway.adapters.redis import layout
    from parkway.runtime.errors import CorruptRecord

    old = ["int_1", "ask", 0, "i:color", {"kind": "text", "question": "?"}, 1, 2, None, None, None, "v1"]
    record = layout.interrupt_from_blob("run_1", "wf", "h", codec.encode(old), "int_1")
    assert (record.audience, record.tenant, record.version) == (None, None, "v1")
    with pytest.raises(CorruptRecord):
        layout.interrupt_from_blob("run_1", "wf", "h", codec.encode(old[:-1]), "int_1")
