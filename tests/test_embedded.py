"""Embedded mode: the Redis store and ParkwayWorker, on an in-process Redis and a thread.

The first tests name each way fakeredis differs from Redis that parkway meets (see
``parkway/adapters/redis/connection/embedded.py``); they fail when a fakeredis upgrade changes one.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from rq import Worker
from rq.utils import get_version

from parkway import Parkway, RunStatus, Settings, Workflow, use_interrupt
from parkway.adapters.redis.connection import embedded as inproc
from parkway.adapters.redis.store.store import RedisStore
from parkway.workers.worker import ParkwayWorker
from tests.conftest import SECRET


@pytest.fixture
def pw() -> Iterator[Parkway]:
    with Parkway(Settings(secret=SECRET)) as client:
        yield client


def _later(seconds: float, fn: Any) -> None:
    def run() -> None:
        time.sleep(seconds)
        fn()

    threading.Thread(target=run, daemon=True).start()


# --- how fakeredis differs, and what parkway does about it ------------------------------


def test_fakeredis_has_no_info_so_rq_dequeues_with_blpop() -> None:
    """fakeredis lacks INFO; RQ then takes its pre-6.2 path, BLPOP, for the embedded worker's dequeue."""
    client = inproc.client(inproc.server())
    with pytest.raises(redis.ResponseError, match="unknown command"):
        client.info("server")
    assert get_version(client) < (6, 2, 0)


def test_fakeredis_blmove_does_not_block() -> None:
    """fakeredis's BLMOVE on an empty list answers None at once (Redis waits): why parkway wants
    RQ's BLPOP path (above), which blocks."""
    client = inproc.client(inproc.server())
    began = time.monotonic()
    assert client.blmove("empty", "elsewhere", 1) is None
    assert time.monotonic() - began < 0.5


def test_fakeredis_blpop_and_xread_block_across_threads_and_wake_on_a_script_write() -> None:
    """What embedded mode does rely on: BLPOP (the worker's wait) and XREAD BLOCK (wait, stream)
    block, and wake when another thread's Lua script pushes or appends."""
    server = inproc.server()
    waiter, writer = inproc.client(server), inproc.client(server)
    _later(0.2, lambda: writer.eval("return redis.call('RPUSH', KEYS[1], 'job')", 1, "queue"))
    began = time.monotonic()
    assert waiter.blpop(["queue"], 5) == (b"queue", b"job")
    assert 0.1 < time.monotonic() - began < 2
    _later(0.2, lambda: writer.eval("return redis.call('XADD', KEYS[1], '*', 't', 'x')", 1, "events"))
    reply: Any = waiter.xread({"events": "0"}, block=5000)
    assert reply and reply[0][1][0][1] == {b"t": b"x"}


def test_fakeredis_runs_the_commands_behind_a_pipelined_xread_block_after_it_wakes() -> None:
    """As on Redis, an XREAD BLOCK in a pipeline holds back the commands behind it until it returns:
    a waiting list_interrupts sends its wait and its listing in one round trip."""
    server = inproc.server()
    waiter, writer = inproc.client(server), inproc.client(server)
    _later(0.2, lambda: writer.eval("return redis.call('XADD', KEYS[1], '*', 'w', 'x')", 1, "feed"))
    pipe = waiter.pipeline(transaction=False)
    pipe.xread({"feed": "0-0"}, count=1, block=5000)
    pipe.xrevrange("feed", "+", "-", count=1)
    began = time.monotonic()
    woken, last = pipe.execute()
    assert 0.1 < time.monotonic() - began < 2
    assert woken and last and woken[0][1][0][0] == last[0][0]


def test_fakeredis_xread_block_with_nothing_new_answers_an_empty_list() -> None:
    """Redis answers nil, fakeredis an empty list; the store reads both as no events."""
    client = inproc.client(inproc.server())
    assert client.xread({"events": "$"}, block=50) in (None, [])
    assert RedisStore(client).read_events("run_1", "0", 50, 10) == []


def test_an_idle_embedded_worker_waits_instead_of_spinning(monkeypatch: pytest.MonkeyPatch, pw: Parkway) -> None:
    """An idle embedded worker sends a handful of commands a second (its timed wait, RQ's version
    probe, parkway's maintenance), not the thousands a non-blocking wait would."""
    from fakeredis import FakeRedisConnection

    ours = pw.store.client.connection_pool.connection_kwargs["server"]  # type: ignore[attr-defined]
    sent: list[object] = []
    original = FakeRedisConnection.send_packed_command

    def counting(self: Any, command: Any, check_health: bool = True) -> None:
        if getattr(self, "_server", None) is ours:  # not another test's leftover
            sent.append(command)
        original(self, command, check_health)  # type: ignore[no-untyped-call]

    monkeypatch.setattr(FakeRedisConnection, "send_packed_command", counting)
    time.sleep(2)
    assert len(sent) < 60, len(sent)


# --- one path -----------------------------------------------------------------------------


def test_embedded_runs_the_redis_store_and_a_parkway_worker_on_a_thread(pw: Parkway) -> None:
    """Parkway() without a URL has a RedisStore, and one RQ worker (a ParkwayWorker) working its queue
    from a thread of this process."""
    assert isinstance(pw.store, RedisStore)
    assert "parkway-embedded-worker" in [t.name for t in threading.enumerate()]
    deadline = time.monotonic() + 5
    while not Worker.all(connection=pw.store.client) and time.monotonic() < deadline:
        time.sleep(0.01)  # the thread registers itself as it starts
    assert len(Worker.all(connection=pw.store.client)) == 1
    worker = pw.backend.stop.__self__.worker  # type: ignore[union-attr]  # Backend.stop is WorkerThread.stop
    assert type(worker) is ParkwayWorker and worker.queue_names() == [pw.settings.queue]


