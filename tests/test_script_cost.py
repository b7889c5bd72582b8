"""What a cycle's transitions cost Redis (issue 22): the commands each script runs, counted with
INFO commandstats on a server of the test's own, for the work the transition does and no more."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from parkway import Parkway, RunStatus, Settings, Workflow, use_step
from parkway.adapters.redis import keys, layout
from parkway.runtime.clock import now_ms
from parkway.runtime.store import Advance, JournalEntry
from tests import flows
from tests.conftest import SECRET, Harness, format_2_reader
from tests.procs import RedisServer

recorder = Workflow("recorder")


@recorder.node(start=True)
def record(data: dict[str, Any]) -> dict[str, Any]:
    return {"noted": use_step("note", lambda: 1)}


@pytest.fixture
def private(tmp_path: Path) -> Iterator[tuple[Harness, redis.Redis]]:
    """A harness on a server of the test's own, so INFO commandstats counts only this test's commands."""
    server = RedisServer(tmp_path, appendonly=False)
    server.start()
    client = redis.Redis.from_url(server.url)
    settings = Settings(redis_url=server.url, secret=SECRET)
    try:
        with Parkway(settings) as pw:
            yield Harness("redis", pw, settings, client), client
    finally:
        client.close()
        server.stop()


def _calls(client: redis.Redis) -> dict[str, int]:
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in client.info("commandstats").items()}


def _parked(harness: Harness, plain: bool = False) -> tuple[str, str]:
    """A parked run of flows.one_choice and its token; ``plain``: with a reader of no format 3 alive, so
    that its resume begins no attempt (it costs what resume.lua did before format 3)."""
    run_id = harness.start_and_run(flows.one_choice)
    if plain:
        assert harness.connection is not None
        format_2_reader(harness.pw, harness.connection)
    return run_id, harness.token(run_id)


def test_an_advance_deletes_no_journal_its_step_never_wrote(private: tuple[Harness, redis.Redis]) -> None:
    """A node that recorded nothing ends without a DEL of its step's journal (there is none); one that
    recorded something ends with its journal deleted."""
    harness, client = private
    run_id = harness.pw.start(flows.one_choice, {})  # its job left queued: the test begins it by hand
    store = harness.pw.store
    now = now_ms()
    store.begin(run_id, 0, 0, now, now + 60_000)
    client.config_resetstat()
    store.advance(run_id, 0, 0, Advance({}, "paint", None, [], now_ms(), "one_choice", None, journal_written=False))
    assert "del" not in _calls(client)
    store.write_entry(run_id, 1, 1, "workflow", "note", 1, None, now_ms())  # not the journal: still none
    harness.pw.store.advance(run_id, 1, 1, Advance({}, None, {}, [], now_ms(), "one_choice"))
    assert _calls(client)["del"] == 1  # journal_written's default: a store that is not told deletes

    recorded = harness.start_and_run(recorder)
    assert harness.pw.get_run(recorded).status is RunStatus.COMPLETED
    assert not client.exists(keys.journal(recorded, 0))  # the executor said its node wrote one
    stepped = harness.start_and_run(flows.stepper, {"tag": "cost"})
    assert harness.pw.resume(harness.token(stepped), selected="red").accepted
    harness.run_jobs()
    assert harness.pw.get_run(stepped).status is RunStatus.COMPLETED
    assert not client.exists(keys.journal(stepped, 0))  # its replay read one


def test_a_quick_resume_reads_no_folded_event_and_puts_none_back(private: tuple[Harness, redis.Redis]) -> None:
    """A resume while the parked run's stream is still there (its wake copy, FOLD_WAKE_MS after the
    park) only drops the events park folded into the run's hash and gives the stream the records'
    life: none is read from the hash or put back, and the run's events read as before; the
    interrupt's status is read with the fence check, and the wait histogram alone counts the resume."""
    harness, client = private
    for _ in range(5):  # the stream's wake copy lives 1 s: a loaded machine may reach it too late
        run_id, token = _parked(harness, plain=True)
        if client.pexpire(keys.events(run_id), 60_000):  # as quick as the test needs, from here on
            break
    else:
        pytest.fail("each parked run's stream was gone before the test could keep it")
    client.config_resetstat()
    assert harness.pw.resume(token, selected="red").accepted
    calls = _calls(client)
    assert calls["xadd"] == 1 and calls["hmget"] == 1 and "hget" not in calls, calls  # the answer's event
    assert calls["hincrby"] == 2, calls  # the wait's bucket and its sum
    assert not client.hexists(keys.run(run_id), layout.folded_event_field(0))
    assert 0 < client.pttl(keys.events(run_id)) <= client.pttl(keys.run(run_id)) + 50
    harness.run_jobs()
    types = [e.type for e in harness.pw.store.read_events(run_id, "0", None, 100)]
    assert types == ["run.started", "node.started", "interrupt", "interrupt.resumed", "node.started", "node.completed",
                     "node.started", "node.completed", "run.completed", "done"]


