"""parkway's worker class: RQ's bookkeeping trimmed, its guarantees kept."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from rq import Queue, SimpleWorker

from parkway import Parkway, RunStatus, Settings
from parkway.adapters.redis import keys
from parkway.workers import jobs
from parkway.workers.rq_internals.worker import TrimmedWorker
from parkway.workers.serializer import MSGPACK, MsgpackSerializer
from parkway.workers.worker import ParkwayWorker
from tests import flows
from tests.conftest import SECRET, Closing
from tests.procs import RedisServer, Worker, sent_commands, wait_for
from tests.test_secret import _connections

STAND_INS = frozenset({"time.time", "time.sleep", "os.abort_not_a_function"})
"""the trivial jobs these tests time and kill: ParkwayWorker runs only parkway's entrypoint otherwise"""


class StandInWorker(ParkwayWorker):
    entrypoints = ParkwayWorker.entrypoints | STAND_INS


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A server of the test's own, so INFO commandstats counts only this test's commands."""
    server = RedisServer(tmp_path, appendonly=False)
    server.start()
    yield server
    server.stop()


class StockWorker(SimpleWorker):
    """RQ's SimpleWorker as it is, but for how it ends its pubsub listener at shutdown (after the
    commands compared are counted): with redis-py 8.2 RQ's own ``unsubscribe`` can wait out the
    listener's 60 s read (the reason parkway overrides it, rq_internals/worker.py)."""

    unsubscribe = TrimmedWorker.unsubscribe


def _worker_commands(url: str, worker_class: type[SimpleWorker], runs: int) -> tuple[dict[str, int], list[str]]:
    settings = Settings(redis_url=url, secret=SECRET)
    with Parkway(settings) as pw, redis.Redis.from_url(url) as client:
        run_ids = [pw.start(flows.loop, {}) for _ in range(runs)]
        client.config_resetstat()
        jobs.install(settings)
        queue = Queue(settings.queue, connection=client, serializer=MsgpackSerializer)
        worker_class([queue], connection=client, serializer=MsgpackSerializer).work(burst=True, logging_level="WARNING")
        stats = client.info("commandstats")
        calls = {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}
        statuses = [pw.get_run(r).status.value for r in run_ids]
        client.flushall()
    return calls, statuses


def test_parkway_worker_sends_fewer_bookkeeping_commands_than_rq(private_redis: RedisServer) -> None:
    """Over 30 jobs, ParkwayWorker skips most worker-key heartbeats (EXPIREs) and suspension
    checks (EXISTS) that stock RQ sends, and every run still completes."""
    stock, stock_status = _worker_commands(private_redis.url, StockWorker, 30)
    ours, our_status = _worker_commands(private_redis.url, ParkwayWorker, 30)
    assert stock_status == our_status == [RunStatus.COMPLETED.value] * 30
    assert stock["expire"] - ours.get("expire", 0) >= 4 * 30, (stock["expire"], ours.get("expire"))
    assert ours.get("exists", 0) * 3 <= stock["exists"], (stock["exists"], ours.get("exists"))


def _round_trips(url: str, job_ids: list[str], func: str, closing: Closing) -> tuple[int, Queue]:
    """Run ``func`` once per job id with a burst ParkwayWorker; the round trips the worker sent."""
    client = closing(redis.Redis.from_url(url))
    queue = Queue("rt", connection=client, serializer=MsgpackSerializer)
    for jid in job_ids:
        queue.enqueue_call(func, args=(), job_id=jid, unique=True, result_ttl=0)
    worker = StandInWorker([queue], connection=client, serializer=MsgpackSerializer)
    with sent_commands() as sent:
        worker.work(burst=True, logging_level="WARNING", with_maintenance=False)
    return len(sent), queue


_RAW_WORKER = (
    "import redis, sys; from rq import Queue; from parkway.workers.worker import ParkwayWorker;"
    "from parkway.workers.serializer import MSGPACK, MsgpackSerializer as S;"
    "c = redis.Redis.from_url(sys.argv[1]); q = Queue('rt', connection=c, serializer=S);"
    "W = type('W', (ParkwayWorker,), {'entrypoints': ParkwayWorker.entrypoints | {'time.time', 'time.sleep'}});"
    "W([q], connection=c, serializer=S).work(burst=sys.argv[2] == 'burst', with_maintenance=False)"
)


