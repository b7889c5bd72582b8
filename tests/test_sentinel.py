"""Redis under Sentinel: parkway follows the master through a failover, asking the sentinels again
at every reconnect, and never reads the old primary once it comes back empty on its port.

Each test runs its own loopback group (``tests.procs.SentinelGroup``: a primary, replicas and
``redis-server --sentinel`` processes with a short ``down-after-milliseconds``), so a failover
takes a second or two.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from rq import Queue
from structlog.testing import capture_logs

from parkway import ConfigError, Parkway, Settings, StoreUnavailable, ValidationError, Workflow, cli, emit, use_step
from parkway.adapters.redis import keys
from parkway.adapters.redis.connection.connection import connect
from parkway.adapters.redis.connection.replicas import ReplicaAcks
from parkway.adapters.redis.connection.sentinel import MasterConnection, SentinelSpec, parse_sentinel_url
from parkway.cli import common
from parkway.runtime.protocol import ResumeResult
from parkway.workers import jobs
from parkway.workers.reconciler import reconcile_once
from parkway.workers.serializer import MsgpackSerializer
from parkway.workers.worker import ParkwayWorker
from tests import flows
from tests.conftest import SECRET
from tests.procs import SentinelGroup, Worker, sent_commands, wait_for


def test_a_sentinel_url_names_sentinels_master_database_and_both_passwords() -> None:
    """``redis+sentinel://user:pw@h1:p1,h2:p2/<master>/<db>?sentinel_password=..`` reads back whole."""
    spec = parse_sentinel_url("redis+sentinel://app:s%40cret@10.0.0.1:26379,[::1]:26380/orders/3?sentinel_password=sp")
    assert spec == SentinelSpec((("10.0.0.1", 26379), ("::1", 26380)), "orders", 3, "app", "s@cret", None, "sp")
    assert parse_sentinel_url(spec.url()) == spec
    assert parse_sentinel_url("redis+sentinel://h:1/m") == SentinelSpec((("h", 1),), "m")


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis+sentinel://h:1", "names its master"),
        ("redis+sentinel://h:1/m/x", "must be a number"),
        ("redis+sentinel://h/m", "host:port"),
        ("redis+sentinel://h:99999/m", "host:port"),
        ("redis+sentinel://h:1/m?password=x", "takes only"),
        ("http://h:1/0", "must start with"),
        ("redis://h:1/1,", "database must be a number"),  # redis-py would take database 0 for these
        ("redis://h:1/15x", "database must be a number"),
        ("redis://h:1/?db=x", "database must be a number"),
        ("redis://h:1/1?db=2", "names its database twice"),
        ("redis://h:x/0", "port"),
        ("redis://h:70000/0", "port"),
        ("unix:///tmp/r.sock?db=a", "database must be a number"),
    ],
)
def test_a_malformed_redis_url_is_refused_when_settings_are_made(url: str, says: str) -> None:
    """Settings refuse a Sentinel string that names no master, a bad database or port, an unknown
    parameter, and any scheme parkway cannot connect with, naming the fault (never the password)."""
    with pytest.raises(ConfigError, match=says):
        Settings(redis_url=url.replace("h:", "u:pw@h:", 1))
    with pytest.raises(ConfigError) as refused:
        Settings(redis_url="redis+sentinel://u:hunter2@h:1")
    assert "hunter2" not in str(refused.value)


def test_sentinels_and_master_from_the_environment_make_the_same_url() -> None:
    """PARKWAY_REDIS_SENTINELS + PARKWAY_REDIS_MASTER (+ passwords) are the one-string form; either
    alone, or with PARKWAY_REDIS_URL too, is refused."""
    env = {"PARKWAY_REDIS_SENTINELS": "a:26379, b:26380", "PARKWAY_REDIS_MASTER": "pw",
           "PARKWAY_REDIS_PASSWORD": "p w", "PARKWAY_REDIS_SENTINEL_PASSWORD": "sp"}
    spec = parse_sentinel_url(Settings.from_env(env).redis_url or "")
    assert spec == SentinelSpec((("a", 26379), ("b", 26380)), "pw", 0, None, "p w", None, "sp")
    for partial in ({"PARKWAY_REDIS_SENTINELS": "a:1"}, {"PARKWAY_REDIS_MASTER": "pw"},
                    {**env, "PARKWAY_REDIS_URL": "redis://x:1/0"}):
        with pytest.raises(ConfigError, match="PARKWAY_REDIS"):
            Settings.from_env(partial)


def test_replica_acks_are_on_by_default_under_sentinel_only() -> None:
    """Under Sentinel each commit waits for 1 replica for 100 ms unless told otherwise; on a plain
    Redis for none unless asked; out-of-range values are refused."""
    assert Settings(redis_url="redis+sentinel://h:1/m").acks == ReplicaAcks(1, 100)
    assert Settings(redis_url="redis+sentinel://h:1/m", replica_acks=0).acks is None
    assert Settings(redis_url="redis://h:1/0").acks is None
    assert Settings.from_env({"PARKWAY_REDIS_URL": "redis://h:1/0", "PARKWAY_REPLICA_ACKS": "2",
                              "PARKWAY_REPLICA_ACK_MS": "250"}).acks == ReplicaAcks(2, 250)
    for bad in ({"replica_acks": -1}, {"replica_acks": True}, {"replica_ack_ms": 0}, {"replica_ack_ms": 60000}):
        with pytest.raises(ConfigError, match="PARKWAY_REPLICA_ACK"):
            Settings(**bad)


def test_the_cli_takes_sentinels_and_a_master_where_it_takes_a_redis_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """--redis-sentinels with --redis-master make the Sentinel string (the master's password from
    PARKWAY_REDIS_PASSWORD); with --redis-url too they are refused."""
    monkeypatch.setenv("PARKWAY_REDIS_PASSWORD", "pw")
    for command in ("worker", "serve", "interrupts", "reconcile"):
        args = cli.parser().parse_args([command, "--redis-sentinels", "h:26379", "--redis-master", "m"])
        assert parse_sentinel_url(common.settings_of(args).redis_url or "") == SentinelSpec((("h", 26379),), "m",
                                                                                        password="pw")
    args = cli.parser().parse_args(["show", "r", "--redis-url", "redis://h:1/0", "--redis-sentinels", "h:1"])
    with pytest.raises(ConfigError, match="not both"):
        common.settings_of(args)


