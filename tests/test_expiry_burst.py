"""A burst of due interrupts never loses an expiry: every one is recorded and its policy applied,
late perhaps, never skipped, however many fall due at once and however short the grace after which
Redis would delete a parked run's records."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from parkway import ConfigError, Parkway, RunStatus, Settings
from parkway.adapters.limits import Limits
from parkway.adapters.redis import keys, layout
from parkway.adapters.redis.layout import full_id
from parkway.runtime.clock import now_ms
from parkway.workers.reconciler import reconcile_once, watch_backlog
from tests import flows, flows_expiry
from tests.conftest import SECRET, Closing, Harness
from tests.procs import Worker

GRACE_MS = 1000
BURST_GRACE_MS = 3000
"""the workers' grace in the burst: short enough that one lock holder doing 200 a second loses
expiries, long enough that a loaded machine's scheduling does not (a worker's threads may wait
hundreds of milliseconds for a core)"""
POLICIES: dict[str, tuple[Any, RunStatus, dict[str, Any] | None]] = {
    "expire": (None, RunStatus.EXPIRED, None),
    "fail": ("fail", RunStatus.FAILED, None),
    "cancel": ("cancel", RunStatus.COMPLETED, {"picked": None, "cancelled": "expired"}),
    "answer": ({"answer": "blue"}, RunStatus.COMPLETED, {"picked": "blue"}),
}


@pytest.fixture
def short_grace(redis_url: str, redis_client: redis.Redis, closing: Closing) -> Harness:
    settings = Settings(redis_url=redis_url, secret=SECRET, limits=Limits(expiry_grace_ms=GRACE_MS))
    return Harness("redis", closing(Parkway(settings)), settings, redis_client)


def test_an_overdue_run_keeps_its_records_past_the_grace_until_its_expiry_is_recorded(short_grace: Harness) -> None:
    """A reconciler that sees an interrupt a quarter of the grace past its expiry keeps its run's
    records a grace from then: recorded after the grace has gone by, the expiry still applies its
    policy (the node replays with the cancellation) instead of finding the run gone."""
    pw = short_grace.pw
    run_id = pw.start(flows_expiry.until, {"policy": "cancel", "deadline": now_ms() + 1500})
    short_grace.run_jobs()
    expires = short_grace.interrupt_event(run_id)["expiresAt"]
    time.sleep(max(0.0, expires + GRACE_MS / 2 - now_ms()) / 1000)
    watch_backlog(pw.store, now_ms(), GRACE_MS)
    time.sleep(max(0.0, expires + GRACE_MS + 300 - now_ms()) / 1000)  # past the grace park gave it
    assert reconcile_once(pw.store, pw.backend.dispatcher, grace_ms=GRACE_MS).expired == [run_id]
    short_grace.run_jobs()
    run = pw.get_run(run_id)
    assert run.status is RunStatus.COMPLETED and run.output is not None
    assert {k: run.output[k] for k in ("picked", "cancelled")} == {"picked": None, "cancelled": "expired"}


def test_an_overdue_runs_summary_is_kept_the_retention_past_its_extended_records(
    redis_url: str, redis_client: redis.Redis, closing: Closing
) -> None:
    """When a reconciler keeps an overdue run's records a grace from now, its summary is kept the
    retention past that new end (a retention shorter than the grace shows it: the summary's old
    end is passed), so the run reads expired, not unknown, once the records go."""
    retention, grace = 1000, 3000  # the least retention there is
    settings = Settings(redis_url=redis_url, secret=SECRET,
                        limits=Limits(expiry_grace_ms=grace, retention_ms=retention))
    h = Harness("redis", closing(Parkway(settings)), settings, redis_client)
    run_id = h.pw.start(flows_expiry.until, {"policy": "cancel", "deadline": now_ms() + 300})
    h.run_jobs()
    expires = h.interrupt_event(run_id)["expiresAt"]
    before = redis_client.pexpiretime(keys.summary(run_id))
    time.sleep(max(0.0, expires + retention + 200 - now_ms()) / 1000)  # a grace from now: past the summary's end
    watch_backlog(h.pw.store, now_ms(), grace)
    records, summary = (redis_client.pexpiretime(k) for k in (keys.run(run_id), keys.summary(run_id)))
    assert records > before - retention  # extended past their old end
    assert summary == records + retention


def test_an_overdue_child_run_keeps_its_parent_too(redis_url: str, redis_client: redis.Redis, closing: Closing) -> None:
    """A child run's overdue interrupt keeps its parent's records as well as its own (as park
    keeps them): recorded after the grace, the child's expiry still reaches the parent, whose node
    catches ChildFailed("expired") and completes."""
    grace = 3000
    # the runs live 2.5 s (the child's question 1 s): less than the child's expiry + grace that park gives
    # them both, so only the hold keeps the parent, and long enough that the completed parent's output is
    # still there to read when a loaded machine's burst worker has returned
    settings = Settings(redis_url=redis_url, secret=SECRET, ttl_ms=2500, limits=Limits(expiry_grace_ms=grace))
    harness = Harness("redis", closing(Parkway(settings)), settings, redis_client)
    pw = harness.pw
    run_id = pw.start(flows.awaits_brief, {})
    harness.run_jobs()
    child = next(c for c in redis_client.keys(f"pw:{{{run_id}}}:*:run")).decode().split(":")[2]
    expires = int(redis_client.hget(keys.run(child), "expires") or 0)
    time.sleep(max(0.0, expires + grace / 2 - now_ms()) / 1000)
    watch_backlog(pw.store, now_ms(), grace)
    time.sleep(max(0.0, expires + grace + 300 - now_ms()) / 1000)  # past the grace park gave them both
    assert reconcile_once(pw.store, pw.backend.dispatcher, grace_ms=grace).expired == [child]
    harness.run_jobs()
    run = pw.get_run(run_id)
    assert run.status is RunStatus.COMPLETED and run.output is not None and run.output["caught"] == "expired", run


@pytest.fixture
def two_workers(redis_url: str, redis_client: redis.Redis) -> Iterator[list[Worker]]:
    """Two `parkway worker` processes whose parked runs' records outlive an expiry by three seconds."""
    env = {"PARKWAY_EXPIRY_GRACE_MS": str(BURST_GRACE_MS)}
    procs = [Worker(redis_url, SECRET, env=env) for _ in range(2)]
    yield procs
    outputs = [p.stop() for p in procs]
    for out in outputs:
        assert "Traceback" not in out, out[-3000:]


