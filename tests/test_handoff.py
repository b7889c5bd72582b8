"""The job that carries a start or a resume on is written by the same Lua call that commits it,
for the fence that call wrote, exactly as RQ's own unique enqueue writes it."""

from __future__ import annotations

import zlib

import pytest
import redis

from parkway import Parkway, RunStatus
from parkway.adapters.redis import keys
from parkway.workers import jobs
from tests import flows
from tests.conftest import Harness, format_2_reader
from tests.procs import sent_commands

_STAMPS = {"created_at", "enqueued_at"}


def _job_hash(client: redis.Redis, job_id: str) -> dict[bytes, bytes]:
    """The job's hash without its timestamps, its data as RQ reads it (zlib-compressed or not)."""
    fields = client.hgetall(f"rq:job:{job_id}")
    assert fields, f"no job {job_id}"
    out = {k: v for k, v in fields.items() if k.decode() not in _STAMPS}
    try:
        out[b"data"] = zlib.decompress(out[b"data"])
    except zlib.error:
        pass
    return out


def test_start_writes_rqs_own_job_hash_and_queue_entry_in_one_round_trip(
    pw: Parkway, redis_client: redis.Redis
) -> None:
    pw.start(flows.one_choice, {})  # scripts and the server version are read once per client
    with sent_commands(this_thread=True) as sent:
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


def test_resume_commits_and_enqueues_the_replay_in_one_round_trip_or_two_from_a_bare_token(
    pw: Parkway, redis_client: redis.Redis, redis_url: str
) -> None:
    """An interrupt the client listed: the commit (with the job) is the one round trip. A client given
    only the token looks it up first: two."""
    format_2_reader(pw, redis_client)
    harness = Harness("redis", pw, pw.settings, redis_client)
    first = harness.start_and_run(flows.one_choice)
    pw.resume(harness.token(first), selected="red")  # warm: the resume script is loaded
    run_id, other = harness.start_and_run(flows.one_choice), harness.start_and_run(flows.one_choice)
    token, other_token = harness.token(run_id), harness.token(other)
    with sent_commands(this_thread=True) as sent:
        result = pw.resume(token, selected="red")
    assert result.accepted
    assert len(sent) == 1, sent  # the resume with the job
    fence = pw.store.get_run(run_id, 0).fence  # type: ignore[union-attr]
    assert pw.backend.dispatcher.queue.get_job_ids() == [jobs.job_id(run_id, fence)]  # type: ignore[attr-defined]
    with Parkway(pw.settings) as cold, sent_commands(this_thread=True) as sent:
        assert cold.resume(other_token, selected="blue").accepted
    assert len(sent) == 2, sent  # lookup, then resume with the job
    harness.run_jobs()
    assert pw.get_run(run_id).status is pw.get_run(other).status is RunStatus.COMPLETED


@pytest.mark.parametrize("fence", [5, 200, 70_000, 5_000_000_000])
def test_resume_enqueues_the_job_for_the_fence_its_script_wrote_as_rq_would(
    pw: Parkway, redis_client: redis.Redis, fence: int
) -> None:
    """The client names no fence: the script enqueues the job for the one it wrote (every msgpack
    width of it), and the job hash is the one RQ's own unique enqueue writes."""
    format_2_reader(pw, redis_client)
    harness = Harness("redis", pw, pw.settings, redis_client)
    run_id = harness.start_and_run(flows.one_choice)
    redis_client.hset(keys.run(run_id), "fence", fence - 1)  # the run moved on: only the script knows
    assert pw.resume(harness.token(run_id), selected="red").accepted
    run = pw.store.get_run(run_id, 0)
    assert run is not None and run.fence == fence
    ours = _job_hash(redis_client, jobs.job_id(run_id, fence))
    assert pw.backend.dispatcher.queue.get_job_ids() == [jobs.job_id(run_id, fence)]  # type: ignore[attr-defined]
    redis_client.delete(f"rq:job:{jobs.job_id(run_id, fence)}")
    pw.backend.dispatcher.enqueue(run_id, run.step, fence)
    assert ours == _job_hash(redis_client, jobs.job_id(run_id, fence))
    harness.run_jobs()  # and parkway's worker runs it
    assert pw.get_run(run_id).status is RunStatus.COMPLETED


def test_a_job_already_enqueued_is_neither_overwritten_nor_queued_twice(pw: Parkway, redis_client: redis.Redis) -> None:
    dispatcher = pw.backend.dispatcher
    dispatcher.enqueue("run_taken", 0, 0)
    before = redis_client.hgetall(f"rq:job:{jobs.job_id('run_taken', 0)}")
    run_id = pw.start(flows.one_choice, {}, run_id="run_taken")
    assert run_id == "run_taken"
    assert redis_client.hgetall(f"rq:job:{jobs.job_id('run_taken', 0)}") == before
    assert dispatcher.queue.get_job_ids() == [jobs.job_id("run_taken", 0)]  # type: ignore[attr-defined]


def test_the_scripts_write_integers_as_msgpack_does(harness: Harness) -> None:
    """``mp_uint`` in _common.lua, which writes a job's step and fence, gives msgpack's own bytes
    for every width, on the in-process Redis and on a real one."""
    import msgpack

    from parkway.adapters.redis.scripts import scripts

    common = scripts.common()
    script = harness.pw.store.client.register_script(common + "\nreturn mp_uint(ARGV[1])")  # type: ignore[attr-defined]
    for n in [0, 127, 128, 255, 256, 65_535, 65_536, 2**32 - 1, 2**32, 5_000_000_000, 2**53]:
        assert script(args=[n]) == msgpack.packb(n), n


def test_a_tenants_run_has_job_ids_rq_accepts_and_no_run_of_no_tenant_shares() -> None:
    """RQ allows only letters, digits, '_' and '-' in a job id: a tenant's run (``acme~order-1``) is
    named so that its id reads back to it, and no run of no tenant (``acme-order-1``) reads the same."""
    from rq.job import validate_job_id

    for run_id in ("acme~order-1", "a-b~c--0123456789abcdef", "order-1", "acme-order-1", "4~x"):
        named = jobs.job_id(run_id, 7)
        validate_job_id(named)
        assert jobs.parse_job_id(named) == (run_id, 7)
    assert len({jobs.job_id(r, 1) for r in ("acme~order-1", "acme-order-1", "acme_order-1")}) == 3
    for foreign in ("pw_x-a-1", "pw_9-ab-1", "pwx-a-1", "pw_1-a~b-1"):
        assert jobs.parse_job_id(foreign) is None