def test_a_sentinel_client_connects_with_the_class_that_asks_again() -> None:
    """The client connect() builds from a Sentinel string uses MasterConnection with the sentinels
    and master in its pool's keyword arguments, which RQ's WorkerPool hands its children."""
    from rq.connections import parse_connection

    client = connect("redis+sentinel://127.0.0.1:1,127.0.0.1:2/m/4")
    try:
        _, connection_class, kwargs = parse_connection(client)
        assert connection_class is MasterConnection
        assert kwargs["sentinels"] == (("127.0.0.1", 1), ("127.0.0.1", 2))
        assert (kwargs["master"], kwargs["db"]) == ("m", 4)
    finally:
        client.close()


PLANNED_DOWN_AFTER_MS = 5000
"""the sentinels' down-after for a test that switches the master on purpose (``parkway failover``,
SENTINEL FAILOVER): at 1000 ms, their ping period, they first ping a master just promoted about a
second after the switch, take it for down, and fail back to the old one (3 of 3 switchovers on
loopback with one sentinel; 0 of 3 at 5000 ms); a planned switch needs no quick detection. Also
for a test that wants no failover at all (on a loaded machine 1000 ms can pass without a reply)."""


@pytest.fixture
def group(tmp_path: Path) -> Iterator[SentinelGroup]:
    g = SentinelGroup(tmp_path)
    g.start()
    try:
        yield g
    finally:
        g.stop()


@contextmanager
def in_process_worker(settings: Settings, **options: Any) -> Iterator[ParkwayWorker]:
    """Parkway's worker, in this process, set up (its runtime installed), not started."""
    connection = connect(settings.redis_url or "")
    try:
        queue = Queue(settings.queue, connection=connection, serializer=MsgpackSerializer)
        yield ParkwayWorker([queue], connection=connection, runtime=jobs.install(settings), **options)
    finally:
        jobs.uninstall()
        connection.close()


def run_jobs(settings: Settings) -> None:
    """Every queued job run to its end by parkway's worker, in this process (burst)."""
    with in_process_worker(settings) as worker:
        worker.work(burst=True, logging_level="WARNING", with_maintenance=False)


@pytest.fixture
def quorum(tmp_path: Path) -> Iterator[SentinelGroup]:
    """Three sentinels (quorum 2), as the README's topology has: one sentinel alone, on a loaded machine,
    may take the old primary restarted empty for the master again (it fails back), and then every client
    that follows the sentinels reads it; that is the topology's failure, not the client's."""
    g = SentinelGroup(tmp_path, sentinels=3)
    g.start()
    try:
        yield g
    finally:
        g.stop()


@pytest.mark.slow
def test_a_client_follows_the_master_and_never_reads_the_old_primary_restarted_empty(quorum: SentinelGroup) -> None:
    """Killed, the primary is replaced by its replica; restarted empty on its old port, it is never
    read: lookups running all along (one in flight at the kill) read every valid token as pending,
    none as ``unknown``, and resumes then commit on the new master."""
    settings = Settings(redis_url=quorum.url, secret=SECRET, replica_acks=0)
    with Parkway(settings) as pw:
        run_ids = [pw.start(flows.two_questions, {}) for _ in range(3)]
        run_jobs(settings)
        tokens = [pw.list_interrupts(run_id=r, include_tokens=True).items[0].resume_token for r in run_ids]
        assert all(tokens)
        seen: list[Any] = []
        stop = threading.Event()

        def look() -> None:
            while not stop.is_set():
                for token in tokens:
                    assert token is not None
                    try:
                        found = pw.lookup(token)
                    except Exception as exc:  # noqa: BLE001 - recorded: the test says what it saw
                        found = exc
                    seen.append(found)

        looker = threading.Thread(target=look)
        looker.start()
        try:
            time.sleep(0.2)
            old = quorum.primary.port
            quorum.primary.kill()
            quorum.wait_for_switch(old)
            # empty, on its old port, still calling itself a master; never to be promoted again (what
            # AOF, or not restarting an empty primary, gives a deployment: on a loaded machine the
            # sentinels could otherwise fail back to it, and the runs would be gone with the topology)
            quorum.primary.extra += ["--replica-priority", "0"]
            quorum.primary.start()
            time.sleep(2.5)
        finally:
            stop.set()
            looker.join(30)
        quorum.wait_for_rejoined(quorum.primary)  # the resumes below are for a settled topology
        unknown = [s for s in seen if isinstance(s, ResumeResult)]
        failed = [s for s in seen if isinstance(s, Exception)]
        assert not unknown, f"a valid token read {unknown[0]} (the empty old primary answered)"
        assert not failed, f"a lookup failed across the failover: {failed[0]!r}"
        assert len(seen) > len(tokens)
        for token in tokens:
            assert token is not None
            assert pw.resume(token, value="Ada").accepted
        with capture_logs() as logs, in_process_worker(settings) as worker:
            queued = worker.connection.llen(f"rq:queue:{settings.queue}")  # what the worker finds
            worker.work(burst=True, logging_level="WARNING", with_maintenance=False)
        for run_id in run_ids:  # else: which server the sentinels name, the servers' ports, what the worker saw
            said = (quorum.master_port(), quorum.primary.port, [r.port for r in quorum.replicas], queued, logs)
            assert pw.get_run(run_id).status.value == "waiting", said  # its second question, on the new master


@pytest.fixture
def replicated(tmp_path: Path) -> Iterator[SentinelGroup]:
    """A primary and one replica, no sentinels."""
    g = SentinelGroup(tmp_path, sentinels=0)
    g.start()
    try:
        yield g
    finally:
        if g.replicas[0].proc is not None:
            g.replicas[0].proc.send_signal(signal.SIGCONT)
        g.stop()