def test_a_late_resume_puts_the_folded_events_back_in_order(private: tuple[Harness, redis.Redis]) -> None:
    """A resume after the parked run's stream is gone puts every folded event back with its id, before
    the answer's, and the run's stream then lives as long as its records."""
    harness, client = private
    run_id, token = _parked(harness, plain=True)
    before = harness.pw.store.read_events(run_id, "0", None, 100)
    client.delete(keys.events(run_id))  # what its TTL does
    assert harness.pw.resume(token, selected="red").accepted
    assert not client.hexists(keys.run(run_id), layout.folded_event_field(0))
    after = harness.pw.store.read_events(run_id, "0", None, 100)
    assert [e.id for e in after[: len(before)]] == [e.id for e in before]
    assert [e.type for e in after[len(before) :]] == ["interrupt.resumed"]
    assert 0 < client.pttl(keys.events(run_id)) <= client.pttl(keys.run(run_id)) + 50


def test_a_late_resume_that_begins_its_attempt_puts_the_folded_events_back_before_its_own(
    private: tuple[Harness, redis.Redis],
) -> None:
    """A resume that begins the attempt (stored format 3, the queue empty) after the parked run's stream
    is gone puts every folded event back with its id, then appends the answer's event and node.started."""
    harness, client = private
    run_id, token = _parked(harness)
    before = harness.pw.store.read_events(run_id, "0", None, 100)
    client.delete(keys.events(run_id))
    assert harness.pw.resume(token, selected="red").accepted
    after = harness.pw.store.read_events(run_id, "0", None, 100)
    assert [e.id for e in after[: len(before)]] == [e.id for e in before]
    assert [e.type for e in after[len(before) :]] == ["interrupt.resumed", "node.started"]
    assert 0 < client.pttl(keys.events(run_id)) <= client.pttl(keys.run(run_id)) + 50


def test_a_begin_reads_no_workflow_state_until_a_node_asks_for_it(private: tuple[Harness, redis.Redis]) -> None:
    """Beginning a node reads neither the run's workflow state nor, for the run's first attempt, a
    journal (there is none yet), and appends node.started to a stream that is there without asking
    its TTL; a node that asks for the state reads it then, with what the run's earlier nodes wrote."""
    harness, client = private
    run_id = harness.pw.start(flows.one_choice, {})
    now = now_ms()
    client.config_resetstat()
    attempt = harness.pw.store.begin(run_id, 0, 0, now, now + 60_000)
    calls = _calls(client)
    assert "hgetall" not in calls and "pttl" not in calls, calls  # no journal yet; its stream is there
    harness.pw.store.write_entry(run_id, 0, 0, "workflow", "ticket", "T-1", None, now_ms())
    client.config_resetstat()
    assert dict(attempt.workflow_state) == {"ticket": "T-1"}  # read now, once
    assert attempt.workflow_state["ticket"] == "T-1" and _calls(client)["hgetall"] == 1

    shared = harness.start_and_run(flows.shared_state, {})
    assert harness.pw.get_run(shared).status is RunStatus.COMPLETED



def test_a_counter_bumped_by_zero_is_not_sent(private: tuple[Harness, redis.Redis]) -> None:
    """A node that ran under a millisecond adds 0 to its duration histogram's sum: the advance counts
    it in its bucket and sends nothing for the sum, which reads the same."""
    harness, client = private
    run_id = harness.pw.start(flows.one_choice, {})
    now = now_ms()
    harness.pw.store.begin(run_id, 0, 0, now, now + 60_000)
    client.config_resetstat()
    harness.pw.store.advance(run_id, 0, 0, Advance({}, "paint", None, [], now_ms(), "one_choice", 0.2))
    assert _calls(client)["hincrby"] == 1
    counters = harness.pw.store.tallies(now_ms()).counters
    assert counters["node:one_choice:0.01"] == 1 and "node:one_choice:sum_ms" not in counters
    harness.pw.store.advance(run_id, 1, 1, Advance({}, None, {}, [], now_ms(), "one_choice", 7.4))
    assert harness.pw.store.tallies(now_ms()).counters["node:one_choice:sum_ms"] == 7


