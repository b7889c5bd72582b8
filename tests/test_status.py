"""`Parkway.status()` and `parkway status`: what a deployment is doing, read from Redis at one moment."""

from __future__ import annotations

import subprocess
import sys

import redis

from parkway import Parkway, Settings
from tests import flows
from tests.conftest import SECRET, Closing, Harness
from tests.procs import ROOT, Worker, wait_for


def test_status_counts_what_waits_what_ended_and_what_is_pending(
    redis_url: str, redis_client: redis.Redis, closing: Closing
) -> None:
    """Before a worker: the queued jobs and how long the oldest has waited; after: none queued, the attempts,
    the failed run and the pending interrupts by workflow."""
    settings = Settings(redis_url=redis_url, secret=SECRET)
    pw = closing(Parkway(settings))
    pw.start(flows.one_choice, {})
    pw.start(flows.one_choice, {})
    pw.start(flows.boom, {})
    before = pw.status()
    assert (before.queued, before.outstanding, before.running, before.workers) == (3, 3, 0, ())
    assert before.oldest_outstanding_ms is not None and before.oldest_outstanding_ms >= 0
    exposed = _scrape(pw)
    assert exposed["parkway_jobs_outstanding"] == 3 and exposed["parkway_activations_running"] == 0
    assert 0 <= exposed["parkway_oldest_job_age_seconds"] < 60
    Harness("redis", pw, settings, redis_client).run_jobs()
    after = pw.status()
    assert (after.queued, after.outstanding, after.oldest_outstanding_ms, after.running) == (0, 0, None, 0)
    assert after.attempts == 3
    assert after.runs_finished == {"completed": 0, "failed": 1, "cancelled": 0, "expired": 0}
    assert after.pending == {"one_choice": 2}
    assert _scrape(pw)["parkway_jobs_outstanding"] == 0 and _scrape(pw)["parkway_oldest_job_age_seconds"] == 0


def _scrape(pw: Parkway) -> dict[str, float]:
    """/metrics' gauges without labels, as the collector exposes them over this client's store."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from parkway.http.metrics import ParkwayCollector, Refused
    from parkway.runtime.clock import now_ms

    registry = CollectorRegistry()
    registry.register(ParkwayCollector(lambda: pw.store.tallies(now_ms()), Refused()))
    text = generate_latest(registry).decode()
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples if not s.labels}


def test_status_shows_the_worker_and_the_activation_it_runs(redis_url: str, redis_client: redis.Redis,
                                                           closing: Closing) -> None:
    """A worker process shows with its pid; while it runs a node, `running now` is 1, in Python and in the CLI
    (whose help says why `rq info` shows the worker idle)."""
    pw = closing(Parkway(Settings(redis_url=redis_url, secret=SECRET)))
    redis_client.set("test:block:status", 1)
    worker = Worker(redis_url, SECRET, env={"PARKWAY_EFFECTS_URL": redis_url})
    try:
        pw.start(flows.blocking, {"tag": "status"})
        wait_for(lambda: redis_client.exists("test:inside:status"), 15, "the node to start")
        status = pw.status()
        assert status.running == 1
        assert [w.pid for w in status.workers] == [worker.proc.pid]
        assert status.workers[0].heartbeat_at is not None
        env = {"PARKWAY_SECRET": SECRET, "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
        shown = subprocess.run([sys.executable, "-m", "parkway.cli", "status", "--redis-url", redis_url],
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=30)
        assert shown.returncode == 0, shown.stderr
        assert "running now: 1 activation(s)" in shown.stdout
        assert f"pid {worker.proc.pid}" in shown.stdout
    finally:
        redis_client.delete("test:block:status")
        worker.stop()