def test_the_worker_thread_leaves_the_process_signal_handlers_alone() -> None:
    """Off the main thread the worker installs no SIGINT/SIGTERM handler and arms no alarm for its
    job's timeout (RQ's default would, and only the main thread may)."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)}
    flow = Workflow("signals")

    @flow.node(start=True)
    def only(data: dict[str, Any]) -> dict[str, Any]:
        return {"alarm_s": signal.getitimer(signal.ITIMER_REAL)[0]}  # pytest-timeout's own, if any

    with Parkway(Settings(secret=SECRET, job_timeout=100_000)) as pw:
        run = pw.wait(pw.start(flow, {}), timeout=10)
    assert run.status is RunStatus.COMPLETED and run.output is not None
    assert run.output["alarm_s"] < 50_000
    assert {s: signal.getsignal(s) for s in before} == before


def test_a_job_timeout_reaches_a_node_on_the_worker_thread() -> None:
    """PARKWAY_JOB_TIMEOUT holds embedded too (RQ's timer, not SIGALRM): a node past it fails its run."""
    flow = Workflow("slow")

    @flow.node(start=True)
    def crawl(data: dict[str, Any]) -> dict[str, Any]:
        for _ in range(200):  # the timer's exception lands between two bytecodes, not inside sleep
            time.sleep(0.05)
        return {}

    with Parkway(Settings(secret=SECRET, job_timeout=1)) as pw:
        run = pw.wait(pw.start(flow, {}), timeout=8)
    assert run.status is RunStatus.FAILED
    assert run.error is not None and "timeout" in run.error.message.lower()


def test_a_workflow_defined_in_a_function_runs_embedded(pw: Parkway) -> None:
    """A workflow no module can import (a local, or one in __main__) runs: the backend keeps it by reference."""
    flow = Workflow("local")

    @flow.node(start=True)
    def ask(data: dict[str, Any]) -> dict[str, Any]:
        return {"picked": use_interrupt({"kind": "text", "question": "Name?"}, id="name")}

    run_id = pw.start(flow, {})
    assert pw.wait(run_id, timeout=10).status is RunStatus.WAITING
    token = pw.list_interrupts(run_id=run_id, include_tokens=True).items[0].resume_token
    assert token is not None and pw.resume(token, value="Ada").accepted
    run = pw.wait(run_id, timeout=10)
    assert run.status is RunStatus.COMPLETED and run.output == {"picked": "Ada"}


def test_wait_stream_and_drain_follow_a_node_running_on_the_worker_thread(pw: Parkway) -> None:
    """A node still running on the worker: drain blocks until it ends, wait and stream see it end."""
    flow = Workflow("sleepy")

    @flow.node(start=True)
    def nap(data: dict[str, Any]) -> dict[str, Any]:
        time.sleep(0.3)
        return {"rested": True}

    first, second = pw.start(flow, {}), pw.start(flow, {})
    began = time.monotonic()
    pw.drain()
    assert time.monotonic() - began >= 0.5  # both ran, one after the other
    assert pw.get_run(first).status is RunStatus.COMPLETED
    assert [e.type for e in pw.stream(second, timeout=5)][-1] == "done"
    third = pw.start(flow, {})
    assert pw.wait(third, timeout=5).output == {"rested": True}


def test_the_embedded_worker_records_expiries_by_itself(pw: Parkway) -> None:
    """The worker's maintenance thread reconciles embedded too: an interrupt past its TTL ends its run expired."""
    flow = Workflow("brief")

    @flow.node(start=True)
    def ask(data: dict[str, Any]) -> dict[str, Any]:
        return {"name": use_interrupt({"kind": "text", "question": "Name?"}, id="name", ttl_ms=1000)}

    run_id = pw.start(flow, {})
    assert pw.wait(run_id, timeout=10).status is RunStatus.WAITING
    events = [e.type for e in pw.stream(run_id, timeout=10)]
    assert events[-2:] == ["interrupt.expired", "done"]
    assert pw.get_run(run_id).status is RunStatus.EXPIRED


def test_the_worker_thread_leaves_logging_to_the_application(pw: Parkway) -> None:
    """RQ's worker loggers get no stdout/stderr handlers of RQ's own and keep propagating to the
    application's (RQ adds its own only when nothing would catch their records)."""
    pw.wait(pw.start(_noop(), {}), timeout=10)
    for name in ("rq.worker", "rq.job"):
        logger = logging.getLogger(name)
        assert logger.propagate
        assert all(isinstance(h, logging.NullHandler) for h in logger.handlers), logger.handlers


def test_close_stops_the_worker_thread_at_once() -> None:
    """close() wakes the idle worker from its wait: its threads are gone well within a dequeue timeout."""
    pw = Parkway(Settings(secret=SECRET))
    pw.wait(pw.start(_noop(), {}), timeout=10)
    pw.close()
    deadline = time.monotonic() + 0.8
    while "parkway-embedded-worker" in [t.name for t in threading.enumerate()] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "parkway-embedded-worker" not in [t.name for t in threading.enumerate()]


def _noop() -> Workflow:
    flow = Workflow("noop")

    @flow.node(start=True)
    def only(data: dict[str, Any]) -> dict[str, Any]:
        return {}

    return flow
