"""Stored format 3: a resume that finds the queue empty begins the attempt itself, and the worker
runs the node straight from the element it pops (one round trip and one process hop fewer); its
lease, fence and format guards (invariants 9 and 15)."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Iterator

import pytest
import redis
from rq import Queue

from parkway import Parkway, RunStatus, Settings
from parkway.adapters.redis import keys, layout
from parkway.adapters.redis.store.store import RedisStore
from parkway.runtime.clock import now_ms
from parkway.workers import jobs, reconciler
from parkway.workers.serializer import MsgpackSerializer
from parkway.workers.worker import ParkwayWorker
from tests import flows
from tests.conftest import SECRET, Closing, Harness, format_2_reader
from tests.procs import Worker, sent_commands, wait_for


@pytest.fixture
def pw(redis_url: str) -> Iterator[Parkway]:
    """A client whose lease (30 s) gives its tests' workers, slow to start on a loaded host, a window of
    3 s to pop a begun element in (a tenth of the lease: worker.begun_window_ms)."""
    with Parkway(Settings(redis_url=redis_url, secret=SECRET, lease_ms=30_000)) as client:
        yield client


def _store(pw: Parkway) -> RedisStore:
    store = pw.store
    assert isinstance(store, RedisStore)
    return store


def _parked(pw: Parkway, client: redis.Redis, tag: str) -> tuple[str, str]:
    """A run of flows.counted_choice parked on its question, and the token that answers it."""
    harness = Harness("redis", pw, pw.settings, client)
    run_id = harness.start_and_run(flows.counted_choice, {"tag": tag})
    assert _store(pw).formats.refresh().writes in (2, 3, 4)
    return run_id, harness.token(run_id)


def _elements(pw: Parkway, client: redis.Redis) -> list[str]:
    queue = pw.backend.dispatcher.queue  # type: ignore[attr-defined]
    return [e.decode() for e in client.lrange(queue.key, 0, -1)]


def _work(pw: Parkway, client: redis.Redis) -> list[bytes]:
    """Work the queue with a burst ParkwayWorker (no reconciler), recording its round trips."""
    rt = jobs.install(pw.settings)
    queue = Queue(pw.settings.queue, connection=client, serializer=MsgpackSerializer)
    with sent_commands() as sent:
        ParkwayWorker([queue], connection=client, runtime=rt).work(
            burst=True, logging_level="WARNING", with_maintenance=False
        )
    return sent


def _entered(client: redis.Redis, tag: str) -> int:
    return int(client.get(f"test:effects:entered:{tag}") or 0)


@pytest.fixture
def effects_in_redis(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARKWAY_EFFECTS_URL", redis_url)


def test_a_resume_with_an_empty_queue_begins_the_attempt_and_the_worker_runs_it_without_a_begin(
    pw: Parkway, redis_client: redis.Redis, effects_in_redis: None
) -> None:
    """With every live process reading format 3 and the queue empty, the resume takes the lease (marked
    `rb`), marks the run running and pushes `<job id> <lease end> <the begun attempt>` with no job hash
    and no outbox entry; the worker sends no begin, its LREM and EXPIRE ride the job's first round
    trip, and the run completes with the node run twice in all (first attempt, one replay)."""
    run_id, token = _parked(pw, redis_client, "a")
    assert pw.resume(token, selected="red").accepted
    fence = pw.store.get_run(run_id, 0).fence  # type: ignore[union-attr]
    (element,) = _elements(pw, redis_client)
    job_id, lease, _ = element.split(" ", 2)
    assert job_id == jobs.job_id(run_id, fence) and int(lease) > now_ms()
    assert redis_client.hget(keys.run(run_id), "status") == b"running"
    assert redis_client.hget(keys.run(run_id), layout.BEGUN_FIELD) == str(fence).encode()
    assert redis_client.zscore(keys.leases(), run_id) == int(lease)
    assert redis_client.exists(f"rq:job:{job_id}") == 0 and redis_client.zcard(keys.outbox()) == 0
    sent = _work(pw, redis_client)
    begin = _store(pw)._scripts["begin"].name.encode()
    assert not any(begin in s for s in sent)
    (first_call,) = [s for s in sent if b"FCALL" in s][:1]
    assert b"LREM" in first_call and b"EXPIRE" in first_call and b"HDEL" in first_call
    assert pw.get_run(run_id).status is RunStatus.COMPLETED
    assert pw.get_run(run_id).output == {"picked": "red", "tag": "a"}
    assert _entered(redis_client, "a") == 2
    queue = pw.backend.dispatcher.queue  # type: ignore[attr-defined]
    assert redis_client.llen(queue.intermediate_queue_key) == 0 and redis_client.zcard(keys.leases()) == 0
    assert not redis_client.hexists(keys.run(run_id), layout.BEGUN_FIELD)


def _worker_round_trips(pw: Parkway, client: redis.Redis, runs: int) -> list[int]:
    """Per run: park it, resume it with the queue empty, and count the burst worker's round trips."""
    counts = []
    for i in range(runs):
        _, token = _parked(pw, client, f"rt{i}")
        assert pw.resume(token, selected="blue").accepted
        counts.append(len(_work(pw, client)))
    return counts