def _worker_on_one_job(
    url: str, func: str, seconds: int, job_id: str, closing: Closing
) -> tuple[subprocess.Popen[str], Queue]:
    """A ParkwayWorker process (parkway's maintenance off) that has started ``func(seconds)``."""
    client = closing(redis.Redis.from_url(url))
    queue = Queue("rt", connection=client, serializer=MsgpackSerializer)
    queue.enqueue_call(func, args=(seconds,), job_id=job_id, result_ttl=0)
    proc = subprocess.Popen([sys.executable, "-c", _RAW_WORKER, url, "loop"], stderr=subprocess.PIPE, text=True)
    wait_for(lambda: queue.started_job_registry.get_job_ids() == [job_id], 20, "the job to start", 0.02)
    return proc, queue


def test_a_trivial_job_costs_the_worker_at_most_five_round_trips(private_redis: RedisServer, closing: Closing) -> None:
    """Dequeue, fetch, one transaction to start, one to finish: stock RQ 3.0 sends about 18.
    Both runs pay the same start-up and teardown, so the difference is the per-job cost."""
    few, _ = _round_trips(private_redis.url, [f"a{i}" for i in range(5)], "time.time", closing)
    many, queue = _round_trips(private_redis.url, [f"b{i}" for i in range(45)], "time.time", closing)
    per_job = (many - few) / 40
    assert per_job <= 5, per_job
    client = queue.connection
    leftovers = sorted(k.decode() for k in client.keys("rq:job:*") + client.keys("rq:execution*"))
    assert leftovers == [], leftovers
    assert queue.started_job_registry.get_job_ids() == []
    assert queue.get_job_ids() == [] and client.llen(queue.intermediate_queue_key) == 0


def _commands(url: str, job_ids: list[str], func: str, closing: Closing) -> int:
    """Run ``func`` once per job id with a burst ParkwayWorker; the commands Redis ran for it
    (INFO commandstats: MULTI and EXEC count, as they cost Redis and redis-py a command each)."""
    client = closing(redis.Redis.from_url(url))
    queue = Queue("rt", connection=client, serializer=MsgpackSerializer)
    for jid in job_ids:
        queue.enqueue_call(func, args=(), job_id=jid, unique=True, result_ttl=0)
    client.config_resetstat()
    StandInWorker([queue], connection=client, serializer=MsgpackSerializer).work(
        burst=True, logging_level="WARNING", with_maintenance=False
    )
    calls = sum(int(v["calls"]) for name, v in client.info("commandstats").items() if name != "cmdstat_info")
    client.flushall()
    return calls


def test_a_trivial_job_costs_the_worker_at_most_25_commands(private_redis: RedisServer, closing: Closing) -> None:
    """Each command costs the worker redis-py's packing and parsing and Redis a dispatch (stock
    RQ's bookkeeping trimmed as TrimmedWorker does took 28): the start transaction writes RQ's
    worker key in one HSET, the success transaction deletes the execution with the job and does
    not first trim the job's execution registry, whose key it deletes."""
    few = _commands(private_redis.url, [f"a{i}" for i in range(5)], "time.time", closing)
    many = _commands(private_redis.url, [f"b{i}" for i in range(45)], "time.time", closing)
    per_job = (many - few) / 40
    # below 25.5: RQ's time-driven commands (a suspension check a second, a heartbeat) land in either
    # run as the machine's load has it (25.025 once in CI: one of them); a command more per job is 26
    assert per_job < 25.5, per_job


def test_the_worker_hands_rq_its_serializer_as_an_instance(redis_client: redis.Redis) -> None:
    """RQ checks the serializer of every Job, Queue and registry it builds against a runtime
    Protocol, three times slower for a class: given the class, the worker and its queues use
    the instance."""
    queue = Queue("rt", connection=redis_client, serializer=MsgpackSerializer)
    worker = ParkwayWorker([queue], connection=redis_client, serializer=MsgpackSerializer)
    assert worker.serializer is MSGPACK
    assert all(q.serializer is MSGPACK for q in worker.queues)