@pytest.mark.slow
def test_every_interrupt_of_a_burst_is_expired_with_its_policy_applied_by_two_workers(
    short_grace: Harness, two_workers: list[Worker], redis_client: redis.Redis
) -> None:
    """800 interrupts falling due together (a quarter under each policy: expire, fail, cancel,
    answer) with a grace of three seconds and two workers: every run's summary comes to say the end its
    policy gives, the run reads so, its interrupt's lifecycle record says expired, its stream holds
    one interrupt.expired and ends with done, and the runs:expired and runs:failed counters count them."""
    pw, per_policy = short_grace.pw, 200
    deadline = now_ms() + 8000
    runs = {
        pw.start(flows_expiry.until, {"policy": policy, "deadline": deadline}): name
        for name, (policy, _, _) in POLICIES.items()
        for _ in range(per_policy)
    }

    events: dict[str, list[str]] = {}

    def ended() -> bool:
        """Reads the stream of each run as soon as its summary shows its end (the records of a run
        that ended expired or failed live only what was left of their grace: a slow read may find
        them gone, the summary then speaks for them)."""
        waiting = [r for r in runs if r not in events]
        pipe = redis_client.pipeline(transaction=False)
        for run_id in waiting:
            pipe.hget(keys.summary(run_id), "status")
        for run_id, status in zip(waiting, pipe.execute(), strict=True):
            if status == POLICIES[runs[run_id]][1].value.encode():
                events[run_id] = [e.type for e in pw.store.read_events(run_id, "0", None, 1000)]
        return len(events) == len(runs)

    deadline_s = time.time() + 90  # (the per-test timeout is 120 s)
    while not ended() and time.time() < deadline_s:
        time.sleep(0.1)
    unended = Counter(f"{runs[r]}:{(redis_client.hget(keys.summary(r), 'status') or b'-').decode()}"
                      for r in runs if r not in events)
    gone = sum(not redis_client.exists(keys.run(r)) for r in runs if r not in events)
    assert unended == Counter(), (unended, f"{gone} of them without records")
    wrong: Counter[str] = Counter()
    for run_id, name in runs.items():
        _, status, output = POLICIES[name]
        run = pw.get_run(run_id)
        ends = [f.decode() for f in redis_client.hkeys(keys.summary(run_id)) if f.startswith(b"e:")]
        lifecycle = pw.get_interrupt(full_id(ends[0][2:-2], run_id), run_id=run_id).lifecycle if ends else None
        types = events[run_id]
        checks = {
            "status": run.status is status,
            "output": output is None or {k: (run.output or {}).get(k) for k in output} == output,
            "lifecycle": len(ends) == 1 and lifecycle is not None and lifecycle.outcome == "expired",
            "events": (not types and status is not RunStatus.COMPLETED)
            or (types.count("interrupt.expired") == 1 and types[-1] == "done"),
        }
        wrong.update(f"{name}:{what}" for what, ok in checks.items() if not ok)
    assert wrong == Counter(), wrong
    counters = {k.decode(): int(v) for k, v in redis_client.hgetall(keys.metrics()).items()}
    assert sum(v for k, v in counters.items() if k.startswith("runs:expired:")) == per_policy
    assert sum(v for k, v in counters.items() if k.startswith("runs:failed:")) == per_policy