def test_a_cycle_reads_its_records_ttl_from_the_run_hash_and_asks_redis_none(
    private: tuple[Harness, redis.Redis],
) -> None:
    """With a TTL long enough for the callers' clock margin (the default 15 minutes), park, resume and
    the advances read the records' remaining life from the run hash's ``until`` (written by the start,
    and by every script that sets the records' TTL) instead of asking Redis with a PTTL; the records
    keep at least the run's TTL, and ``until`` is never later than their real expiry."""
    harness, client = private
    client.config_resetstat()
    run_id, token = _parked(harness)
    assert harness.pw.resume(token, selected="red").accepted
    harness.run_jobs()
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.COMPLETED
    calls = _calls(client)
    assert "pttl" not in calls, calls
    left, ttl = client.pttl(keys.run(run_id)), int(client.hget(keys.run(run_id), "ttl") or 0)
    assert left >= ttl, (left, ttl)  # given the slack at the start: still within it
    assert int(client.hget(keys.run(run_id), "until") or 0) <= now_ms() + left + 5


def test_an_until_within_the_clock_margin_of_the_need_is_not_trusted(private: tuple[Harness, redis.Redis]) -> None:
    """``until`` is trusted only with CLOCK_TRUST_MS to spare: a run hash whose ``until`` claims its
    records have the run's TTL and 4 s more (a writer's clock 4 s ahead, say) while they really have
    less is asked with a PTTL at the resume, and renewed to the run's TTL."""
    harness, client = private
    run_id, token = _parked(harness)
    ttl = int(client.hget(keys.run(run_id), "ttl") or 0)
    assert ttl >= 8 * layout.CLOCK_TRUST_MS  # the default TTL: long enough for until to be read at all
    client.pexpire(keys.run(run_id), ttl - 60_000)
    client.hset(keys.run(run_id), "until", now_ms() + ttl + layout.CLOCK_TRUST_MS - 1_000)
    client.config_resetstat()
    assert harness.pw.resume(token, selected="red").accepted
    assert "pttl" in _calls(client)
    assert client.pttl(keys.run(run_id)) >= ttl - 50


def test_a_hand_off_registers_its_queue_when_it_finds_it_empty(private: tuple[Harness, redis.Redis]) -> None:
    """A job pushed onto an empty queue registers the queue in RQ's set of queues; one pushed behind
    others does not do it again (the push before it did, and RQ unregisters a queue only with its list)."""
    harness, client = private
    queues = "rq:queues"  # RQ's Queue.redis_queues_keys
    client.delete(queues)
    harness.pw.start(flows.one_choice, {})  # its job stays queued: no worker runs here
    registered = client.smembers(queues)
    assert len(registered) == 1, registered
    client.config_resetstat()
    harness.pw.start(flows.one_choice, {})
    assert "sadd" not in _calls(client)
    assert client.llen(next(iter(registered))) == 2 and client.smembers(queues) == registered


def test_a_runs_first_attempt_reads_no_journal_and_a_later_one_reads_what_it_wrote(
    private: tuple[Harness, redis.Redis],
) -> None:
    """A run's first attempt reads no journal (nothing can be in it before an attempt begins); every
    attempt after that reads it: one that takes over a lapsed lease finds the step the first recorded."""
    harness, client = private
    store = harness.pw.store
    run_id = harness.pw.start(flows.one_choice, {})
    now = now_ms()
    first = store.begin(run_id, 0, 0, now, now + 1)  # its lease lapses at once
    assert first.journal == {}
    store.write_entry(run_id, 0, 0, "journal", "s:note", JournalEntry("step", "note", 1), None, now_ms())
    time.sleep(0.01)
    client.config_resetstat()
    again = store.begin(run_id, 0, 0, now_ms(), now_ms() + 60_000)
    assert _calls(client)["hgetall"] == 1
    assert again.journal == {"s:note": JournalEntry("step", "note", 1)}, again.journal


def test_a_completed_runs_last_step_writes_no_snapshot_and_forks_from_its_hash(
    private: tuple[Harness, redis.Redis],
) -> None:
    """The advance that ends a run writes no snapshot of its last step (the run's hash keeps that step
    and its node, which fork reads): a single-step run has no snapshot key, and a fork of its step runs."""
    harness, client = private
    run_id = harness.start_and_run(flows.shared_state, {})
    assert harness.pw.get_run(run_id).status is RunStatus.COMPLETED
    last = harness.pw.get_run(run_id).step
    assert not client.hexists(keys.snapshots(run_id), f"{last}:node")
    forked = harness.pw.fork(run_id, step=last)
    harness.run_jobs()
    assert harness.pw.get_run(forked).status is RunStatus.COMPLETED