def test_a_failing_job_still_lands_in_rqs_failed_registry(private_redis: RedisServer, closing: Closing) -> None:
    _, queue = _round_trips(private_redis.url, ["bad"], "os.abort_not_a_function", closing)
    assert queue.failed_job_registry.get_job_ids() == ["bad"]
    assert queue.started_job_registry.get_job_ids() == []


def test_a_worker_killed_mid_job_leaves_the_job_in_rqs_started_registry(
    private_redis: RedisServer, closing: Closing
) -> None:
    """RQ's own crash detection stays intact: the started registry still names the job."""
    proc, queue = _worker_on_one_job(private_redis.url, "time.sleep", 30, "slow", closing)
    try:
        proc.kill()
        proc.communicate(timeout=10)
        assert queue.started_job_registry.get_job_ids() == ["slow"]
        assert queue.connection.exists("rq:job:slow") == 1
    finally:
        proc.kill()
        proc.communicate()


def _run_parkway_jobs(
    url: str, closing: Closing, runs: list[str] | None = None
) -> tuple[Parkway, list[str], list[bytes]]:
    """Start runs of flows.loop (or use ``runs``), then work them with a burst ParkwayWorker,
    recording what each of the worker's round trips sent."""
    settings = Settings(redis_url=url, secret=SECRET)
    pw = closing(Parkway(settings))
    run_ids = runs if runs is not None else [pw.start(flows.loop, {}) for _ in range(5)]
    client = closing(redis.Redis.from_url(url))
    jobs.install(settings)
    queue = Queue(settings.queue, connection=client, serializer=MsgpackSerializer)
    with sent_commands() as sent:
        ParkwayWorker([queue], connection=client, serializer=MsgpackSerializer).work(
            burst=True, logging_level="WARNING", with_maintenance=False
        )
    return pw, run_ids, sent


def test_a_parkway_job_is_taken_and_begun_in_one_round_trip_and_leaves_no_rq_records(
    private_redis: RedisServer, closing: Closing
) -> None:
    """A parkway job hands its crash recovery to its lease: one round trip takes it off RQ's
    intermediate list, deletes its hash and begins it; no execution record, started-registry
    entry or success transaction is written, and nothing of RQ's per-job state is left."""
    begin = jobs.install(Settings(redis_url=private_redis.url, secret=SECRET)).store._scripts["begin"]
    with redis.Redis.from_url(private_redis.url) as client:
        client.function_load(begin.text)
    pw, run_ids, sent = _run_parkway_jobs(private_redis.url, closing)
    assert [pw.get_run(r).status for r in run_ids] == [RunStatus.COMPLETED] * 5
    with_begin = [s for s in sent if begin.name.encode() in s]
    assert len(with_begin) == 5, len(with_begin)
    assert all(b"rq:job:" in s and b"LREM" in s and b"MULTI" not in s for s in with_begin)
    queue = pw.backend.dispatcher.queue  # type: ignore[attr-defined]
    client = queue.connection
    assert client.keys("rq:job:*") == [] and client.keys("rq:execution*") == []
    assert queue.started_job_registry.get_job_ids() == [] and queue.failed_job_registry.get_job_ids() == []
    assert client.llen(queue.intermediate_queue_key) == 0
    # each begin took its job's outbox entry, which begin.lua names from the run's step (the job gives none)
    assert client.zcard(keys.outbox()) == 0


def test_a_parkway_job_costs_the_worker_two_round_trips_besides_its_commits(
    private_redis: RedisServer, closing: Closing
) -> None:
    """The dequeue and the take-and-begin; then the job's own commits (flows.loop advances a few
    steps in one job). No round trip reads the job's hash. The trimmed RQ path it replaced sent four
    (a fetch, its start and success transactions), and stock RQ about 18. The worker key's
    heartbeat (every 5 s) and the suspension check (every second) add a fraction per job."""
    settings = Settings(redis_url=private_redis.url, secret=SECRET)
    pw = closing(Parkway(settings))
    begin = jobs.install(settings).store._scripts["begin"].name.encode()

    def trips(runs: int) -> int:
        run_ids = [pw.start(flows.loop, {}) for _ in range(runs)]
        _, _, sent = _run_parkway_jobs(private_redis.url, closing, runs=run_ids)
        assert [pw.get_run(r).status for r in run_ids] == [RunStatus.COMPLETED] * runs
        reads = [s for s in sent if b"rq:job:" in s and any(c in s for c in (b"HGETALL", b"HMGET", b"HGET\r"))]
        assert reads == [], reads[:3]
        return sum(1 for s in sent if b"FCALL" not in s or begin in s)

    per_job = (trips(25) - trips(5)) / 20
    assert per_job < 2.5, per_job


