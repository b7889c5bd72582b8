"""GET /metrics: Prometheus text from counters kept in Redis, through a real server and worker."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from parkway.http.app import hash_key
from parkway.workers.reconciler import reconcile_once
from tests import flows
from tests.conftest import SECRET, Harness
from tests.procs import Worker, wait_for
from tests.test_api import KEY, Server, _api, _sse, _token, _wait_status, close_api_clients

SCRAPER = "metrics-key-" + "m" * 24
TENANT_SYSTEM = "tenant-system-key-" + "t" * 24
METRICS_KEYS = f",{hash_key(SCRAPER)}=metrics,{hash_key(TENANT_SYSTEM)}=system::acme"


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    close_api_clients()


@pytest.fixture
def deployment(redis_url: str, redis_client: redis.Redis) -> Iterator[tuple[Server, redis.Redis]]:
    srv = Server(redis_url, METRICS_KEYS)
    worker = Worker(redis_url, SECRET, env={"PARKWAY_EFFECTS_URL": redis_url})
    try:
        yield srv, redis_client
    finally:
        worker.stop()
        srv.stop()


def _scrape(api: httpx.Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The exposition as {(sample name, sorted labels): value}."""
    response = api.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def _one(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_count_what_runs_did_and_survive_a_new_api_process(
    deployment: tuple[Server, redis.Redis], redis_url: str
) -> None:
    """After runs complete, fail, are cancelled, expire and are resumed (accepted and refused),
    /metrics counts each; the wait histogram counts the accepted resumes; pending by workflow
    matches list_interrupts; a new API process reads the same Redis-kept counts; it needs a key."""
    server, client = deployment
    api = _api(server)
    with httpx.Client(base_url=server.url, timeout=10) as anonymous:
        assert anonymous.get("/metrics").status_code == 401

    answered = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}}).json()["runId"]
    _wait_status(api, answered, "waiting")
    token, _ = _token(api, answered)
    assert api.post("/v1/resume", json={"token": token, "selected": "green"}).status_code == 422  # invalid
    assert api.post("/v1/resume", json={"token": token, "selected": "red"}).status_code == 200  # accepted
    assert api.post("/v1/resume", json={"token": token, "selected": "blue"}).status_code == 409  # already
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    assert api.post("/v1/resume", json={"token": forged, "selected": "red"}).status_code == 404  # unknown
    _wait_status(api, answered, "completed")

    broken = api.post("/v1/runs", json={"workflow": "tests.flows:boom", "input": {}}).json()["runId"]
    _wait_status(api, broken, "failed")
    retried = api.post("/v1/runs", json={"workflow": "tests.flows:flaky", "input": {"tag": "m"}}).json()["runId"]
    _wait_status(api, retried, "completed")  # its third attempt completes

    client.set("test:block:m1", 1)
    blocked = api.post("/v1/runs", json={"workflow": "tests.flows:blocking", "input": {"tag": "m1"}}).json()["runId"]
    wait_for(lambda: client.exists("test:inside:m1"), 20, "the blocking node to run")
    assert api.post(f"/v1/runs/{blocked}/cancel", json={}).json()["outcome"] == "cancelled"
    client.delete("test:block:m1")

    lapsing = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {"ttl_ms": 2000}})
    lapsing_id = lapsing.json()["runId"]
    _wait_status(api, lapsing_id, "waiting")
    lapsed_token, _ = _token(api, lapsing_id)
    assert list(_sse(server, lapsing_id))[-1][0] == "done"  # the worker's reconciler recorded the expiry
    assert api.post("/v1/resume", json={"token": lapsed_token, "selected": "red"}).status_code == 410

    for _ in range(2):
        waiting = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}}).json()["runId"]
        _wait_status(api, waiting, "waiting")
    denied = api.post("/v1/runs", json={"workflow": "tests.flows:denial", "input": {}}).json()["runId"]
    _wait_status(api, denied, "waiting")

    seen = _scrape(_api(server, SCRAPER))
    assert _one(seen, "parkway_runs_finished_total", status="completed", workflow="one_choice") == 1
    assert _one(seen, "parkway_runs_finished_total", status="completed", workflow="flaky") == 1
    assert _one(seen, "parkway_runs_finished_total", status="failed", workflow="boom") == 1
    assert _one(seen, "parkway_runs_finished_total", status="cancelled", workflow="blocking") == 1
    assert _one(seen, "parkway_runs_finished_total", status="expired", workflow="one_choice") == 1
    assert _one(seen, "parkway_resumes_total", outcome="accepted", workflow="one_choice") == 1
    for outcome in ("already_resolved", "expired", "unknown", "invalid"):
        assert _one(seen, "parkway_resumes_total", outcome=outcome, workflow="") == 1, outcome
    assert _one(seen, "parkway_resume_wait_seconds_count", workflow="one_choice") == 1
    assert _one(seen, "parkway_resume_wait_seconds_bucket", le="+Inf", workflow="one_choice") == 1
    assert 0 < _one(seen, "parkway_resume_wait_seconds_sum", workflow="one_choice") < 60
    # two failed attempts of flaky, retried; boom's one, failing its run
    assert _one(seen, "parkway_node_retries_total", workflow="flaky") == 2
    assert _one(seen, "parkway_node_failures_total", workflow="flaky") == 2
    assert _one(seen, "parkway_node_failures_total", workflow="boom") == 1
    # each completed node: one_choice's two (choose, after its answer, and paint) and flaky's
    assert _one(seen, "parkway_node_duration_seconds_count", workflow="one_choice") == 2
    assert _one(seen, "parkway_node_duration_seconds_count", workflow="flaky") == 1
    assert _one(seen, "parkway_node_duration_seconds_bucket", le="600.0", workflow="flaky") == 1
    # begun activations: one per run, and one more for the accepted resume
    assert _one(seen, "parkway_job_attempts_total") == 9
    assert _one(seen, "parkway_recoveries_total") == 0 and _one(seen, "parkway_deferred_total") == 0
    for workflow in ("one_choice", "denial"):
        listed = api.get("/v1/interrupts", params={"workflow": workflow, "limit": 1000}).json()["items"]
        assert _one(seen, "parkway_interrupts_pending", workflow=workflow) == len(listed) > 0, workflow

    again = Server(redis_url, METRICS_KEYS)
    try:
        after = _scrape(_api(again, SCRAPER))
    finally:
        again.stop()
    kept = {k: v for k, v in seen.items() if k[0] != "parkway_resumes_total" or ("outcome", "accepted") in k[1]}
    assert {k: v for k, v in after.items() if k in kept} == kept
    assert _one(after, "parkway_resumes_total", outcome="unknown") == 0  # counted by the old API process


