"""The job that carries a start or a resume on is written by the same Lua call that commits it."""

from __future__ import annotations

import pytest
import redis

from parkway import Parkway, RunStatus, Settings
from parkway.runtime.tokens import hash_token, run_id_of
from parkway.workers import jobs
from tests import flows
from tests.conftest import SECRET, Harness
from tests.procs import sent_commands

_STAMPS = {"created_at", "enqueued_at"}


@pytest.fixture
def pw(redis_client: redis.Redis, redis_url: str) -> Parkway:
    return Parkway(Settings(redis_url=redis_url, secret=SECRET))


def _job_hash(client: redis.Redis, job_id: str) -> dict[bytes, bytes]:
    fields = client.hgetall(f"rq:job:{job_id}")
    assert fields, f"no job {job_id}"
    return {k: v for k, v in fields.items() if k.decode() not in _STAMPS}


def test_start_writes_rqs_own_job_hash_and_queue_entry_in_one_round_trip(
    pw: Parkway, redis_client: redis.Redis
) -> None:
    pw.start(flows.one_choice, {})  # scripts and the server version are read once per client
    with sent_commands() as sent:
        run_id = pw.start(flows.one_choice, {})
    assert len(sent) == 1, sent
    ours = _job_hash(redis_client, jobs.job_id(run_id, 0))
    queue = pw.backend.dispatcher.queue  # type: ignore[attr-defined]
    assert queue.get_job_ids()[-1] == jobs.job_id(run_id, 0)
    assert redis_client.sismember("rq:queues", queue.key)
    # what RQ's own unique enqueue writes for the same transition, on a copy of the id
    redis_client.delete(f"rq:job:{jobs.job_id(run_id, 0)}")
    pw.backend.dispatcher.enqueue(run_id, 0, 0)
    assert ours == _job_hash(redis_client, jobs.job_id(run_id, 0))


def test_resume_commits_and_enqueues_the_replay_in_its_second_round_trip(
    pw: Parkway, redis_client: redis.Redis, redis_url: str
) -> None:
    harness = Harness("redis", pw, pw.settings, redis_client)
    first = harness.start_and_run(flows.one_choice)
    pw.resume(harness.token(first), selected="red")  # warm: the resume script is loaded
    run_id = harness.start_and_run(flows.one_choice)
    token = harness.token(run_id)
    with sent_commands() as sent:
        result = pw.resume(token, selected="red")
    assert result.accepted
    assert len(sent) == 2, sent  # lookup, then resume with the job
    fence = pw.store.get_run(run_id, 0).fence  # type: ignore[union-attr]
    assert pw.backend.dispatcher.queue.get_job_ids() == [jobs.job_id(run_id, fence)]  # type: ignore[attr-defined]
    harness.run_jobs()
    assert pw.get_run(run_id).status is RunStatus.COMPLETED


def test_a_handoff_for_another_fence_is_not_taken_and_the_client_falls_back(
    pw: Parkway, redis_client: redis.Redis
) -> None:
    """If the run moved between lookup and resume, the script declines the job it was given."""
    harness = Harness("redis", pw, pw.settings, redis_client)
    run_id = harness.start_and_run(flows.one_choice)
    token = harness.token(run_id)
    lookup = pw.store.lookup(run_id_of(token), hash_token(token), 0)
    assert lookup.outcome == "pending" and lookup.interrupt is not None and lookup.fence is not None
    from parkway.runtime.store import Answer, JournalEntry

    rec = lookup.interrupt
    wrong = pw.backend.dispatcher.handoff(run_id, rec.step, lookup.fence + 5)
    entry = JournalEntry("interrupt", "color", "red", "choice")
    commit = pw.store.resume(run_id, Answer(rec, hash_token(token), None, entry, {}, 1), wrong)
    assert commit.outcome.value == "accepted" and not commit.handed_off
    assert commit.fence == lookup.fence + 1
    assert not redis_client.exists(f"rq:job:{jobs.job_id(run_id, lookup.fence + 5)}")
    assert pw.backend.dispatcher.queue.get_job_ids() == []  # type: ignore[attr-defined]
    # the outbox still names the transition, so the reconciler would enqueue it
    assert redis_client.zscore("pw:outbox", f"{run_id}:{commit.step}:{commit.fence}") is not None


def test_a_job_already_enqueued_is_neither_overwritten_nor_queued_twice(pw: Parkway, redis_client: redis.Redis) -> None:
    dispatcher = pw.backend.dispatcher
    dispatcher.enqueue("run_taken", 0, 0)
    before = redis_client.hgetall(f"rq:job:{jobs.job_id('run_taken', 0)}")
    run_id = pw.start(flows.one_choice, {}, run_id="run_taken")
    assert run_id == "run_taken"
    assert redis_client.hgetall(f"rq:job:{jobs.job_id('run_taken', 0)}") == before
    assert dispatcher.queue.get_job_ids() == [jobs.job_id("run_taken", 0)]  # type: ignore[attr-defined]
