"""Real processes die: workers SIGKILLed mid-node, Redis SIGKILLed and restarted from its AOF."""

from __future__ import annotations

import signal
import threading

import pytest
import redis

from parkway import Parkway, ResumeOutcome, RunStatus, Settings
from tests import flows
from tests.conftest import SECRET, Closing
from tests.procs import RedisServer, Worker, wait_for

pytestmark = pytest.mark.slow

RQ_REGISTRIES = {b"rq:queues", b"rq:workers", b"rq:workers:parkway"}
"""RQ's fixed sets (of queues, of workers), which a deployment keeps whatever it runs"""


def _rq_leftovers(r: redis.Redis) -> dict[bytes, int]:
    """RQ's keys (with their TTL in seconds, -1 for none) that outlive a run's retention: any job,
    result, failure or intermediate-list record, or any key kept longer than the retention."""
    retention_s = Settings().limits.retention_ms // 1000
    found = {key: int(r.ttl(key)) for key in r.scan_iter(match="rq:*") if key not in RQ_REGISTRIES}
    kept = (b"rq:job:", b"rq:failed:", b"rq:results:", b"rq:queue:parkway:intermediate", b"rq:wip:")
    return {key: ttl for key, ttl in found.items() if key.startswith(kept) or not 0 < ttl <= retention_s}



def _client(url: str) -> Parkway:
    return Parkway(Settings(redis_url=url, secret=SECRET, lease_ms=1000))


def test_worker_killed_inside_a_node_finishes_on_another_with_the_step_counted_once(
    private_redis: RedisServer, closing: Closing
) -> None:
    """SIGKILL of the worker mid-node: another worker replays it within seconds; use_step ran once."""
    pw, r = closing(_client(private_redis.url)), closing(redis.Redis.from_url(private_redis.url))
    env = {"PARKWAY_EFFECTS_URL": private_redis.url}
    r.set("test:block:k", 1)
    first = Worker(private_redis.url, SECRET, env=env)
    try:
        run_id = pw.start(flows.blocking, {"tag": "k"})
        wait_for(lambda: r.exists("test:inside:k"), 15, "the node to start")
        first.kill()
    finally:
        first.stop()
    assert pw.get_run(run_id).status is RunStatus.RUNNING
    r.delete("test:block:k")
    second = Worker(private_redis.url, SECRET, env={**env, "PARKWAY_LEASE_MS": "1000"})
    try:
        run = pw.wait(run_id, timeout=20)
    finally:
        second.stop()
    assert run.status is RunStatus.COMPLETED, run
    assert int(r.get("test:effects:charge:k") or 0) == 1
    events = [e.type for e in pw.stream(run_id, timeout=5)]
    assert events.count("node.recovered") == 1
    assert _rq_leftovers(r) == {}


def test_a_worker_killed_holding_a_job_it_had_not_begun_leaves_no_rq_record(
    private_redis: RedisServer, closing: Closing
) -> None:
    """SIGKILL of a worker that took a job off the queue (into RQ's intermediate list) and had not
    begun it: the recovered run goes on, and RQ keeps no job, result or failure of the lost one
    (which RQ's cleanup would otherwise fail into its registry for a year)."""
    pw, r = closing(_client(private_redis.url)), closing(redis.Redis.from_url(private_redis.url))
    first = Worker(private_redis.url, SECRET)
    try:
        wait_for(lambda: r.scard("rq:workers:parkway"), 15, "the worker to register")
        wait_for(lambda: any(c["cmd"] == "blmove" for c in r.client_list()), 15, "the worker to wait for a job")
        first.proc.send_signal(signal.SIGSTOP)  # Redis moves the job to it all the same
        run_id = pw.start(flows.one_choice, {})
        wait_for(lambda: r.llen("rq:queue:parkway:intermediate"), 5, "the stopped worker to take the job")
        first.kill()
    finally:
        first.stop()
    second = Worker(private_redis.url, SECRET, env={"PARKWAY_LEASE_MS": "1000"})
    try:
        assert pw.wait(run_id, timeout=30).status is RunStatus.WAITING
    finally:
        second.stop()
    assert _rq_leftovers(r) == {}


def test_two_hundred_parked_runs_survive_a_redis_sigkill(private_redis: RedisServer, closing: Closing) -> None:
    """With AOF, 200 parked runs survive SIGKILL of redis-server and all resume and complete."""
    pw = closing(_client(private_redis.url))
    worker = Worker(private_redis.url, SECRET)
    try:
        run_ids = [pw.start(flows.one_choice, {}) for _ in range(200)]
        wait_for(lambda: all(pw.get_run(r).status is RunStatus.WAITING for r in run_ids), 60, "200 parked runs")
        tokens = {r: pw.list_interrupts(run_id=r, include_tokens=True).items[0].resume_token for r in run_ids}
        private_redis.kill()
        private_redis.start()  # same port, same directory: replays the AOF
        # the client reconnects by itself; so does the worker
        outcomes = [pw.resume(tokens[r] or "", selected="red").outcome for r in run_ids]
        assert outcomes == [ResumeOutcome.ACCEPTED] * 200
        wait_for(lambda: all(pw.get_run(r).status is RunStatus.COMPLETED for r in run_ids), 60, "200 completed")
    finally:
        log = worker.stop()
    assert "Traceback" not in log, log[-3000:]
    assert {pw.get_run(r).output["painted"] for r in run_ids} == {"red"}