def test_a_begun_resume_costs_the_worker_one_round_trip_fewer(pw: Parkway, redis_client: redis.Redis) -> None:
    """The worker's round trips for a resumed job (its dequeue, the node's commit, RQ's loop) drop by
    exactly the take-and-begin: format 2 (a reader of no format 3 alive) against format 3."""
    begun = statistics.median(_worker_round_trips(pw, redis_client, 5))
    format_2_reader(pw, redis_client)
    plain = statistics.median(_worker_round_trips(pw, redis_client, 5))
    assert begun == plain - 1, (begun, plain)


def test_a_format_2_reader_alive_keeps_resumes_to_the_plain_job_id(pw: Parkway, redis_client: redis.Redis) -> None:
    """While a process that reads no format 3 is alive, a resume pushes the plain job id (and its hash),
    which that process can run; once its announcement is gone, the next resume begins its attempt."""
    format_2_reader(pw, redis_client)
    run_id, token = _parked(pw, redis_client, "f2")
    assert pw.resume(token, selected="red").accepted
    fence = pw.store.get_run(run_id, 0).fence  # type: ignore[union-attr]
    assert _elements(pw, redis_client) == [jobs.job_id(run_id, fence)]
    assert redis_client.exists(f"rq:job:{jobs.job_id(run_id, fence)}") == 1
    assert not redis_client.hexists(keys.run(run_id), layout.BEGUN_FIELD)
    _work(pw, redis_client)
    redis_client.hdel(keys.readers(), "format-2-worker")
    assert _store(pw).formats.refresh().writes == layout.NEWEST_FORMAT
    other, token = _parked(pw, redis_client, "f3")
    assert pw.resume(token, selected="red").accepted
    assert all(" " in e for e in _elements(pw, redis_client))
    _work(pw, redis_client)
    assert pw.get_run(run_id).status is pw.get_run(other).status is RunStatus.COMPLETED


def test_a_busy_queue_keeps_resumes_to_the_plain_job_id(pw: Parkway, redis_client: redis.Redis) -> None:
    """A resume that finds jobs waiting begins nothing (its lease would run out behind them): the
    first of two resumes begins its attempt, the second enqueues its job as before format 3."""
    (first, t1), (second, t2) = _parked(pw, redis_client, "b1"), _parked(pw, redis_client, "b2")
    assert pw.resume(t1, selected="red").accepted and pw.resume(t2, selected="red").accepted
    begun, plain = _elements(pw, redis_client)
    assert " " in begun and " " not in plain
    _work(pw, redis_client)
    assert pw.get_run(first).status is pw.get_run(second).status is RunStatus.COMPLETED


def test_a_crash_between_the_resume_and_the_pop_is_recovered_without_a_lost_attempt(
    pw: Parkway, redis_client: redis.Redis, effects_in_redis: None
) -> None:
    """A worker that popped the begun element and died before running it leaves the resume's lease to
    lapse: the reconciler requeues the run under a new fence without counting a lost attempt (the
    element's fence is stale then), and the next worker completes it, the node run once more."""
    run_id, token = _parked(pw, redis_client, "c")
    assert pw.resume(token, selected="red").accepted
    queue = pw.backend.dispatcher.queue  # type: ignore[attr-defined]
    redis_client.lmove(queue.key, queue.intermediate_queue_key)  # popped by a worker that then died
    lease = int(redis_client.zscore(keys.leases(), run_id) or 0)
    report = reconciler.Report()
    reconciler.housekeep(_store(pw), pw.backend.dispatcher, report, max_lost=1, now=lease + 1)  # type: ignore[attr-defined]
    assert report.recovered == [run_id] and not report.failed  # max_lost=1 would have failed a counted loss
    assert redis_client.hget(keys.run(run_id), "crashes") is None
    assert not redis_client.hexists(keys.run(run_id), layout.BEGUN_FIELD)
    _work(pw, redis_client)
    assert pw.get_run(run_id).status is RunStatus.COMPLETED
    assert _entered(redis_client, "c") == 2


def test_a_stale_element_never_runs_its_node(redis_url: str, redis_client: redis.Redis, effects_in_redis: None) -> None:
    """An element popped after its lease lapsed and the reconciler moved the fence on is begun the old
    way and refused there: the node runs once, on the recovered job, never on the stale element."""
    with Parkway(Settings(redis_url=redis_url, secret=SECRET, lease_ms=600)) as pw:
        run_id, token = _parked(pw, redis_client, "s")
        assert pw.resume(token, selected="red").accepted
        (element,) = _elements(pw, redis_client)
        time.sleep(0.7)  # the lease lapses (real time: the worker's clock agrees)
        report = reconciler.Report()
        reconciler.housekeep(_store(pw), pw.backend.dispatcher, report)  # type: ignore[attr-defined]
        assert report.recovered == [run_id]
        assert _elements(pw, redis_client)[0] == element  # the stale element is popped first
        sent = _work(pw, redis_client)
        begin = _store(pw)._scripts["begin"].name.encode()
        assert sum(begin in s for s in sent) == 2  # the stale element's (refused), the recovered job's
        assert pw.get_run(run_id).status is RunStatus.COMPLETED
        assert _entered(redis_client, "s") == 2