def test_a_stop_signal_mid_parkway_job_lets_the_node_finish_then_the_worker_exits(
    private_redis: RedisServer, closing: Closing
) -> None:
    """RQ's warm shutdown holds for a parkway job too, though the worker key is not written busy:
    SIGTERM mid-node waits for the node, the run completes on that attempt, the worker exits 0."""
    pw = closing(Parkway(Settings(redis_url=private_redis.url, secret=SECRET)))
    r = closing(redis.Redis.from_url(private_redis.url))
    r.set("test:block:t", 1)
    worker = Worker(private_redis.url, SECRET, env={"PARKWAY_EFFECTS_URL": private_redis.url})
    try:
        run_id = pw.start(flows.blocking, {"tag": "t"})
        wait_for(lambda: r.exists("test:inside:t"), 15, "the node to start")
        # the worker key lives as long as the job may run (its timeout, an hour by default), as RQ's
        # busy state makes it, not the worker's own TTL (minutes): RQ keeps a worker whose key is gone for dead
        (worker_key,) = r.smembers("rq:workers")
        assert r.ttl(worker_key) > 3000
        worker.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert worker.proc.poll() is None, "the worker quit mid-node"
        r.delete("test:block:t")
        assert worker.proc.wait(20) == 0
    finally:
        out = worker.stop()
    assert "Traceback" not in out, out
    assert pw.get_run(run_id).status is RunStatus.COMPLETED
    assert "node.recovered" not in [e.type for e in pw.stream(run_id, timeout=5)]


def test_a_stale_parkway_job_still_ends_cleanly_for_rq(private_redis: RedisServer, closing: Closing) -> None:
    """A job whose fence the run has moved past is dropped by parkway and finished by RQ."""
    settings = Settings(redis_url=private_redis.url, secret=SECRET)
    pw = closing(Parkway(settings))
    run_id = pw.start(flows.loop, {})
    pw.backend.dispatcher.enqueue(run_id, 0, 7)  # a job for a fence the run never reaches
    _, _, _ = _run_parkway_jobs(private_redis.url, closing, runs=[run_id])
    assert pw.get_run(run_id).status is RunStatus.COMPLETED
    queue = pw.backend.dispatcher.queue  # type: ignore[attr-defined]
    assert queue.failed_job_registry.get_job_ids() == []
    assert queue.started_job_registry.get_job_ids() == []


def test_begin_falls_back_to_its_own_call_after_function_flush(private_redis: RedisServer, closing: Closing) -> None:
    """The take-and-begin's FCALL finds no function (Redis restarted without its data): the job's own
    call loads it and begins, and every run completes."""
    settings = Settings(redis_url=private_redis.url, secret=SECRET)
    pw = closing(Parkway(settings))
    run_ids = [pw.start(flows.loop, {}) for _ in range(3)]
    with redis.Redis.from_url(private_redis.url) as client:
        client.function_flush()
    pw2, _, _ = _run_parkway_jobs(private_redis.url, closing, runs=run_ids)
    assert [pw2.get_run(r).status for r in run_ids] == [RunStatus.COMPLETED] * 3


def test_a_stop_signal_mid_job_lets_the_job_finish_then_the_worker_exits(
    private_redis: RedisServer, closing: Closing
) -> None:
    """RQ's warm shutdown: SIGTERM while busy waits for the job, success bookkeeping included."""
    proc, queue = _worker_on_one_job(private_redis.url, "time.sleep", 1, "nap", closing)
    try:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err
        assert "Traceback" not in err, err
        assert queue.started_job_registry.get_job_ids() == []
        assert queue.failed_job_registry.get_job_ids() == []
        assert queue.connection.exists("rq:job:nap") == 0
    finally:
        proc.kill()
        proc.communicate()