@pytest.mark.slow
def test_each_commit_waits_for_its_replica_in_its_own_round_trip(replicated: SentinelGroup) -> None:
    """With replica acknowledgement, every committing script is sent with its WAIT, in one round
    trip; read-only ones without; a function Redis must load again and one call it refuses leave the
    connection in step."""
    settings = Settings(redis_url=replicated.primary.url, secret=SECRET, replica_acks=1, replica_ack_ms=2000)
    with Parkway(settings) as pw:
        run_id = pw.start(flows.two_questions, {})
        run_jobs(settings)
        token = pw.list_interrupts(run_id=run_id, include_tokens=True).items[0].resume_token
        assert token is not None
        store: Any = pw.store
        store.client.function_flush()
        with sent_commands() as sent:
            pw.lookup(token)
            assert pw.resume(token, value="Ada").accepted
        evals = [s for s in sent if b"FCALL" in s]
        # each sent twice: refused (no such function), FUNCTION LOAD, then again; the resume's WAIT with each FCALL
        assert [b"WAIT" in s for s in evals] == [False, False, True, True], evals
        with pytest.raises(ValidationError):
            pw.start(flows.two_questions, {"other": 1}, run_id=run_id)  # refused by its script, WAIT read all the same
        assert pw.get_run(run_id).status.value in ("queued", "running", "waiting")
        run_jobs(settings)
        assert pw.get_run(run_id).status.value == "waiting"


@pytest.mark.slow
def test_a_commit_its_replica_does_not_acknowledge_raises_store_unavailable(replicated: SentinelGroup) -> None:
    """A replica that does not acknowledge a commit in time (frozen here) makes the call raise
    StoreUnavailable saying the outcome is unknown, within about the wait, and drops the connection."""
    patient = Settings(redis_url=replicated.primary.url, secret=SECRET, replica_acks=1, replica_ack_ms=2000)
    with Parkway(patient) as pw:  # set up without a deadline a loaded machine could miss
        run_id = pw.start(flows.two_questions, {})
        run_jobs(patient)
        token = pw.list_interrupts(run_id=run_id, include_tokens=True).items[0].resume_token
        assert token is not None
    with Parkway(patient.with_(replica_ack_ms=100)) as pw:
        replica = replicated.replicas[0].proc
        assert replica is not None
        replica.send_signal(signal.SIGSTOP)
        try:
            began = time.monotonic()
            with pytest.raises(StoreUnavailable, match="0 of 1 replica.*outcome is unknown") as raised:
                pw.resume(token, value="Ada")
            assert time.monotonic() - began < 2
            assert raised.value.run_id == run_id
            assert isinstance(pw.lookup(token), ResumeResult)  # it did commit, on the primary alone
            assert len(pw.store.client.connection_pool._available_connections) <= 1  # type: ignore[attr-defined]
        finally:
            replica.send_signal(signal.SIGCONT)


@pytest.mark.slow
def test_the_worker_waits_out_noreplicas_in_rqs_bookkeeping_instead_of_quitting(replicated: SentinelGroup) -> None:
    """A primary that refuses writes for a while (NOREPLICAS: its replica frozen, under
    min-replicas-to-write) while the worker waits for jobs makes it wait and try again, logging
    why, and once the replica is back it runs the next job; RQ's own loop quits at the first such
    reply (its blocking dequeue is a write)."""
    settings = Settings(redis_url=replicated.primary.url, secret=SECRET)
    replica = replicated.replicas[0].proc
    assert replica is not None
    with Parkway(settings) as pw, redis.Redis(port=replicated.primary.port) as primary, \
            in_process_worker(settings, worker_ttl=16) as worker, capture_logs() as logs:  # dequeues of 1 s
        ended: list[bool] = []
        loop = threading.Thread(target=lambda: ended.append(worker.work(logging_level="WARNING",
                                                                        with_maintenance=False)))
        loop.start()
        try:
            # the worker waits for jobs first: RQ's start (its registration) is not what this specifies
            wait_for(lambda: primary.hget(worker.key, "state") == b"idle" or ended, 15, "the worker to wait for jobs")
            primary.config_set("min-replicas-max-lag", 1)
            primary.config_set("min-replicas-to-write", 1)
            replica.send_signal(signal.SIGSTOP)
            try:
                wait_for(lambda: any(e["event"] == "worker_store_unavailable" for e in logs) or ended, 15,
                         "the worker's dequeue to be refused")
            finally:
                replica.send_signal(signal.SIGCONT)
            assert not ended, "the worker quit"
            assert any("NOREPLICAS" in e.get("error", "") for e in logs), logs
            wait_for(lambda: not _refuses_writes(primary), 15, "the replica to be back")
            run_id = pw.start(flows.two_questions, {})
            wait_for(lambda: pw.get_run(run_id).status.value == "waiting", 15, "the worker to run the job")
        finally:
            worker.stop()
            loop.join(15)


def _refuses_writes(primary: redis.Redis) -> bool:
    try:
        primary.set("probe", 1)
    except redis.ResponseError as exc:
        return "NOREPLICAS" in str(exc)
    return False


@pytest.mark.slow
def test_a_worker_pool_follows_the_master_through_a_failover(tmp_path: Path) -> None:
    """`parkway worker --workers 2` on a Sentinel string: its children (each with the RQ connection
    RQ's pool rebuilds) run jobs before a primary crash and, on the promoted replica, after it;
    resumes given after the switch are acknowledged by the remaining replica and carried through."""
    group = SentinelGroup(tmp_path, replicas=2)
    group.start()
    worker = None
    try:
        patient = {"PARKWAY_REPLICA_ACK_MS": "2000"}  # acknowledgements as on an idle machine, or a shortfall
        worker = Worker(group.url, SECRET, "--workers", "2", env=patient)
        with Parkway(Settings(redis_url=group.url, secret=SECRET, replica_ack_ms=2000)) as pw:
            run_ids = [pw.start(flows.two_questions, {}) for _ in range(3)]

            def asked(question: str) -> list[str] | None:
                pages = [pw.list_interrupts(run_id=r, include_tokens=True).items for r in run_ids]
                if all(len(p) == 1 and p[0].request.question == question for p in pages):
                    return [p[0].resume_token or "" for p in pages]
                return None

            tokens = wait_for(lambda: asked("Your name?"), 30, "the pool to park every run")
            old = group.primary.port
            group.primary.kill()
            new = group.wait_for_switch(old)
            with redis.Redis(port=new, decode_responses=True) as master:
                wait_for(lambda: master.info("replication").get("slave0", {}).get("state") == "online", 20,
                         "the other replica to follow the new master")
            assert all(pw.resume(t, value="Ada").accepted for t in tokens)
            tokens = wait_for(lambda: asked("Pick a color"), 30, "the pool to run the resumed runs")
            assert all(pw.resume(t, selected="red").accepted for t in tokens)
            wait_for(lambda: all(pw.get_run(r).status.value == "completed" for r in run_ids), 30, "the runs to end")
        assert worker.proc.poll() is None, "the worker quit"
    finally:
        if worker is not None:
            worker.stop()
        group.stop()


