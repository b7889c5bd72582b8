"""A job's last commit carries the worker's next dequeue: one round trip, and what held before holds."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from rq import Queue
from rq.suspension import resume, suspend
from structlog.testing import capture_logs

from parkway import Parkway, RunStatus, Settings
from parkway.adapters.redis.connection.connection import GIVE_UP_S, connect, run_script_then
from parkway.adapters.redis.connection.replicas import ReplicaAcks
from parkway.adapters.redis.formats import gates_of
from parkway.adapters.redis.store.store import RedisStore
from parkway.runtime.errors import StoreUnavailable
from parkway.workers import jobs
from parkway.workers.serializer import MsgpackSerializer
from parkway.workers.worker import ParkwayWorker
from tests import flows
from tests.conftest import SECRET, Closing
from tests.procs import RedisServer, Worker, sent_commands, wait_for
from tests.test_frozen_redis import freeze, thaw


class Looping:
    """A ParkwayWorker working as ``parkway worker`` does (not in burst mode) on a thread of this
    process, on the queues named (parkway's by default)."""

    def __init__(self, url: str, *queues: str, **work: Any) -> None:
        self.settings = Settings(redis_url=url, secret=SECRET)
        self.runtime = jobs.install(self.settings)
        self.client = redis.Redis.from_url(url)
        self.db = self.client.connection_pool.connection_kwargs.get("db", 0)
        named = queues or (self.settings.queue,)
        served = [Queue(name, connection=self.client, serializer=MsgpackSerializer) for name in named]
        self.worker = ParkwayWorker(served, connection=self.client, serializer=MsgpackSerializer, runtime=self.runtime)
        kwargs = {"logging_level": None, "with_maintenance": False, **work}
        self.thread = threading.Thread(target=self.worker.work, kwargs=kwargs, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Ask the worker to stop and wake its dequeue (as embedded mode's stop does, on this
        test's database only), until its thread has ended."""
        self.worker.stop()
        deadline = time.monotonic() + 10
        while self.thread.is_alive() and time.monotonic() < deadline:
            for client in self.client.client_list():
                if int(client.get("db", -1)) == self.db and client.get("cmd") in ("blmove", "blpop"):
                    self.client.client_unblock(int(client["id"]))
            self.thread.join(0.05)
        assert not self.thread.is_alive(), "the worker did not stop"

    def close(self) -> None:
        if self.thread.is_alive():
            self.stop()
        jobs.uninstall()
        self.client.close()


@pytest.fixture
def looping(redis_url: str, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> Iterator[type[Looping]]:
    """Start ``Looping`` workers on the test's database (flows.blocking's effects there too); each
    is stopped and closed after the test."""
    monkeypatch.setenv("PARKWAY_EFFECTS_URL", redis_url)
    started: list[Looping] = []

    class Started(Looping):
        def __init__(self, *queues: str, **work: Any) -> None:
            super().__init__(redis_url, *queues, **work)
            started.append(self)

    yield Started  # type: ignore[misc]
    for worker in started:
        worker.close()


def _function(store: RedisStore, script: str) -> bytes:
    return store._scripts[script].name.encode()


def _done(pw: Parkway, run_ids: list[str], status: RunStatus = RunStatus.COMPLETED) -> None:
    wait_for(lambda: all(pw.get_run(r).status is status for r in run_ids), 20, f"runs {status.value}")


def test_each_jobs_last_commit_carries_the_next_dequeue(looping: type[Looping], pw: Parkway) -> None:
    """A working worker sends each job's last commit (flows.loop's final advance) in one round trip
    with its next BLMOVE; only its first dequeue goes alone, and every run completes."""
    run_ids = [pw.start(flows.loop, {}) for _ in range(5)]
    with sent_commands() as sent:
        worker = looping()
        _done(pw, run_ids)
        worker.stop()
    advance = _function(worker.runtime.store, "advance")
    dequeues = [s for s in sent if b"BLMOVE" in s]
    ridden = [s for s in dequeues if advance in s]
    assert len(ridden) == 5, len(ridden)
    assert len(dequeues) == 6, [d[:60] for d in dequeues]
    assert all(s.index(advance) < s.index(b"BLMOVE") for s in ridden)  # the commit first


def test_a_pause_rides_the_dequeue_and_its_run_waits(looping: type[Looping], pw: Parkway) -> None:
    """A job that parks sends its park with the next dequeue; the run waits on its question,
    and the resumed run's job (popped by that dequeue or the next) completes it."""
    with sent_commands() as sent:
        worker = looping()
        run_id = pw.start(flows.one_choice, {})
        wait_for(lambda: pw.get_run(run_id).status is RunStatus.WAITING, 20, "the park")
        (interrupt,) = pw.list_interrupts(run_id=run_id, include_tokens=True).items
        assert pw.resume(interrupt.resume_token, selected="red").outcome == "accepted"
        _done(pw, [run_id])
        worker.stop()
    park = _function(worker.runtime.store, "park")
    assert [s for s in sent if park in s and b"BLMOVE" in s], "the park went alone"


def test_a_refused_last_commit_still_runs_the_job_its_dequeue_popped(
    looping: type[Looping], pw: Parkway, redis_client: redis.Redis
) -> None:
    """A run cancelled while its node runs refuses the job's last commit (a stale fence): the worker
    logs the job stale as before, and the next job, which the dequeue sent with that commit
    popped, runs and completes its run."""
    redis_client.set("test:block:a", 1)
    blocked = pw.start(flows.blocking, {"tag": "a"})
    with sent_commands() as sent, capture_logs() as logs:
        worker = looping()
        wait_for(lambda: redis_client.exists("test:inside:a"), 20, "the node to start")
        behind = pw.start(flows.loop, {})
        pw.cancel(blocked)
        redis_client.delete("test:block:a")
        _done(pw, [behind])
        worker.stop()
    assert pw.get_run(blocked).status is RunStatus.CANCELLED
    advance = _function(worker.runtime.store, "advance")
    assert [s for s in sent if advance in s and blocked.encode() in s and b"BLMOVE" in s]
    assert "job_stale" in [e["event"] for e in logs]


def test_a_stop_asked_mid_job_sends_its_last_commit_alone_and_leaves_the_next_job_queued(
    looping: type[Looping], pw: Parkway, redis_client: redis.Redis
) -> None:
    """Once a stop is asked, the job running ends with its commit alone (the loop will not dequeue
    again): the run completes, and the next job stays on the queue for another worker."""
    redis_client.set("test:block:s", 1)
    first = pw.start(flows.blocking, {"tag": "s"})
    with sent_commands() as sent:
        worker = looping()
        wait_for(lambda: redis_client.exists("test:inside:s"), 20, "the node to start")
        queued = pw.start(flows.loop, {})
        worker.worker.stop()
        redis_client.delete("test:block:s")
        worker.thread.join(20)
        assert not worker.thread.is_alive()
    _done(pw, [first])
    assert pw.get_run(queued).status is RunStatus.QUEUED
    queue = worker.worker.queues[0]
    assert redis_client.llen(queue.key) == 1 and redis_client.llen(queue.intermediate_queue_key) == 0
    advance = _function(worker.runtime.store, "advance")
    assert not [s for s in sent if advance in s and b"BLMOVE" in s]


def test_a_worker_suspended_mid_job_gives_the_popped_job_back_to_its_queue(
    looping: type[Looping], pw: Parkway, redis_client: redis.Redis
) -> None:
    """``rq suspend`` during a job: the dequeue its last commit carried pops the next job, and the
    worker, finding itself suspended, ends that dequeue and puts the job back at the head of its
    queue (off RQ's intermediate list) instead of holding it; resumed, it runs it."""
    redis_client.set("test:block:p", 1)
    first = pw.start(flows.blocking, {"tag": "p"})
    worker = looping()
    wait_for(lambda: redis_client.exists("test:inside:p"), 20, "the node to start")
    queued = pw.start(flows.loop, {})
    suspend(redis_client)
    time.sleep(1.1)  # the worker's suspension check is due after the job (it checks once a second)
    queue = worker.worker.queues[0]
    try:
        with sent_commands() as sent:
            redis_client.delete("test:block:p")
            wait_for(lambda: redis_client.hget(worker.worker.key, "state") == b"suspended", 20, "the suspension")
        _done(pw, [first])
        assert redis_client.llen(queue.key) == 1, "the popped job was not given back"
        assert redis_client.llen(queue.intermediate_queue_key) == 0
        assert pw.get_run(queued).status is RunStatus.QUEUED
        advance = _function(worker.runtime.store, "advance")
        assert [s for s in sent if advance in s and b"BLMOVE" in s], "the dequeue did not ride"
        assert [s for s in sent if b"UNBLOCK" in s] and [s for s in sent if b"LPUSH" in s]
    finally:
        resume(redis_client)
    _done(pw, [queued])


def test_a_stop_signal_while_the_carried_dequeue_waits_ends_the_worker_at_once(
    redis_url: str, redis_client: redis.Redis, closing: Closing
) -> None:
    """``parkway worker`` idle on the dequeue its last job's commit carried stops on SIGTERM at
    once, cleanly, and a job enqueued after that waits on the queue."""
    pw = closing(Parkway(Settings(redis_url=redis_url, secret=SECRET)))
    worker = Worker(redis_url, SECRET)
    try:
        run_id = pw.start(flows.loop, {})
        _done(pw, [run_id])
        db = redis_client.connection_pool.connection_kwargs.get("db", 0)

        def waiting() -> list[dict[str, Any]]:
            return [c for c in redis_client.client_list() if int(c.get("db", -1)) == db and c.get("cmd") == "blmove"]

        wait_for(waiting, 10, "the dequeue")
        started = time.monotonic()
        worker.proc.terminate()
        assert worker.proc.wait(10) == 0
        assert time.monotonic() - started < 5
    finally:
        out = worker.stop()
    assert "Traceback" not in out, out
    later = pw.start(flows.loop, {})
    queue = pw.backend.dispatcher.queue  # type: ignore[attr-defined]
    assert redis_client.llen(queue.key) == 1 and redis_client.llen(queue.intermediate_queue_key) == 0
    assert pw.get_run(later).status is RunStatus.QUEUED


def test_a_carried_dequeue_lost_with_its_connection_gives_way_to_rqs_own(
    looping: type[Looping], pw: Parkway, redis_client: redis.Redis
) -> None:
    """The connection a job's last commit and the next dequeue went on is closed while the dequeue
    waits (a Redis restart, a proxy): the worker waits Redis out as for its own dequeue, dequeues
    again, and the next run's job runs."""
    worker = looping()
    first = pw.start(flows.loop, {})
    _done(pw, [first])

    def waiting() -> list[dict[str, Any]]:
        return [c for c in redis_client.client_list() if int(c.get("db", -1)) == worker.db and c.get("cmd") == "blmove"]

    (dequeue,) = wait_for(waiting, 10, "the carried dequeue")
    redis_client.client_kill_filter(_id=int(dequeue["id"]))
    later = pw.start(flows.loop, {})
    _done(pw, [later])


def test_a_worker_of_several_queues_carries_rqs_blpop(looping: type[Looping], pw: Parkway) -> None:
    """With several queues RQ dequeues with BLPOP over them all (no intermediate list): the last
    commit carries that, and jobs of either queue run."""
    other = Queue("elsewhere", connection=pw.backend.dispatcher.connection, serializer=MsgpackSerializer)  # type: ignore[attr-defined]
    run_ids = [pw.start(flows.loop, {}) for _ in range(3)]
    with sent_commands() as sent:
        worker = looping(other.name, worker_queue := pw.backend.dispatcher.queue.name)  # type: ignore[attr-defined]
        _done(pw, run_ids)
        more = [pw.start(flows.loop, {}) for _ in range(2)]
        _done(pw, more)
        worker.stop()
    assert worker_queue
    advance = _function(worker.runtime.store, "advance")
    ridden = [s for s in sent if advance in s and b"BLPOP" in s]
    assert len(ridden) == 5 and not [s for s in sent if b"BLMOVE" in s]


def test_a_last_commit_whose_function_is_gone_is_made_on_its_own_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis lost its functions (FUNCTION FLUSH) while a worker waits: the next job's park, sent
    with the dequeue, finds none; it is made again on the store's own path, which loads it, and
    the dequeue it carried still hands the worker the next job. On a server of its own: functions
    are the server's, and a parallel test on another database of a shared one loads them again."""
    server = RedisServer(tmp_path, appendonly=False)
    server.start()
    monkeypatch.setenv("PARKWAY_EFFECTS_URL", server.url)
    worker = None
    try:
        with Parkway(Settings(redis_url=server.url, secret=SECRET)) as pw, redis.Redis.from_url(server.url) as client:
            worker = Looping(server.url)
            first = pw.start(flows.one_choice, {})
            wait_for(lambda: pw.get_run(first).status is RunStatus.WAITING, 20, "the first park")
            client.function_flush()
            park = _function(worker.runtime.store, "park")
            with sent_commands() as sent:
                later = [pw.start(flows.one_choice, {}) for _ in range(2)]
                wait_for(lambda: all(pw.get_run(r).status is RunStatus.WAITING for r in later), 20, "the parks")
            worker.stop()
    finally:
        if worker is not None:
            worker.close()
        server.stop()
    ridden = [i for i, s in enumerate(sent) if park in s and b"BLMOVE" in s]
    loaded = [i for i, s in enumerate(sent) if park in s and b"FUNCTION" in s and b"LOAD" in s]
    assert ridden and loaded and ridden[0] < loaded[0], (ridden, loaded)


def test_a_script_sent_with_commands_after_it_leaves_their_replies_to_read_whatever_its_own_says(
    redis_client: redis.Redis,
) -> None:
    """``run_script_then`` returns the script's reply at once, or raises its error reply as
    ``run_script`` would; either way it says when the write was made, and the commands after the
    script still answer on the connection, in order."""
    store = RedisStore(redis_client)
    function = store._scripts["lookup"]

    redis_client.function_load(function.text, replace=True)
    conn = redis_client.connection_pool.get_connection()
    try:
        calls: list[str] = []
        with pytest.raises(redis.ResponseError):  # a lookup without its keys and arguments
            run_script_then(conn, function, [], [], None, [("ECHO", "after")], lambda: calls.append("sent"))
        assert calls == ["sent"] and conn.read_response() == b"after"
        with pytest.raises(redis.ResponseError):
            run_script_then(conn, function, [], [], ReplicaAcks(1, 10), [("ECHO", "a"), ("ECHO", "b")], lambda: None)
        assert [conn.read_response(), conn.read_response()] == [b"a", b"b"]
    finally:
        redis_client.connection_pool.release(conn)


class _Then:
    """A follower of a store's script calls (``RedisStore.followed_by``): a connection and an ECHO
    after the first call."""

    def __init__(self, client: redis.Redis) -> None:
        self.conn = client.connection_pool.get_connection()
        self.taken = 0
        self.was_sent = False

    def take(self) -> tuple[Any, tuple[tuple[Any, ...], ...]] | None:
        self.taken += 1
        return (self.conn, (("ECHO", "next"),)) if self.taken == 1 else None

    def sent(self) -> None:
        self.was_sent = True


def test_a_followed_commit_short_of_its_replica_acks_fails_as_alone_and_keeps_what_followed(
    redis_client: redis.Redis, redis_url: str, closing: Closing
) -> None:
    """A commit (a cancelling finish) that waits for a replica none gives fails as
    ``StoreUnavailable``, as on the store's own path (its outcome unknown); the command that
    followed it still answers on its connection (a worker's dequeue still hands over its job)."""
    pw = closing(Parkway(Settings(redis_url=redis_url, secret=SECRET)))
    run_id = pw.start(flows.loop, {})
    store = RedisStore(redis_client, acks=ReplicaAcks(1, 10))
    then = _Then(redis_client)
    try:
        with pytest.raises(StoreUnavailable, match="acknowledged"):
            now = int(time.time() * 1000)
            store.followed_by(then).finish(run_id, None, "cancelled", None, ("run.cancelled", {}), now)
        assert then.was_sent and then.conn.read_response() == b"next"
        assert then.taken == 1
    finally:
        redis_client.connection_pool.release(then.conn)


@pytest.mark.slow
def test_a_followed_commit_on_a_frozen_redis_gives_up_within_the_bound_of_one_call(
    tmp_path: Path
) -> None:
    """Redis frozen (SIGSTOP) while a commit followed by a dequeue waits for its reply: the commit is
    sent again on the store's own path, and the whole raises ``StoreUnavailable`` within the bound
    one call has (``GIVE_UP_S``: about two attempts' timeouts), not that bound after the first
    try's own timeout."""
    server = RedisServer(tmp_path)
    server.start()
    pw = Parkway(Settings(redis_url=server.url, secret=SECRET))
    client = connect(server.url)
    try:
        run_id = pw.start(flows.loop, {})
        store = RedisStore(client)
        then = _Then(client)
        then.conn.connect()
        freeze(server)
        started = time.monotonic()
        try:
            with pytest.raises(StoreUnavailable):
                now = int(time.time() * 1000)
                store.followed_by(then).finish(run_id, None, "cancelled", None, ("run.cancelled", {}), now)
        finally:
            client.connection_pool.release(then.conn)
        took = time.monotonic() - started
        # one call alone: two attempts of SOCKET_TIMEOUT_S (a third could not end within GIVE_UP_S)
        assert then.was_sent and took <= GIVE_UP_S - 2.0, took
    finally:
        thaw(server)
        pw.close()  # while its server answers: closing takes its announcement away
        client.close()
        server.stop()


def test_a_begun_jobs_cleanup_rides_ahead_of_a_last_commit_that_carries_the_dequeue(
    looping: type[Looping], pw: Parkway, redis_client: redis.Redis
) -> None:
    """A resume that begins its attempt (format 3, queue empty) and a node whose only store call is
    its last commit: the element's LREM, the worker key's EXPIRE and the `rb` HDEL go in that
    commit's round trip, ahead of the commit and its dequeue (never after: a later resume's `rb`
    would be deleted), and the worker sends no begin."""
    store = pw.store
    assert isinstance(store, RedisStore)
    worker = looping()
    for gate in gates_of(worker.runtime.store):  # what the worker's maintenance does (started without it)
        gate.announce(worker.worker.name, "worker")
    run_id = pw.start(flows.counted_choice, {"tag": "ride"})
    wait_for(lambda: pw.get_run(run_id).status is RunStatus.WAITING, 20, "the park")
    wait_for(lambda: store.formats.refresh().writes >= 3, 20, "every live reader to read format 3")
    wait_for(lambda: any(c.get("cmd") == "blmove" for c in redis_client.client_list()), 20, "the worker to wait")
    (interrupt,) = pw.list_interrupts(run_id=run_id, include_tokens=True).items
    with sent_commands() as sent:
        assert pw.resume(interrupt.resume_token, selected="red").outcome == "accepted"
        _done(pw, [run_id])
        worker.stop()
    commit = _function(worker.runtime.store, "advance")  # the node's end
    begin = _function(worker.runtime.store, "begin")
    assert not [s for s in sent if begin in s and run_id.encode() in s], "the worker began it again"
    (last,) = [s for s in sent if commit in s and run_id.encode() in s]
    assert b"BLMOVE" in last
    for cleanup in (b"LREM", b"EXPIRE", b"HDEL"):
        assert cleanup in last and last.index(cleanup) < last.index(commit), cleanup