def test_the_expiry_grace_is_a_setting(redis_url: str, redis_client: redis.Redis, closing: Closing) -> None:
    """PARKWAY_EXPIRY_GRACE_MS sets how long a parked run's records outlive its interrupt's expiry
    (60 s by default, at least 100 ms)."""
    assert Settings.from_env({}).limits.expiry_grace_ms == 60_000
    settings = Settings.from_env({"PARKWAY_EXPIRY_GRACE_MS": "5000", "PARKWAY_RETENTION_MS": "9000"},
                                 redis_url=redis_url, secret=SECRET)
    assert settings.limits == Limits(retention_ms=9000, expiry_grace_ms=5000)
    harness = Harness("redis", closing(Parkway(settings)), settings, redis_client)
    run_id = harness.start_and_run(flows_expiry.until, {"deadline": now_ms() + 20_000})
    expires = harness.interrupt_event(run_id)["expiresAt"]
    left = expires + 5000 - now_ms()
    slack = left // layout.RENEW_SLACK  # renewed, the records are given a slack past it
    assert left - 300 < redis_client.pttl(keys.run(run_id)) <= left + slack + 50  # (Redis's clock and ours)
    for bad in ("soon", "50"):
        with pytest.raises(ConfigError):
            Settings.from_env({"PARKWAY_EXPIRY_GRACE_MS": bad})


def test_the_oldest_overdue_interrupt_is_a_metric_and_a_log_line(short_grace: Harness) -> None:
    """An interrupt past its expiry that no reconciler has recorded shows on /metrics
    (parkway_interrupts_overdue, parkway_interrupt_overdue_seconds: the oldest one's lateness), and
    the reconciler's watch logs expiry_overdue once it is 5 s late; recorded, both read 0."""
    from prometheus_client import CollectorRegistry, generate_latest
    from structlog.testing import capture_logs

    from parkway.http.metrics import ParkwayCollector, Refused

    pw = short_grace.pw
    run_id = pw.start(flows_expiry.until, {"deadline": now_ms() + 1000})
    short_grace.run_jobs()
    expires = short_grace.interrupt_event(run_id)["expiresAt"]
    late = expires + 6000  # as a reconciler would see it 6 s after the deadline (its clock injected)

    def scrape() -> dict[str, float]:
        registry = CollectorRegistry()
        registry.register(ParkwayCollector(lambda: pw.store.tallies(late), Refused()))
        lines = generate_latest(registry).decode().splitlines()
        return {n: float(v) for n, v in (line.split(" ") for line in lines if line.startswith("parkway_interrupt")
                                          and "overdue" in line)}

    assert scrape() == {"parkway_interrupts_overdue": 1.0, "parkway_interrupt_overdue_seconds": 6.0}
    with capture_logs() as logs:
        watch_backlog(pw.store, late, GRACE_MS, extend=False)
    assert [(e["interrupts"], e["oldest_overdue_ms"]) for e in logs if e["event"] == "expiry_overdue"] == [(1, 6000)]
    reconcile_once(pw.store, pw.backend.dispatcher, now=late, grace_ms=GRACE_MS)
    assert scrape() == {"parkway_interrupts_overdue": 0.0, "parkway_interrupt_overdue_seconds": 0.0}


def test_a_listing_past_a_backlog_of_expired_interrupts_takes_a_few_round_trips(short_grace: Harness) -> None:
    """500 interrupts past their expiry that no reconciler has recorded yet: the newest-first
    listing of the pending ones reads past them in a few round trips (it knows from the expiring
    index that none is left unexpired), not one per page of members."""
    from tests.procs import sent_commands, wait_for

    pw = short_grace.pw
    deadline = now_ms() + 1000
    for _ in range(500):
        pw.start(flows_expiry.until, {"deadline": deadline})
    short_grace.run_jobs()
    wait_for(lambda: sum(pw.store.tallies(now_ms()).pending.values()) == 0, 30, "every one past its expiry")
    with sent_commands() as sent:
        page = pw.list_interrupts(workflow="until", limit=50)
    assert page.items == ()
    assert len(sent) <= 3, len(sent)