def test_metrics_use_a_registry_per_app() -> None:
    """Two apps in one process each expose their own metrics; the global registry gains none."""
    from prometheus_client import REGISTRY

    from parkway import Parkway, Settings
    from parkway.http.app import create_app

    async def scrape(app: Any) -> str:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app") as local:
            return (await local.get("/metrics")).text

    before = set(REGISTRY._names_to_collectors)
    with Parkway(Settings(secret=SECRET)) as pw:
        for _ in range(2):
            text = anyio.run(scrape, create_app(pw))
            assert "parkway_job_attempts_total 0.0" in text and text.count("# TYPE parkway_runs_finished") == 1
    assert set(REGISTRY._names_to_collectors) == before


def test_recoveries_lost_runs_and_deferrals_are_counted_by_their_scripts(harness: Harness) -> None:
    """Each lost attempt requeued counts a recovery and an attempt, the last one a failed run; an
    activation given back counts as deferred; on both stores."""
    from tests.test_recovery import Recorder, _create

    store, fence = harness.pw.store, 0
    lost = _create(harness, flows.one_choice)
    for _ in range(3):
        store.begin(lost, 0, fence, 0, lease_until=1)
        reconcile_once(store, Recorder(), max_lost=3, now=int(time.time() * 1000))
        fence += 1
    given_back = _create(harness, flows.one_choice)
    store.begin(given_back, 0, 0, 0, lease_until=10**13)
    store.release(given_back, 0, 0, {"step": 0}, 0)
    counters = store.tallies(int(time.time() * 1000)).counters
    assert counters == {"attempts": 4, "recovered": 2, "runs:failed:one_choice": 1, "deferred": 1}


def test_metrics_are_for_a_metrics_key_or_a_system_key_of_no_tenant(deployment: tuple[Server, redis.Redis]) -> None:
    """/metrics counts every tenant's workflows: a machine key, a user key and a system key bound to a
    tenant get 403; a metrics key reads /metrics and nothing else."""
    from tests.test_api import USER_KEY

    server, _ = deployment
    for key in (KEY, USER_KEY, TENANT_SYSTEM):
        assert _api(server, key).get("/metrics").status_code == 403, key
    scraper = _api(server, SCRAPER)
    assert scraper.get("/metrics").status_code == 200
    assert scraper.get("/v1/interrupts").status_code == 403


def test_accepted_resumes_are_the_wait_histograms_count_and_include_the_counter_kept_before() -> None:
    """Accepted resumes by workflow are what the wait histogram counts; counters written before it
    alone counted them (a resumes:accepted field beside the buckets, with or without a workflow) read
    the same, and do not count twice once the buckets grow past them."""
    from parkway.http.metrics import ParkwayCollector, Refused
    from parkway.runtime.store import Tallies

    counters = {
        "resumes:accepted:old": 3, "wait:old:1": 2, "wait:old:+Inf": 1,  # written before: both counted
        "wait:new:10": 4, "wait:new:sum_ms": 9000,  # written now: the histogram alone
        "resumes:accepted:grown": 2, "wait:grown:1": 5,  # both before, then the histogram went on
        "resumes:accepted": 1, "wait:1": 1,  # before counters had a workflow
    }
    tallies = Tallies(counters=counters, wait_buckets=(1, 10), pending={})
    families = {f.name: f for f in ParkwayCollector(lambda: tallies, Refused()).collect()}
    accepted = {s.labels["workflow"]: s.value for s in families["parkway_resumes"].samples
                if s.labels.get("outcome") == "accepted"}
    assert accepted == {"old": 3, "new": 4, "grown": 5, "": 1}