@pytest.mark.slow
def test_the_http_api_follows_the_master_through_a_failover(tmp_path: Path) -> None:
    """`parkway serve`'s app on a Sentinel string starts runs and streams their events (its asyncio
    reader asks the sentinels too) before a primary crash and, on the promoted replica, after it."""
    from tests.test_api import KEY, Server, _sse

    group = SentinelGroup(tmp_path, replicas=2)
    group.start()
    patient = {"PARKWAY_REPLICA_ACK_MS": "2000"}  # acknowledgements as on an idle machine, or a shortfall
    server = worker = None
    try:
        server, worker = Server(group.url, **patient), Worker(group.url, SECRET, env=patient)
        api = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=20)
        with api:
            def interrupted() -> None:
                run = api.post("/v1/runs", json={"workflow": "tests.flows:one_choice", "input": {}})
                assert run.status_code == 201, run.text
                events = [kind for kind, _ in _sse(server, run.json()["runId"], stop_at="interrupt")]
                assert events[-1] == "interrupt", events

            interrupted()
            old = group.primary.port
            group.primary.kill()
            new = group.wait_for_switch(old)
            with redis.Redis(port=new, decode_responses=True) as master:
                wait_for(lambda: master.info("replication").get("slave0", {}).get("state") == "online", 20,
                         "the other replica to follow the new master")
            interrupted()
        assert worker.proc.poll() is None, "the worker quit"
    finally:
        if worker is not None:
            worker.stop()
        if server is not None:
            server.stop()
        group.stop()


_reached, _unblock = threading.Event(), threading.Event()
late_step = Workflow("late_step")


@late_step.node(start=True)
def block_then_record(data: dict[str, Any]) -> dict[str, Any]:
    _reached.set()
    _unblock.wait(30)
    return {"after": use_step("after", lambda: 1)}