def test_an_element_popped_with_little_lease_left_is_begun_the_old_way_and_runs_once(
    redis_url: str, redis_client: redis.Redis, effects_in_redis: None
) -> None:
    """A begun element popped later than its window (a tenth of the lease) after its resume, its lease
    still live (or lapsed, not yet recovered), is begun by its worker the old way, which takes over the
    resume's lease: the node runs once."""
    with Parkway(Settings(redis_url=redis_url, secret=SECRET, lease_ms=2_000)) as pw:
        run_id, token = _parked(pw, redis_client, "m")
        assert pw.resume(token, selected="red").accepted
        time.sleep(0.4)  # past the window (200 ms), well before the lease's end
        sent = _work(pw, redis_client)
        begin = _store(pw)._scripts["begin"].name.encode()
        assert sum(begin in s for s in sent) == 1
        assert pw.get_run(run_id).status is RunStatus.COMPLETED
        assert _entered(redis_client, "m") == 2


def test_a_plain_copy_of_a_begun_job_is_refused_while_the_resumes_lease_is_live(
    pw: Parkway, redis_client: redis.Redis, effects_in_redis: None
) -> None:
    """A second copy of the job (a hand re-enqueue of its plain id) meets the lease the resume took and
    is refused as stale; the begun element runs the node, once."""
    run_id, token = _parked(pw, redis_client, "d")
    assert pw.resume(token, selected="red").accepted
    fence = pw.store.get_run(run_id, 0).fence  # type: ignore[union-attr]
    queue = pw.backend.dispatcher.queue  # type: ignore[attr-defined]
    (element,) = _elements(pw, redis_client)
    redis_client.delete(queue.key)
    pw.backend.dispatcher.enqueue(run_id, 1, fence)  # type: ignore[attr-defined]
    redis_client.rpush(queue.key, element)  # the copy is popped first
    _work(pw, redis_client)
    assert pw.get_run(run_id).status is RunStatus.COMPLETED
    assert _entered(redis_client, "d") == 2


def test_racing_resumes_and_workers_run_each_replay_exactly_once(
    redis_url: str, redis_client: redis.Redis, closing: Closing, effects_in_redis: None
) -> None:
    """Many runs resumed at once from several threads while two worker processes pop (begun elements
    and plain ids mixed, as the queue is empty or not): every run completes, its node body ran once on
    its first attempt and once on its replay, and no attempt was counted lost."""
    pw = closing(Parkway(Settings(redis_url=redis_url, secret=SECRET)))
    parked = [_parked(pw, redis_client, f"r{i}") for i in range(16)]
    store, handed = _store(pw), []
    resume = store._resume

    def seen(run_id, answer):  # type: ignore[no-untyped-def]
        reply = resume(run_id, answer)
        handed.append(int(reply[4]))  # hand_off's 1, or 2 for an element that carries its begun attempt
        return reply

    store._resume = seen  # type: ignore[method-assign]
    workers = [Worker(redis_url, SECRET, env={"PARKWAY_EFFECTS_URL": redis_url}) for _ in range(2)]
    try:
        wait_for(lambda: redis_client.scard("rq:workers") == 2, 30, "the workers registered")
        errors: list[BaseException] = []

        def answer(share: list[tuple[str, str]]) -> None:
            try:
                for _, token in share:
                    assert pw.resume(token, selected="red").accepted
                    time.sleep(0.005)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=answer, args=(parked[i::4],)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors
        wait_for(lambda: all(pw.get_run(r).status is RunStatus.COMPLETED for r, _ in parked), 60, "every run done")
    finally:
        for w in workers:
            w.stop()
    assert len(handed) == 16 and 2 in handed, handed
    assert [_entered(redis_client, f"r{i}") for i in range(16)] == [2] * 16
    assert all(redis_client.hget(keys.run(r), "crashes") in (None, b"0") for r, _ in parked)


def test_ridden_commands_go_in_the_next_round_trip_on_the_held_connection_or_when_the_hold_ends(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """``ride`` adds no round trip: its commands go ahead of the next one on the connection ``holding``
    holds (their replies dropped, an error's too), or in one of their own when the block ends unused."""
    from parkway.adapters.redis.connection.connection import connect, holding, ride, run_commands

    client = connect(redis_url)
    try:
        run_commands(client, [("PING",)])  # the pooled connection made (its handshake is not counted)
        with sent_commands() as sent, holding(client):
            ride([("SET", "test:ride:a", "1"), ("LPUSH", "test:ride:a", "x")])  # the second: an error reply
            assert run_commands(client, [("GET", "test:ride:a")]) == [b"1"]
        assert len(sent) == 1
        with sent_commands() as sent, holding(client):
            ride([("SET", "test:ride:b", "2")])
        assert len(sent) == 1 and redis_client.get("test:ride:b") == b"2"
    finally:
        client.close()
