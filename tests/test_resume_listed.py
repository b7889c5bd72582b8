"""Answering an interrupt the client has read (listed or looked up) needs no lookup first: the commit
checks it is still the same pending interrupt, and says why not as a lookup would."""

from __future__ import annotations

import time

import pytest
import redis

from parkway import InvalidAnswer, Parkway, ResumeOutcome, RunStatus, Settings
from parkway.client.views import ReadInterrupts
from parkway.runtime.store import InterruptRecord
from parkway.workers.reconciler import reconcile_once
from tests import flows
from tests.conftest import SECRET, Closing, Harness
from tests.procs import RedisServer, sent_commands


def _scripts_run(client: redis.Redis) -> int:
    """Script calls that ran (a function's first call on a new server fails, then it is loaded)."""
    stats = client.info("commandstats").get("cmdstat_fcall", {})
    return int(stats.get("calls", 0)) - int(stats.get("failed_calls", 0)) - int(stats.get("rejected_calls", 0))


def test_an_interrupt_the_client_listed_is_answered_in_one_script_call(
    private_redis: RedisServer, closing: Closing
) -> None:
    """Listed with its token, then answered: one script call (the commit). A client that never read
    the interrupt (here: a second one, given the token) looks it up first: two."""
    settings = Settings(redis_url=private_redis.url, secret=SECRET)
    lister, other = closing(Parkway(settings)), closing(Parkway(settings))
    client = closing(redis.Redis.from_url(private_redis.url))
    harness = Harness("redis", lister, settings, client)
    first, second = harness.start_and_run(flows.one_choice), harness.start_and_run(flows.one_choice)
    token = harness.token(first)
    client.config_resetstat()
    assert lister.resume(token, selected="red").accepted
    assert _scripts_run(client) == 1
    unread = harness.token(second)
    other_client_stats_from = _scripts_run(client)
    assert other.resume(unread, selected="blue").accepted
    assert _scripts_run(client) - other_client_stats_from == 2
    harness.run_jobs()
    assert [lister.get_run(r).output["painted"] for r in (first, second)] == ["red", "blue"]  # type: ignore[index]


def test_a_listed_interrupt_answered_elsewhere_reads_already_resolved(
    redis_url: str, redis_client: redis.Redis, closing: Closing
) -> None:
    """Client A lists the interrupt, client B answers it: A's answer, checked against what A listed,
    gets already_resolved from the commit, and the run goes on with B's answer only. An answer that
    does not fit what A listed gets already_resolved too, not InvalidAnswer (as after a lookup)."""
    settings = Settings(redis_url=redis_url, secret=SECRET)
    a, b = closing(Parkway(settings)), closing(Parkway(settings))
    harness = Harness("redis", a, settings, redis_client)
    run_id, other = harness.start_and_run(flows.one_choice), harness.start_and_run(flows.one_choice)
    token, other_token = harness.token(run_id), harness.token(other)
    assert b.resume(token, selected="blue").accepted
    assert b.resume(other_token, selected="blue").accepted
    result = a.resume(token, selected="red")
    assert result.outcome is ResumeOutcome.ALREADY_RESOLVED
    assert result.request_id is not None and result.request_id.endswith(run_id)
    assert a.resume(other_token, selected="green").outcome is ResumeOutcome.ALREADY_RESOLVED
    harness.run_jobs()
    assert a.get_run(run_id).output == a.get_run(other).output == {"picked": "blue", "painted": "blue"}


def test_a_wrong_answer_to_a_listed_interrupt_leaves_it_open_for_the_right_one(harness: Harness) -> None:
    run_id = harness.start_and_run(flows.one_choice)
    token = harness.token(run_id)
    with pytest.raises(InvalidAnswer, match="unknown option"):
        harness.pw.resume(token, selected="green")
    assert harness.pw.resume(token, selected="red").accepted
    assert harness.pw.resume(token, selected="blue").outcome is ResumeOutcome.ALREADY_RESOLVED
    harness.run_jobs()
    harness.pw.wait(run_id, timeout=10)
    assert harness.pw.get_run(run_id).output == {"picked": "red", "painted": "red"}


def test_a_listed_interrupt_past_its_expiry_reads_expired(harness: Harness) -> None:
    """Listed while pending, answered after its TTL (before any reconciler pass): expired, as a
    lookup would say; the run is not resumed (it reads waiting, its interrupt's expiry past, until the
    reconciler ends it expired)."""
    # 2.5 s: the start, its job and the listing take well under a second, on a loaded machine too
    run_id = harness.start_and_run(flows.one_choice, {"ttl_ms": 2500})
    token = harness.token(run_id)
    expires_at = harness.pw.list_interrupts(run_id=run_id).items[0].expires_at
    time.sleep(max(0.0, expires_at / 1000 - time.time()) + 0.05)
    assert harness.pw.resume(token, selected="red").outcome is ResumeOutcome.EXPIRED
    assert harness.pw.get_run(run_id).status in (RunStatus.WAITING, RunStatus.EXPIRED)  # not queued
    reconcile_once(harness.pw.store, harness.pw.backend.dispatcher)
    assert harness.pw.get_run(run_id).status is RunStatus.EXPIRED


def _record(i: int) -> InterruptRecord:
    return InterruptRecord(
        request_id=f"req{i}", run_id=f"run{i}", workflow="w", node="n", step=0, journal_field="f",
        request=None, created_at=0, expires_at=1, token_hash=f"hash{i}",
    )


def test_a_client_keeps_the_interrupts_it_read_last_up_to_its_bound() -> None:
    read = ReadInterrupts(3)
    for i in range(4):
        read.put(_record(i))
    read.put(_record(1))  # read again: the newest once more
    read.put(_record(4))
    assert [read.get(f"run{i}", f"req{i}") is not None for i in range(5)] == [False, True, False, True, True]
    assert read.get("run1", "req3") is None  # a run's own interrupt only
    read.forget("run1", "req1")
    assert read.get("run1", "req1") is None


def test_a_wrong_answer_is_refused_after_one_read_of_the_interrupt(
    redis_url: str, redis_client: redis.Redis, closing: Closing
) -> None:
    """A bare token and a wrong answer: the lookup, then the refusal (its lifecycle record counts it);
    no second read. From what the client listed: the one read is the check that it is still open."""
    settings = Settings(redis_url=redis_url, secret=SECRET)
    lister, cold = closing(Parkway(settings)), closing(Parkway(settings))
    harness = Harness("redis", lister, settings, redis_client)
    run_id = harness.start_and_run(flows.one_choice)
    token = harness.token(run_id)
    for client in (cold, lister):
        with sent_commands(this_thread=True) as sent, pytest.raises(InvalidAnswer):
            client.resume(token, selected="green")
        assert len(sent) == 2, sent
    interrupt = lister.get_interrupt(lister.list_interrupts(run_id=run_id).items[0].request_id)
    assert interrupt.lifecycle is not None and interrupt.lifecycle.failures == 2