def test_a_malformed_parkway_job_fails_in_rq_and_the_worker_goes_on(
    private_redis: RedisServer, closing: Closing
) -> None:
    """A job naming parkway's entrypoint with the wrong arguments lands in RQ's failed registry;
    the worker keeps working (a run's real job after it completes)."""
    settings = Settings(redis_url=private_redis.url, secret=SECRET)
    pw = closing(Parkway(settings))
    queue = pw.backend.dispatcher.queue  # type: ignore[attr-defined]
    queue.enqueue_call(jobs.EXECUTE_JOB, args=("only-one-argument",), job_id="odd", result_ttl=0)
    run_id = pw.start(flows.loop, {})
    _run_parkway_jobs(private_redis.url, closing, runs=[run_id])
    assert queue.failed_job_registry.get_job_ids() == ["odd"]
    assert pw.get_run(run_id).status is RunStatus.COMPLETED


def test_a_parkway_job_read_from_its_hash_runs_its_node_whether_or_not_it_keeps_its_result(
    private_redis: RedisServer, closing: Closing
) -> None:
    """A job under another id naming parkway's entrypoint runs the run it names: on its lease when it
    keeps no result (its hash deleted as it begins), by RQ's path when it keeps one (RQ keeps it)."""
    settings = Settings(redis_url=private_redis.url, secret=SECRET)
    pw = closing(Parkway(settings))
    queue = pw.backend.dispatcher.queue  # type: ignore[attr-defined]
    lean, kept = pw.start(flows.loop, {}), pw.start(flows.loop, {})
    queue.connection.delete(queue.key, *(f"rq:job:{jobs.job_id(r, 0)}" for r in (lean, kept)))
    queue.enqueue_call(jobs.EXECUTE_JOB, args=(lean, 0, 0), job_id="lean", result_ttl=0)
    queue.enqueue_call(jobs.EXECUTE_JOB, args=(kept, 0, 0), job_id="kept", result_ttl=60)
    _run_parkway_jobs(private_redis.url, closing, runs=[lean, kept])
    assert pw.get_run(lean).status is pw.get_run(kept).status is RunStatus.COMPLETED
    assert queue.connection.exists("rq:job:lean") == 0
    assert queue.connection.hget("rq:job:kept", "status") == b"finished"