def test_a_clean_redis_restart_keeps_parked_runs(private_redis: RedisServer, closing: Closing) -> None:
    """SHUTDOWN and restart: a parked run is still waiting, with its interrupt listed, and resumes."""
    pw = closing(_client(private_redis.url))
    worker = Worker(private_redis.url, SECRET)
    try:
        run_id = pw.start(flows.one_choice, {})
        assert pw.wait(run_id, timeout=15).status is RunStatus.WAITING
        private_redis.stop()
        private_redis.start()
        page = pw.list_interrupts(include_tokens=True)
        assert [i.run_id for i in page.items] == [run_id]
        assert pw.resume(page.items[0].resume_token or "", selected="blue").accepted
        assert pw.wait(run_id, timeout=20).output == {"picked": "blue", "painted": "blue"}
    finally:
        worker.stop()


def test_lost_connection_is_a_clear_error_not_a_hang(private_redis: RedisServer, closing: Closing) -> None:
    """With Redis down, a client call raises StoreUnavailable after its bounded retries."""
    from parkway import StoreUnavailable

    pw = closing(_client(private_redis.url))
    private_redis.stop()
    with pytest.raises(StoreUnavailable, match="unreachable"):
        pw.get_run("run_x")


def test_fifty_threads_resuming_one_token_continue_once(private_redis: RedisServer, closing: Closing) -> None:
    """50 threads with their own clients resume one token, each as another responder: one accepted,
    one continuation (the same answer sent again by its own responder would read accepted: a retry)."""
    pw = closing(_client(private_redis.url))
    worker = Worker(private_redis.url, SECRET)
    try:
        run_id = pw.start(flows.guarded, {"tag": "fifty"})
        assert pw.wait(run_id, timeout=15).status is RunStatus.WAITING
        token = pw.list_interrupts(run_id=run_id, include_tokens=True).items[0].resume_token or ""
        barrier = threading.Barrier(50)
        outcomes: list[ResumeOutcome] = []
        clients = [closing(_client(private_redis.url)) for _ in range(50)]

        def go(c: Parkway, who: str) -> None:
            barrier.wait()
            outcomes.append(c.resume(token, selected="red", responder=who).outcome)

        threads = [threading.Thread(target=go, args=(c, f"user{i}")) for i, c in enumerate(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert outcomes.count(ResumeOutcome.ACCEPTED) == 1 and len(outcomes) == 50
        assert pw.wait(run_id, timeout=15).status is RunStatus.COMPLETED
        events = [e.type for e in pw.stream(run_id, timeout=5)]
        assert events.count("interrupt.resumed") == 1 and events.count("node.completed") == 1
    finally:
        worker.stop()


def test_a_stream_reattaches_mid_run_across_a_worker_killed_and_replaced(
    private_redis: RedisServer, closing: Closing
) -> None:
    """A client reads a running run's stream, goes away at a middle event; the worker is SIGKILLed
    mid-node and another takes over; re-attaching after that event yields every later event once,
    to run.completed and done (the killed attempt's uncommitted emit is not among them)."""
    pw, r = closing(_client(private_redis.url)), closing(redis.Redis.from_url(private_redis.url))
    env = {"PARKWAY_EFFECTS_URL": private_redis.url}
    r.set("test:block:m", 1)
    first = Worker(private_redis.url, SECRET, env=env)
    try:
        run_id = pw.start(flows.relay, {"tag": "m"})
        seen = []
        for event in pw.stream(run_id, timeout=15):  # the client, while the run runs
            seen.append(event)
            if event.type == "data" and event.data["data"] == {"part": 2}:
                break  # ... and goes away here
        wait_for(lambda: r.exists("test:inside:m"), 15, "the second node to start")
        assert pw.get_run(run_id).status is RunStatus.RUNNING
        first.kill()
    finally:
        first.stop()
    r.delete("test:block:m")
    second = Worker(private_redis.url, SECRET, env={**env, "PARKWAY_LEASE_MS": "1000"})
    try:
        rest = list(pw.stream(run_id, after=seen[-1].id, timeout=30))
    finally:
        second.stop()
    everything = list(pw.stream(run_id, timeout=5))
    assert [e.id for e in everything] == [e.id for e in seen] + [e.id for e in rest]
    parts = [e.data["data"]["part"] for e in rest if e.type == "data"]
    assert parts == [3, 4]  # once each: the killed attempt committed nothing
    assert [e.type for e in rest][-2:] == ["run.completed", "done"]
    assert "node.recovered" in [e.type for e in rest]
    assert pw.get_run(run_id).output["parts"] == 4