def test_an_attempt_whose_begin_was_lost_ends_stale_without_failing_the_run(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """A hook's write refused as stale (here: the run reads queued at the attempt's own fence, as
    when a failover lost the begin the worker sent to the old primary) ends the attempt, committing
    nothing: the run is not failed by an attempt that no longer holds it."""
    settings = Settings(redis_url=redis_url, secret=SECRET)
    _reached.clear()
    _unblock.clear()
    with Parkway(settings) as pw, in_process_worker(settings) as worker:
        run_id = pw.start(late_step, {})
        loop = threading.Thread(target=worker.work, kwargs={"burst": True, "logging_level": "WARNING",
                                                             "with_maintenance": False})
        loop.start()
        try:
            assert _reached.wait(15)
            redis_client.hset(keys.run(run_id), "status", "queued")  # the begin, lost with the old primary
        finally:
            _unblock.set()
            loop.join(15)
        assert pw.get_run(run_id).status.value == "queued"


@pytest.mark.slow
def test_a_commit_acknowledged_too_late_to_trust_raises_store_unavailable(replicated: SentinelGroup) -> None:
    """A commit whose acknowledgement comes long after its WAIT's timeout (its primary frozen while
    the command waited: long enough, it could have been replaced meanwhile) raises StoreUnavailable
    saying the outcome is unknown, though a replica acknowledged it."""
    settings = Settings(redis_url=replicated.primary.url, secret=SECRET, replica_acks=1, replica_ack_ms=100)
    primary = replicated.primary.proc
    assert primary is not None
    with Parkway(settings.with_(replica_ack_ms=2000)) as pw:
        pw.start(flows.two_questions, {})  # the script loaded (Redis keeps it for every client)
    with Parkway(settings) as pw:
        pw.store.ping()  # a connection open before the freeze
        pw.store.formats.writes()  # and the process's one decision of the format it writes, made before it
        primary.send_signal(signal.SIGSTOP)
        threading.Timer(1.6, primary.send_signal, (signal.SIGCONT,)).start()
        with pytest.raises(StoreUnavailable, match="too late to trust.*outcome is unknown"):
            pw.start(flows.two_questions, {})


@pytest.mark.slow
def test_a_node_never_runs_on_a_begin_no_replica_acknowledged(replicated: SentinelGroup) -> None:
    """The worker's begin (sent with the dequeue's bookkeeping) waits for the replicas too: when none
    acknowledges it, the node's body does not run (its outside effect is not performed on a begin a
    failover may discard), the worker goes on, and the run is replayed once the replica is back."""
    patient = Settings(redis_url=replicated.primary.url, secret=SECRET, replica_acks=1, replica_ack_ms=2000,
                       lease_ms=500)
    replica = replicated.replicas[0].proc
    assert replica is not None
    with Parkway(patient) as pw:
        run_id = pw.start(flows.stepper, {"tag": "unconfirmed-begin"})
        replica.send_signal(signal.SIGSTOP)
        try:
            with capture_logs() as logs:
                run_jobs(patient.with_(replica_ack_ms=100))
        finally:
            replica.send_signal(signal.SIGCONT)
        assert flows.effects["charge:unconfirmed-begin"] == 0
        assert any(e["event"] == "worker_store_unavailable" and "begin" in e["error"] for e in logs), logs
        with in_process_worker(patient) as worker:
            rt = worker.parkway_runtime()

            def replayed() -> bool:
                reconcile_once(rt.store, rt.dispatcher, now=int(time.time() * 1000) + 1000)
                return pw.get_run(run_id).status.value == "queued"

            wait_for(replayed, 15, "the reconciler to requeue the run")
            reconcile_once(rt.store, rt.dispatcher, now=int(time.time() * 1000) + 60_000)  # its outbox: the job
            worker.work(burst=True, logging_level="WARNING", with_maintenance=False)
        assert pw.get_run(run_id).status.value == "waiting"
        assert flows.effects["charge:unconfirmed-begin"] == 1


@pytest.mark.slow
def test_parkway_failover_switches_the_master_without_losing_an_acknowledged_resume(tmp_path: Path) -> None:
    """`parkway failover` (the fenced switchover) while resumes are being acknowledged, with two
    replicas (where a bare SENTINEL FAILOVER lost answers): it prints its steps and exits 0; the old
    primary now replicates the new master; every resume acknowledged before, during or after the
    switch is still taken (its token, answered again the same, reads accepted; none asks again); a
    resume whose outcome was unknown (StoreUnavailable) is sent again and reads accepted."""
    import subprocess
    import sys

    group = SentinelGroup(tmp_path, replicas=2, sentinels=3, down_after_ms=PLANNED_DOWN_AFTER_MS)
    group.start()
    try:
        settings = Settings(redis_url=group.url, secret=SECRET, replica_ack_ms=2000)
        with Parkway(settings) as pw:
            run_ids = [pw.start(flows.two_questions, {}) for _ in range(40)]
            run_jobs(settings)
            tokens = [pw.list_interrupts(run_id=r, include_tokens=True).items[0].resume_token or "" for r in run_ids]
            acknowledged: list[str] = []
            unknown = [0]

            def answer_all() -> None:
                for token in tokens:
                    while True:
                        try:
                            assert pw.resume(token, value="Ada").accepted
                            break
                        except StoreUnavailable:  # outcome unknown: the same answer again
                            unknown[0] += 1
                    acknowledged.append(token)
                    time.sleep(0.05)

            answering = threading.Thread(target=answer_all)
            answering.start()
            wait_for(lambda: len(acknowledged) >= 5, 20, "the first answers")
            old = group.primary.port
            at_start = len(acknowledged)
            done = subprocess.run([sys.executable, "-m", "parkway.cli", "failover", "--redis-url", group.url],
                                  capture_output=True, text=True, timeout=60)
            answering.join(60)
            assert done.returncode == 0, done.stdout + done.stderr
            for step in ("writes paused", "SENTINEL FAILOVER sent", "now replicates", "done: master is"):
                assert step in done.stdout, done.stdout
            assert at_start < len(tokens) - 5  # the switch came while answers were being given
            assert group.master_port() != old
            with redis.Redis(port=old, decode_responses=True) as was:
                # once in a CI run it still read master right after the command (with down-after 1000 ms:
                # see PLANNED_DOWN_AFTER_MS); what it reads, and what the sentinels say, are in the failure
                def demoted() -> bool:
                    return bool(was.execute_command("ROLE")[0] == "slave")

                try:
                    wait_for(demoted, 10, "the old primary to replicate")
                except AssertionError:
                    raise AssertionError(f"old primary ROLE {was.execute_command('ROLE')}, sentinels name "
                                         f"{group.master_port()}, command said:\n{done.stdout}") from None
            assert len(acknowledged) == len(tokens)
            for token in tokens:
                assert isinstance(pw.lookup(token), ResumeResult)  # answered: not pending again
                assert pw.resume(token, value="Ada").accepted
        assert len(done.stdout.splitlines()) >= 6
    finally:
        group.stop()


@pytest.mark.slow
def test_a_sentinel_that_missed_the_failover_does_not_choose_the_master(tmp_path: Path) -> None:
    """A sentinel that has not heard of a failover yet (here: one watching another server under the
    same name, at configuration epoch 0) names a server that calls itself a master. Asked first,
    redis-py's discovery takes its word; parkway's asks every sentinel and follows the newest
    configuration (the highest config-epoch), sync and asyncio alike."""
    import asyncio

    from parkway.adapters.redis.connection.sentinel import async_client, async_sentinels, pool_kwargs

    (tmp_path / "group").mkdir()
    (tmp_path / "stale").mkdir()
    group = SentinelGroup(tmp_path / "group", replicas=1, down_after_ms=PLANNED_DOWN_AFTER_MS)
    stale = SentinelGroup(tmp_path / "stale", replicas=0)
    group.start()
    try:
        stale.start()
        try:
            old = group.primary.port
            wait_for(lambda: _failover(group), 30, "the sentinel to take the failover (a replica it finds good)")
            new = group.wait_for_switch(old)
            wait_for(lambda: _role(new) == "master", 20, "the promoted replica to be a master")
            hosts = f"127.0.0.1:{stale.sentinel_ports[0]},127.0.0.1:{group.sentinel_ports[0]}"
            url = f"redis+sentinel://{hosts}/{group.name}/0"
            with redis.Redis(connection_pool=redis.ConnectionPool(**pool_kwargs(parse_sentinel_url(url)))) as client:
                client.set("where", "sync")
            with redis.Redis(port=new, decode_responses=True) as r:
                assert r.get("where") == "sync"
            with redis.Redis(port=stale.primary.port) as r:
                assert r.get("where") is None

            async def write() -> None:
                manager = async_sentinels(url)
                client = async_client(url, manager)
                await client.set("where", "async")
                await client.aclose()
                await client.connection_pool.disconnect()
                for sentinel in manager.sentinels:
                    await sentinel.aclose()

            asyncio.run(write())
            with redis.Redis(port=new, decode_responses=True) as r:
                assert r.get("where") == "async"
        finally:
            stale.stop()
    finally:
        group.stop()


def _role(port: int) -> str:
    try:
        with redis.Redis(port=port, decode_responses=True) as r:
            return str(r.execute_command("ROLE")[0])
    except redis.ConnectionError:
        return ""


def _failover(group: SentinelGroup) -> bool:
    try:
        with group.sentinel() as s:
            s.execute_command("SENTINEL", "FAILOVER", group.name)
        return True
    except redis.ResponseError as exc:  # NOGOODSLAVE until the sentinel has the replica's fresh INFO
        if "NOGOODSLAVE" not in str(exc):
            raise
        time.sleep(0.2)
        return False


@pytest.mark.slow
def test_a_connection_idle_through_a_freeze_asks_the_sentinels_before_writing(tmp_path: Path) -> None:
    """A primary frozen past a failover thaws still calling itself a master, until the sentinels
    demote it. A pooled connection that sat idle through that (its socket still open to the old
    primary) asks the sentinels again before its next command and writes on the new master, where
    the write survives; unchecked, it wrote on the thawed old primary, and the demotion discarded it."""
    from parkway.adapters.redis.connection.sentinel import pool_kwargs

    group = SentinelGroup(tmp_path, replicas=1, sentinels=1)
    group.start()
    try:
        pool = redis.ConnectionPool(**pool_kwargs(parse_sentinel_url(group.url)))
        with redis.Redis(connection_pool=pool) as client:
            client.set("before", 1)  # the pool now holds a connection to the primary
            old, proc = group.primary.port, group.primary.proc
            assert proc is not None
            proc.send_signal(signal.SIGSTOP)
            try:
                new = group.wait_for_switch(old)
            finally:
                proc.send_signal(signal.SIGCONT)
            client.set("after", 1)  # at once: the old primary still says it is a master
            with redis.Redis(port=new) as r:  # (had it gone to the thawed primary, the new master lacks it)
                assert r.get("after") == b"1"
        pool.disconnect()
    finally:
        group.stop()


_replica_proc: list[Any] = []  # the replica the next node freezes (set by the test)
_freeze_s = [0.6]  # for how long
_outside_calls: list[str] = []


def _freeze_replica_for(seconds: float) -> None:
    """SIGSTOP the replica now and SIGCONT it after ``seconds``: the node's next write goes unconfirmed."""
    proc = _replica_proc[0]
    proc.send_signal(signal.SIGSTOP)
    threading.Timer(seconds, proc.send_signal, (signal.SIGCONT,)).start()


def _charge_while_frozen(tag: str) -> dict[str, str]:
    _outside_calls.append(tag)  # the outside effect, done
    _freeze_replica_for(_freeze_s[0])  # ... and its record goes to a primary whose replica does not answer
    return {"charged": tag}


unconfirmed = Workflow("unconfirmed_writes")


@unconfirmed.node(start=True)
def unconfirmed_charge(data: dict[str, Any]) -> dict[str, Any]:
    charged = use_step("charge", _charge_while_frozen, data["tag"])
    _freeze_replica_for(_freeze_s[0])
    emit("progress", {"charged": True})  # an event whose first write landed on the primary alone
    return {"charged": charged}


@pytest.mark.slow
def test_a_step_record_no_replica_confirmed_is_written_again_and_its_effect_runs_once(
    replicated: SentinelGroup,
) -> None:
    """A step's record (or an emit) whose commit no replica acknowledged in time is written again by
    the attempt that holds its result until one does (the outcome was unknown: it may have landed),
    so the outside effect is not done again on replay; a write that had landed adds no second event."""
    settings = Settings(redis_url=replicated.primary.url, secret=SECRET, replica_acks=1, replica_ack_ms=100)
    _replica_proc[:] = [replicated.replicas[0].proc]
    _freeze_s[0] = 0.6
    _outside_calls.clear()
    with Parkway(settings.with_(replica_ack_ms=2000)) as pw:
        run_id = pw.start(unconfirmed, {"tag": "t1"})
    with capture_logs() as logs:
        run_jobs(settings)
    with Parkway(settings.with_(replica_ack_ms=2000)) as pw:
        run = pw.get_run(run_id)
        assert run.status.value == "completed", (run, [e for e in logs if e.get("log_level") != "debug"])
        assert _outside_calls == ["t1"]
        data = [e for e in pw.stream(run_id, timeout=5) if e.type == "data"]
        assert len(data) == 1, data
    assert any(e["event"] == "write_unconfirmed" for e in logs), logs


@pytest.mark.slow
def test_a_write_no_replica_confirms_within_the_bound_ends_the_attempt(
    replicated: SentinelGroup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writing again has a bound (``UNCONFIRMED_WRITE_S``, 15 s: here 1.5 s, the replica frozen for 5):
    past it the write raises StoreUnavailable and the attempt ends committing nothing, as before, the
    run left to its lease."""
    from parkway.runtime import hooks

    monkeypatch.setattr(hooks, "UNCONFIRMED_WRITE_S", 1.5)
    settings = Settings(redis_url=replicated.primary.url, secret=SECRET, replica_acks=1, replica_ack_ms=100)
    replica = replicated.replicas[0].proc
    assert replica is not None
    _replica_proc[:] = [replica]
    _freeze_s[0] = 5.0
    _outside_calls.clear()
    with Parkway(settings.with_(replica_ack_ms=2000)) as pw:
        run_id = pw.start(unconfirmed, {"tag": "t2"})
    began = time.monotonic()
    try:
        with capture_logs() as logs:
            run_jobs(settings)
    finally:
        _freeze_s[0] = 0.6
    took = time.monotonic() - began
    replica.send_signal(signal.SIGCONT)
    with Parkway(settings.with_(replica_ack_ms=2000)) as pw:
        assert pw.get_run(run_id).status.value == "running"  # the attempt ended; its lease will lapse
    assert took < 4, took
    assert _outside_calls == ["t2"]
    tries = [e for e in logs if e["event"] == "write_unconfirmed"]
    assert 1 <= len(tries) <= 4, tries


def _blocked_in(port: int, command: str) -> bool:
    """Whether a client of the server on ``port`` waits in ``command`` (a blocking read)."""
    with redis.Redis(port=port, decode_responses=True) as r:
        return any(c.get("cmd") == command and "b" in c.get("flags", "") for c in r.client_list())


@pytest.mark.slow
def test_an_idle_worker_survives_parkway_failover_and_takes_the_next_job(tmp_path: Path) -> None:
    """A single-process `parkway worker` waiting for jobs (blocked in its dequeue) when `parkway
    failover` demotes its primary, which answers the blocked read ``UNBLOCKED``, keeps running: it
    waits on the new master and takes the next job there (before, it quit with status 1)."""
    import subprocess
    import sys

    group = SentinelGroup(tmp_path, replicas=1, sentinels=1, down_after_ms=PLANNED_DOWN_AFTER_MS)
    group.start()
    worker = None
    try:
        patient = {"PARKWAY_REPLICA_ACK_MS": "2000"}  # acknowledgements as on an idle machine, or a shortfall
        worker = Worker(group.url, SECRET, env=patient)
        old = group.primary.port
        wait_for(lambda: _promotable(group), 15, "the sentinel to find the replica good")
        wait_for(lambda: _blocked_in(old, "blmove") or worker.proc.poll() is not None, 30, "the worker to wait")
        done = subprocess.run([sys.executable, "-m", "parkway.cli", "failover", "--redis-url", group.url],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        new = group.master_port()
        assert new != old
        wait_for(lambda: _blocked_in(new, "blmove") or worker.proc.poll() is not None, 20,
                 "the worker to wait on the new master")
        if worker.proc.poll() is not None:
            said, worker = worker.stop(), None
            raise AssertionError(f"the worker quit:\n{said[-3000:]}")
        with redis.Redis(port=new, decode_responses=True) as master:
            wait_for(lambda: master.info("replication").get("slave0", {}).get("state") == "online", 20,
                     "the old primary to follow the new master")
        with Parkway(Settings(redis_url=group.url, secret=SECRET, replica_ack_ms=2000)) as pw:
            run_id = pw.start(flows.two_questions, {})
            wait_for(lambda: pw.get_run(run_id).status.value == "waiting", 20, "the worker to run the job")
        assert worker.proc.poll() is None, "the worker quit"
    finally:
        if worker is not None:
            worker.stop()
        group.stop()


def _timed_calls(call: Any, times: int, idle_s: float) -> list[float]:
    """How long each of ``times`` calls of ``call`` took (s), each after ``idle_s`` of idleness."""
    took = []
    for _ in range(times):
        time.sleep(idle_s)
        began = time.perf_counter()
        call()
        took.append(time.perf_counter() - began)
    return took


@pytest.mark.slow
def test_a_frozen_sentinel_costs_calls_no_more_than_a_dead_one(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """One of three sentinels frozen (SIGSTOP: the kernel takes its connections, nothing answers) leaves
    get_run as fast as with all three answering (median within 2x, each call after an idle gap that
    makes it ask the sentinels again): after one unanswered question it is passed over while the
    others answer, and probed off the callers' path, so no later call waits for it (before: each
    such call waited out its timeout, about 0.5 s)."""
    import statistics

    from parkway.adapters.redis.connection import sentinel

    monkeypatch.setattr(sentinel, "IDLE_RECHECK_S", 0.2)  # the report's 1 s, shorter: the same path, sooner
    monkeypatch.setattr(sentinel, "SILENT_S", 0.6)  # its silence lapses (and is probed) during the calls
    group = SentinelGroup(tmp_path, sentinels=3, down_after_ms=PLANNED_DOWN_AFTER_MS)  # no failover wanted
    group.start()
    try:
        frozen = group.sentinel_procs[0]
        with Parkway(Settings(redis_url=group.url, secret=SECRET, replica_ack_ms=2000)) as pw:
            run_id = pw.start(flows.two_questions, {})
            normal = _timed_calls(lambda: pw.get_run(run_id), 8, 0.25)
            frozen.send_signal(signal.SIGSTOP)
            try:
                taxed = _timed_calls(lambda: pw.get_run(run_id), 8, 0.25)
            finally:
                frozen.send_signal(signal.SIGCONT)
    finally:
        group.stop()
    said = f"normal {[round(t * 1000, 1) for t in normal]} ms, one frozen {[round(t * 1000, 1) for t in taxed]} ms"
    # (+25 ms: load from other tests can shift one phase's median by that much on a busy machine;
    # the tax was 500 ms on every call)
    assert statistics.median(taxed) <= 2 * statistics.median(normal) + 0.025, said
    assert max(taxed[1:]) < sentinel.SENTINEL_TIMEOUT_S * 0.8, said  # only the first waited for it


@pytest.mark.slow
def test_parkway_failover_waits_for_every_replica_not_the_first_to_catch_up(tmp_path: Path) -> None:
    """With writes paused, `parkway failover` sends SENTINEL FAILOVER only once every online replica
    has the primary's offset (the sentinels may promote any of them): one replica frozen behind (thawed
    after a second) is waited for, though the other caught up at once."""
    from parkway.adapters.redis.connection.switchover import switchover

    group = SentinelGroup(tmp_path, replicas=2, down_after_ms=PLANNED_DOWN_AFTER_MS)
    group.start()
    lagging = group.replicas[1].proc
    assert lagging is not None
    try:
        seen: list[tuple[int, dict[int, int]]] = []  # when the replicas were found caught up: their offsets

        def say(line: str) -> None:
            if "have the primary's offset" in line:
                with redis.Redis(port=group.primary.port, decode_responses=True) as primary:
                    info = primary.info("replication")
                seen.append((int(info["master_repl_offset"]),
                             {int(v["port"]): int(v["offset"]) for k, v in info.items() if k.startswith("slave")}))

        wait_for(lambda: _promotable(group), 15, "the sentinel to find the replicas good")
        with redis.Redis(port=group.primary.port) as primary:
            lagging.send_signal(signal.SIGSTOP)
            thaw = threading.Timer(1.0, lagging.send_signal, (signal.SIGCONT,))
            thaw.start()
            try:
                primary.set("last", 1)
                assert primary.wait(1, 2000) == 1  # acknowledged by the replica that is not frozen
                done = switchover(parse_sentinel_url(group.url), timeout_s=10, say=say)
            finally:
                thaw.join()
        assert len(seen) == 1, done.steps
        offset, replicas = seen[0]
        assert len(replicas) == 2 and all(at >= offset for at in replicas.values()), (offset, replicas)
        assert done.new is not None
        with redis.Redis(port=done.new[1]) as new:
            assert new.get("last") == b"1"
    finally:
        lagging.send_signal(signal.SIGCONT)
        group.stop()


@pytest.mark.slow
def test_blocking_reads_wait_on_across_parkway_failover(tmp_path: Path) -> None:
    """A blocking read waiting on the primary when `parkway failover` demotes it (answered
    ``UNBLOCKED``), as a waiting listing or a stream makes, sync or asyncio (the HTTP server's),
    is sent again to the new master and returns what is written there, instead of raising."""
    import asyncio

    from parkway.adapters.redis.connection.sentinel import async_client, async_sentinels
    from parkway.adapters.redis.connection.switchover import switchover

    group = SentinelGroup(tmp_path, replicas=1, down_after_ms=PLANNED_DOWN_AFTER_MS)
    group.start()
    try:
        got: dict[str, Any] = {}

        def read_sync() -> None:
            client = connect(group.url)
            try:
                deadline = time.monotonic() + 20
                while not got.get("sync") and time.monotonic() < deadline:  # as a stream reads on
                    got["sync"] = client.xread({"feed": "$"}, block=1000)  # within the client's 5 s socket timeout
            except Exception as exc:  # noqa: BLE001 - recorded: the test says what it saw
                got["sync"] = exc
            finally:
                client.close()

        async def read_async() -> None:
            manager = async_sentinels(group.url)
            client = async_client(group.url, manager)
            try:
                deadline = time.monotonic() + 20
                while not got.get("async") and time.monotonic() < deadline:
                    got["async"] = await client.xread({"feed": "$"}, block=1000)
            except Exception as exc:  # noqa: BLE001 - recorded
                got["async"] = exc
            finally:
                await client.aclose()
                await client.connection_pool.disconnect()
                for sentinel in manager.sentinels:
                    await sentinel.aclose()

        readers = [threading.Thread(target=read_sync), threading.Thread(target=lambda: asyncio.run(read_async()))]
        for reader in readers:
            reader.start()
        old = group.primary.port
        wait_for(lambda: _promotable(group), 15, "the sentinel to find the replica good")
        wait_for(lambda: _blocked_count(old, "xread") == 2, 15, "both reads to wait")
        wait_for(lambda: _online_replicas(group) == len(group.replicas), 15, "the primary to see its replica online")
        done = switchover(parse_sentinel_url(group.url), timeout_s=10)
        assert done.new is not None
        new_port = done.new[1]

        def waiting_there() -> bool:
            return _blocked_count(new_port, "xread") == 2 or any(isinstance(g, Exception) for g in got.values())

        wait_for(waiting_there, 15, "both reads to wait on the new master")
        with redis.Redis(port=done.new[1]) as new:
            new.xadd("feed", {"after": "switch"})
        for reader in readers:
            reader.join(15)
        for side in ("sync", "async"):
            assert not isinstance(got[side], Exception), f"{side}: {got[side]!r}"
            assert got[side] and got[side][0][1][0][1] == {b"after": b"switch"}, got
    finally:
        group.stop()


def _blocked_count(port: int, command: str) -> int:
    with redis.Redis(port=port, decode_responses=True) as r:
        return sum(1 for c in r.client_list() if c.get("cmd") == command and "b" in c.get("flags", ""))


def _online_replicas(group: SentinelGroup) -> int:
    """How many replicas the primary reports online (what ``parkway failover`` asks it before pausing writes;
    on a loaded host a replica's link can be resyncing a moment after the sentinel found it good)."""
    with redis.Redis.from_url(group.primary.url) as primary:
        info = primary.info("replication")
    return sum(1 for k, v in info.items()
               if k.startswith("slave") and isinstance(v, dict) and v.get("state") == "online")


def _promotable(group: SentinelGroup) -> bool:
    """Whether the sentinel sees every replica as one it could promote (linked, fresh INFO): just
    started, it answers SENTINEL FAILOVER with NOGOODSLAVE for a moment."""
    with group.sentinel() as s:
        seen = s.execute_command("SENTINEL", "REPLICAS", group.name)
    replicas = [dict(zip(r[::2], r[1::2], strict=True)) if isinstance(r, list) else r for r in seen]
    return len(replicas) == len(group.replicas) and all(
        r.get("flags") == "slave" and r.get("master-link-status") == "ok" and int(r.get("info-refresh", 10**9)) < 2000
        for r in replicas)


@pytest.mark.slow
def test_a_worker_on_a_plain_url_waits_out_its_primary_demoted(replicated: SentinelGroup) -> None:
    """A worker on a plain Redis URL whose server is demoted while it waits for jobs (its dequeue
    answered ``UNBLOCKED``, then ``READONLY``) waits, logging why, and runs the next job once the
    server is a master again, instead of quitting (no follower of the master without Sentinel)."""
    settings = Settings(redis_url=replicated.primary.url, secret=SECRET, replica_acks=0)
    with Parkway(settings) as pw, redis.Redis(port=replicated.primary.port) as primary, \
            redis.Redis(port=replicated.replicas[0].port) as replica, \
            in_process_worker(settings, worker_ttl=16) as worker, capture_logs() as logs:  # dequeues of 1 s
        ended: list[object] = []  # what work() returned, or raised

        def work() -> None:
            try:
                ended.append(worker.work(logging_level="WARNING", with_maintenance=False))
            except Exception as exc:  # noqa: BLE001 - recorded: the test says what it saw
                ended.append(exc)

        loop = threading.Thread(target=work)
        loop.start()
        try:
            wait_for(lambda: _blocked_in(replicated.primary.port, "blmove") or ended, 15, "the worker to wait")
            replica.replicaof("no", "one")
            primary.replicaof("127.0.0.1", replicated.replicas[0].port)  # demoted under the blocked dequeue
            try:
                wait_for(lambda: any(e["event"] == "worker_store_unavailable" for e in logs) or ended, 15,
                         "the worker's dequeue to be refused")
            finally:
                primary.replicaof("no", "one")
            assert not ended, f"the worker quit: {ended[0]!r}"
            assert any("UNBLOCKED" in e.get("error", "") for e in logs), logs
            run_id = pw.start(flows.two_questions, {})
            wait_for(lambda: pw.get_run(run_id).status.value == "waiting", 15, "the worker to run the job")
        finally:
            worker.stop()
            loop.join(15)