def test_a_parkway_job_without_parkway_settings_fails_in_rq_and_the_worker_goes_on(
    private_redis: RedisServer, closing: Closing
) -> None:
    """A bare ParkwayWorker (no PARKWAY_REDIS_URL): parkway's job fails as RQ fails any job."""
    client = closing(redis.Redis.from_url(private_redis.url))
    queue = Queue("rt", connection=client, serializer=MsgpackSerializer)
    queue.enqueue_call(jobs.EXECUTE_JOB, args=("run_nowhere", 0, 0), job_id="orphan", result_ttl=0)
    queue.enqueue_call("time.time", job_id="after", result_ttl=0)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARKWAY_")}
    done = subprocess.run(
        [sys.executable, "-c", _RAW_WORKER, private_redis.url, "burst"], env=env, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert queue.failed_job_registry.get_job_ids() == ["orphan"]
    assert client.exists("rq:job:after") == 0 and queue.get_job_ids() == []


def test_a_node_that_raises_system_exit_does_not_stop_the_worker(
    private_redis: RedisServer, closing: Closing
) -> None:
    """As RQ's own path does, the worker takes even a SystemExit a node raises as the job's: it logs
    it and goes on (the run's lease lapses and the reconciler deals with the run); a run started
    after it completes on the same worker."""
    pw = closing(Parkway(Settings(redis_url=private_redis.url, secret=SECRET)))
    worker = Worker(private_redis.url, SECRET)
    try:
        quitting = pw.start(flows.quitter, {})
        wait_for(lambda: pw.get_run(quitting).status is RunStatus.RUNNING, 15, "the node to run")
        after = pw.start(flows.loop, {})
        assert pw.wait(after, timeout=20).status is RunStatus.COMPLETED
        assert worker.proc.poll() is None
    finally:
        out = worker.stop()
    assert "job_failed" in out and "SystemExit" in out, out[-3000:]


@pytest.mark.parametrize("run_id, fence", [("run_x", 0), ("run_x--c1f", 12), ("A-b_c", 7)])
def test_a_parkway_job_id_names_its_run_and_fence(run_id: str, fence: int) -> None:
    assert jobs.parse_job_id(jobs.job_id(run_id, fence)) == (run_id, fence)


@pytest.mark.parametrize(
    "value",
    [
        "pw-run_x-012", "pw-run_x-", "pw--0", "pw-evil\n-0", "pw-run:x-1", "pw-run_x-1\u0663", "xx-run_x-1",
        "pw-" + "r" * 65 + "-1",
    ],  # fmt: skip
)
def test_any_other_id_names_no_parkway_activation(value: str) -> None:
    """Ids parkway never writes (a fence with a leading zero or not ASCII digits, a run id that is not
    one, another prefix) are not run by their id: the worker reads their hash like any job's."""
    assert jobs.parse_job_id(value) is None


def test_a_job_known_by_its_id_alone_cannot_run_without_the_begin_its_worker_sent(
    redis_url: str, redis_client: redis.Redis, closing: Closing
) -> None:
    """The executor takes a job without its step only with the begin the worker sent for it (the
    step is the run's, read by that begin): called without one, it refuses before touching the run."""
    from parkway.runtime import executor

    settings = Settings(redis_url=redis_url, secret=SECRET)
    pw = closing(Parkway(settings))
    run_id = pw.start(flows.one_choice, {})
    rt = jobs.install(settings)
    with pytest.raises(ValueError, match="needs the begin its worker sent"):
        executor.execute(rt.store, rt.options, run_id, None, 0)
    assert pw.get_run(run_id).status is RunStatus.QUEUED
    assert executor.execute(rt.store, rt.options, run_id, 0, 0) is executor.JobEnd.WAITING


def test_installing_a_worker_runtime_again_closes_the_one_it_replaces(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """jobs.install twice in one process leaves one runtime's connections open, not two."""
    from parkway.workers import jobs

    settings = Settings(redis_url=redis_url, secret=SECRET)
    first = jobs.install(settings)
    first.store.client.ping()
    before = _connections(redis_client)
    jobs.install(settings).store.client.ping()
    assert _connections(redis_client) == before
    jobs.uninstall()
    assert _connections(redis_client) == before - 1


def test_a_job_that_parks_its_run_leaves_no_frames_to_the_cycle_collector(
    redis_url: str, redis_client: redis.Redis, closing: Closing
) -> None:
    """A parked job's frames are freed as it returns: the pause's traceback (which held the
    node's frames, whose callers held the pause) is not kept, so no job leaves garbage that only a
    collection of the worker's whole heap frees."""
    settings = Settings(redis_url=redis_url, secret=SECRET)
    pw = closing(Parkway(settings))
    client = closing(redis.Redis.from_url(redis_url))
    jobs.install(settings)
    queue = Queue(settings.queue, connection=client, serializer=MsgpackSerializer)
    worker = ParkwayWorker([queue], connection=client, serializer=MsgpackSerializer)
    run_ids = [pw.start(flows.one_choice, {}) for _ in range(3)]
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds stays in gc.garbage, for the test to read
    try:
        worker.work(burst=True, logging_level="WARNING", with_maintenance=False)
        gc.collect()
        frames = [o.f_code.co_name for o in gc.garbage if isinstance(o, types.FrameType)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert [pw.get_run(r).status for r in run_ids] == [RunStatus.WAITING] * 3
    assert {"choose", "_attempt", "_carry", "execute"}.isdisjoint(frames), frames


def test_a_parkway_job_holds_one_connection_of_its_stores_pool_for_all_its_round_trips(
    redis_url: str, redis_client: redis.Redis, closing: Closing, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A parkway job's take-and-begin and its commits (flows.loop: four in one job) go over one
    connection of its store's pool, taken once for the job: the pool's hand-out and return (their
    checks of the socket, their bookkeeping) run once per job, not once per round trip."""
    settings = Settings(redis_url=redis_url, secret=SECRET)
    pw = closing(Parkway(settings))
    client = closing(redis.Redis.from_url(redis_url))
    rt = jobs.install(settings)
    pool = rt.store.client.connection_pool
    handed: list[object] = []
    get_connection = pool.get_connection

    def counted() -> object:
        handed.append(get_connection())
        return handed[-1]

    monkeypatch.setattr(pool, "get_connection", counted)
    run_ids = [pw.start(flows.loop, {}) for _ in range(3)]
    queue = Queue(settings.queue, connection=client, serializer=MsgpackSerializer)
    ParkwayWorker([queue], connection=client, serializer=MsgpackSerializer, runtime=rt).work(
        burst=True, logging_level="WARNING", with_maintenance=False
    )
    assert [pw.get_run(r).status for r in run_ids] == [RunStatus.COMPLETED] * 3
    assert len(handed) == 3, len(handed)


def test_a_long_node_keeps_its_workers_rq_key_alive(
    redis_url: str, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node that runs on with no store call of its own (a job its resume began raises the worker
    key's expiry with its first store call only): the worker's maintenance renews the key to the
    expiry the job's start gave it, every ``job_monitoring_interval``, so RQ never counts a worker
    mid-node as dead. Here the key is made to lapse soon, as an idle worker's TTL would."""
    import threading

    monkeypatch.setenv("PARKWAY_EFFECTS_URL", redis_url)
    settings = Settings(redis_url=redis_url, secret=SECRET, lease_ms=1000)  # the maintenance tick: 0.2 s
    queue = Queue(settings.queue, connection=redis_client, serializer=MsgpackSerializer)
    worker = ParkwayWorker([queue], connection=redis_client, serializer=MsgpackSerializer,
                           runtime=jobs.install(settings), job_monitoring_interval=1)
    thread = threading.Thread(target=worker.work, kwargs={"logging_level": None, "burst": True}, daemon=True)
    redis_client.set("test:block:long", 1)
    try:
        with Parkway(settings) as pw:
            run_id = pw.start(flows.blocking, {"tag": "long"})
            thread.start()
            wait_for(lambda: redis_client.exists("test:inside:long"), 15, "the node to start")
            redis_client.pexpire(worker.key, 2500)  # its keep-alive comes within ~1.2 s
            time.sleep(2.9)
            assert redis_client.exists(worker.key), "the worker key lapsed mid-node"
            assert redis_client.ttl(worker.key) > 60
            redis_client.delete("test:block:long")
            thread.join(20)
            assert pw.get_run(run_id).status is RunStatus.COMPLETED
    finally:
        redis_client.delete("test:block:long")
        thread.join(20)
        jobs.uninstall()


STOPPED_WHILE_STARTING = """
import os, signal, sys
import redis
from rq import Queue
from parkway import Settings
from parkway.workers import jobs
from parkway.workers.serializer import MsgpackSerializer
from parkway.workers.worker import ParkwayWorker

class Starting(ParkwayWorker):
    def register_birth(self, *args, **kwargs):  # RQ's step before it installs its signal handlers
        super().register_birth(*args, **kwargs)
        print(self.name, flush=True)
        os.kill(os.getpid(), signal.SIGTERM)

settings = Settings(redis_url=sys.argv[1], secret=sys.argv[2])
client = redis.Redis.from_url(sys.argv[1])
queue = Queue(settings.queue, connection=client, serializer=MsgpackSerializer)
Starting([queue], connection=client, serializer=MsgpackSerializer, runtime=jobs.install(settings)).work(
    logging_level="WARNING")
"""


def test_a_stop_signal_while_the_worker_starts_ends_it_cleanly(redis_url: str, redis_client: redis.Redis) -> None:
    """A SIGTERM that comes after the worker has registered with RQ but before RQ has installed its signal
    handlers (a supervisor stopping a worker that just started) ends it as a warm stop would: exit 0,
    no RQ registration and no stored-format announcement left behind (it used to kill the process on the
    spot: seen as a flaky announcement left in a suite run)."""
    done = subprocess.run([sys.executable, "-c", STOPPED_WHILE_STARTING, redis_url, SECRET],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    name = done.stdout.strip()
    assert name and not redis_client.sismember("rq:workers", f"rq:worker:{name}")
    assert not redis_client.hexists(keys.readers(), name)
