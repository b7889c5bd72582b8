"""Rolling upgrades (invariant 15): every run hash says its stored format; writers write the newest format
every live process reads, and switch only when all read it; a record of a newer format is refused as it is."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from parkway import Parkway, Settings
from parkway.adapters.redis import formats, keys, layout
from parkway.adapters.redis.store.store import RedisStore
from parkway.runtime.clock import now_ms
from parkway.runtime.errors import FormatTooNew
from tests import flows
from tests import session_flows as sf
from tests.conftest import SECRET, Closing
from tests.procs import RedisServer, Worker, wait_for


@pytest.fixture
def client(redis_url: str, redis_client: redis.Redis, closing: Closing) -> Iterator[Parkway]:
    """A client on the emptied test database."""
    yield closing(Parkway(Settings(redis_url=redis_url, secret=SECRET)))


def _old_reader(r: redis.Redis, process: str = "old-worker", lapse_ms: int = 60_000) -> None:
    """A process that reads format 1 only announces itself (as this code's predecessor with formats would)."""
    r.hset(keys.readers(), process, formats.announcement((1,), "worker", now_ms() + lapse_ms))


def _store(pw: Parkway) -> RedisStore:
    store = pw.store
    assert isinstance(store, RedisStore)
    return store


def test_a_run_is_created_in_the_newest_format_every_live_process_reads(
    client: Parkway, redis_client: redis.Redis
) -> None:
    """With only format-4 readers, a run hash says fmt 4 and keeps its creation as `cr`; with a live
    format-1-only reader, a run is written in format 1 (no fmt, `created`); both read back alike."""
    new = client.start(flows.one_choice, {})
    assert redis_client.hget(keys.run(new), "fmt") == b"4"
    assert redis_client.hexists(keys.run(new), "cr") and not redis_client.hexists(keys.run(new), "created")
    _old_reader(redis_client)
    assert _store(client).formats.refresh().writes == 1
    old = client.start(flows.one_choice, {})
    assert not redis_client.hexists(keys.run(old), "fmt") and redis_client.hexists(keys.run(old), "created")
    for run_id in (new, old):
        run = client.get_run(run_id)
        assert run.created_at > 0 and run.created_at <= now_ms()
    assert {r.run_id for r in client.list_runs().items} >= {new, old}


def test_a_record_of_a_newer_format_is_refused_by_the_reader_and_left_as_it_is(
    client: Parkway, redis_client: redis.Redis
) -> None:
    """A run hash of format 5 (a later version's) is refused by get_run with FormatTooNew naming the run and
    both formats, and its hash is unchanged."""
    run_id = client.start(flows.one_choice, {})
    redis_client.hset(keys.run(run_id), "fmt", 5)
    before = redis_client.hgetall(keys.run(run_id))
    with pytest.raises(FormatTooNew) as refused:
        client.get_run(run_id)
    assert (refused.value.found, refused.value.reads, refused.value.record) == (5, 4, f"run {run_id}")
    said = str(refused.value)
    assert f"run {run_id}" in said and "format 5" in said and "up to 4" in said
    assert redis_client.hgetall(keys.run(run_id)) == before



def test_a_run_listing_that_meets_a_newer_run_refuses_it_not_misreads_it(
    client: Parkway, redis_client: redis.Redis
) -> None:
    """The run listing reads each run's hash apart from get_run: one of format 5 there is refused with
    FormatTooNew naming it (not listed with fields read by a guess), and its hash is unchanged."""
    run_id = client.start(flows.one_choice, {})
    redis_client.hset(keys.run(run_id), "fmt", 5)
    before = redis_client.hgetall(keys.run(run_id))
    with pytest.raises(FormatTooNew) as refused:
        client.list_runs()
    assert (refused.value.found, refused.value.record) == (5, f"run {run_id}")
    assert redis_client.hgetall(keys.run(run_id)) == before


def test_a_transition_over_a_record_of_a_newer_format_refuses_and_changes_nothing(
    client: Parkway, redis_client: redis.Redis
) -> None:
    """begin.lua (a worker's first step on a job) over a format-5 run replies FormatTooNew and writes
    nothing: not the run hash, its stream, the leases or the outbox."""
    run_id = client.start(flows.one_choice, {})
    redis_client.hset(keys.run(run_id), "fmt", 5)
    watched = [keys.run(run_id), keys.leases(), keys.outbox(), keys.events(run_id)]
    before = [redis_client.dump(k) for k in watched]
    with pytest.raises(FormatTooNew) as refused:
        _store(client).begin(run_id, 0, 0, now_ms(), now_ms() + 30_000)
    assert (refused.value.found, refused.value.reads) == (5, 4) and refused.value.run_id == run_id
    assert [redis_client.dump(k) for k in watched] == before


def test_the_switch_waits_for_every_live_reader_and_happens_when_the_last_lapses(
    client: Parkway, redis_client: redis.Redis
) -> None:
    """While a format-1-only process's announcement stands the writers keep format 1; once it lapses (its
    TTL passes with no refresh) they switch to format 4; a worker RQ registered that never announced counts
    as format 1 only."""
    gate = _store(client).formats
    _old_reader(redis_client, lapse_ms=2_000)
    now = now_ms()
    held = gate.refresh(now)
    assert held.writes == 1 and [r.process for r in held.waiting_on] == ["old-worker"] and held.mixed
    assert gate.refresh(now + 2_001).writes == 4
    gate.seen = lambda: ["rq-only-worker"]
    unseen = gate.refresh(now + 2_001)
    assert unseen.writes == 1 and [r.process for r in unseen.waiting_on] == ["rq-only-worker"]
    gate.seen = lambda: [gate.process]  # an RQ worker that did announce counts by its announcement
    assert gate.refresh(now + 2_001).writes == 4


def test_upgrade_check_says_what_the_switch_waits_on_and_exits_3_until_ready(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """`parkway upgrade --check` names the format-1-only process, says mixed and exits 3; once it is gone,
    it says every live process reads format 4 and exits 0."""
    from tests.test_cli import in_process  # the command's main in this process, its logging put back after

    _old_reader(redis_client)
    shown = in_process("upgrade", "--check", "--redis-url", redis_url)
    assert shown.returncode == 3, shown.stderr
    assert "writes stored format 1 (newest 4)" in shown.stdout and "old-worker" in shown.stdout
    assert "mixed" in shown.stdout
    as_json = in_process("upgrade", "--check", "--json", "--redis-url", redis_url)
    assert as_json.returncode == 3, as_json.stderr
    shown_json = json.loads(as_json.stdout)
    assert (shown_json["writes"], shown_json["ready"], shown_json["mixed"], shown_json["waitingOn"]) == (
        1, False, True, ["old-worker"])
    status = in_process("status", "--redis-url", redis_url)
    assert status.returncode == 0, status.stderr
    assert "writes stored format 1 (newest 4)" in status.stdout.splitlines()[-1]
    redis_client.hdel(keys.readers(), "old-worker")
    ready = in_process("upgrade", "--check", "--redis-url", redis_url)
    assert ready.returncode == 0, ready.stderr
    assert "writes stored format 4 (newest 4): every live process" in ready.stdout


def test_a_writer_deciding_while_an_old_process_announces_never_writes_a_newer_format_after_the_announce(
    redis_url: str, redis_client: redis.Redis, closing: Closing
) -> None:
    """Writer threads decide and create runs in a loop while another thread announces a format-1-only
    process: every run whose decision began after the announcement completed is in format 1."""
    writers = [closing(Parkway(Settings(redis_url=redis_url, secret=SECRET))) for _ in range(4)]
    announced = threading.Event()
    late: list[tuple[str, int]] = []
    errors: list[BaseException] = []

    early: list[int] = []

    def write(pw: Parkway) -> None:
        try:
            after_count = 0
            while after_count < 5:  # until this writer has decided 5 times after the announcement
                after = announced.is_set()
                decided = _store(pw).formats.refresh().writes
                run_id = pw.start(flows.one_choice, {})
                if after:
                    late.append((run_id, decided))
                    after_count += 1
                else:
                    early.append(decided)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(pw,)) for pw in writers]
    for t in threads:
        t.start()
    wait_for(lambda: len(early) >= 4 or errors, 30, "the writers deciding")
    _old_reader(redis_client)
    announced.set()
    for t in threads:
        t.join(30)
    assert not errors and len(late) == 20 and 4 in early  # they wrote format 4 before the announcement
    assert all(decided == 1 for _, decided in late)
    assert all(not redis_client.hexists(keys.run(run_id), "fmt") for run_id, _ in late)


def test_a_process_that_stops_takes_its_announcement_away(redis_url: str, redis_client: redis.Redis) -> None:
    """A client that wrote announced itself (its formats, refreshed); closing it removes the announcement."""
    with Parkway(Settings(redis_url=redis_url, secret=SECRET)) as pw:
        pw.start(flows.one_choice, {})
        process = _store(pw).formats.process
        value = redis_client.hget(keys.readers(), process)
        assert value is not None and formats.parse(process, value.decode()).reads == layout.READS_FORMATS
    assert not redis_client.hexists(keys.readers(), process)


def test_a_resume_over_a_run_of_a_newer_format_refuses_and_changes_nothing(
    client: Parkway, redis_client: redis.Redis, redis_url: str
) -> None:
    """resume.lua over a parked run whose hash says format 5 raises FormatTooNew; the run hash, the
    pending interrupt's index and the outbox are as they were, and the token still answers once the
    run reads as a format this code knows."""
    from tests.conftest import Harness

    harness = Harness("redis", client, client.settings, redis_client)
    run_id = harness.start_and_run(flows.one_choice)
    token = harness.token(run_id)
    redis_client.hset(keys.run(run_id), "fmt", 5)
    watched = [keys.run(run_id), keys.outbox(), keys.events(run_id)]
    before = [redis_client.dump(k) for k in watched]
    with pytest.raises(FormatTooNew):
        client.resume(token, selected="red")
    assert [redis_client.dump(k) for k in watched] == before
    redis_client.hset(keys.run(run_id), "fmt", 4)
    assert client.resume(token, selected="red").accepted


def test_a_summary_and_a_session_of_a_newer_format_are_refused(
    client: Parkway, redis_client: redis.Redis
) -> None:
    """A run read from its summary alone (its records gone) and a session, each saying format 5, are
    refused with FormatTooNew naming the record; neither is changed."""
    run_id = client.start(flows.one_choice, {})
    redis_client.delete(keys.run(run_id))
    redis_client.hset(keys.summary(run_id), "fmt", 5)
    before = redis_client.hgetall(keys.summary(run_id))
    with pytest.raises(FormatTooNew, match=f"summary of run {run_id} is in stored format 5"):
        client.get_run(run_id)
    assert redis_client.hgetall(keys.summary(run_id)) == before
    session_id = client.sessions.open(sf.echo, owner="ada", tenant="acme")
    session_key = keys.session(session_id)
    redis_client.hset(session_key, "fmt", 5)
    kept = redis_client.hgetall(session_key)
    with pytest.raises(FormatTooNew, match=f"session {session_id} is in stored format 5"):
        client.sessions.get(session_id)
    assert redis_client.hgetall(session_key) == kept


def test_a_worker_announces_under_its_rq_name_and_takes_its_announcement_away_when_it_stops(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """A `parkway worker` process announces the formats it reads under the name RQ registered it by (so it is
    not also counted as an unannounced RQ worker), and a warm stop removes the announcement."""
    worker = Worker(redis_url, SECRET)
    try:
        def registered_and_announced() -> bool:  # (another client of this test process may announce too)
            names = [k.decode().removeprefix("rq:worker:") for k in redis_client.smembers("rq:workers")]
            return len(names) == 1 and redis_client.hexists(keys.readers(), names[0])

        wait_for(registered_and_announced, 30, "the worker registered and announced")
        (name,) = [k.decode().removeprefix("rq:worker:") for k in redis_client.smembers("rq:workers")]
        announced = redis_client.hget(keys.readers(), name)
        assert announced is not None
        assert formats.parse(name, announced.decode()).reads == layout.READS_FORMATS
        assert formats.parse(name, announced.decode()).role == "worker"
    finally:
        worker.stop()
    assert not redis_client.hexists(keys.readers(), name)


def test_a_client_closing_on_a_redis_gone_leaves_its_announcement_to_lapse_at_once(tmp_path: Path) -> None:
    """Its Redis stopped, ``Parkway.close()`` tries twice at most to take its announcement away and returns (the
    announcement lapses by itself), instead of retrying for the bound of a call (about 10 s)."""
    server = RedisServer(tmp_path, appendonly=False)
    server.start()
    pw = Parkway(Settings(redis_url=server.url, secret=SECRET))
    try:
        pw.start(flows.one_choice, {})  # a write: the client has announced what it reads
        with redis.Redis.from_url(server.url) as r:
            assert r.hlen(keys.readers()) == 1
    finally:
        server.stop()
    started = time.monotonic()
    pw.close()
    assert time.monotonic() - started < 2.0


def test_a_gate_stopped_while_another_thread_refreshes_it_leaves_no_announcement(redis_url: str,
                                                                                   redis_client: redis.Redis) -> None:
    """``stop`` takes the announcement away after any refresh under way, and a refresh after it decides
    without announcing again: a worker's warm stop leaves no announcement behind its refreshing thread
    (seen once in a suite run: the worker's announcement back after its stop)."""
    client = redis.Redis.from_url(redis_url)
    try:
        for _ in range(10):
            gate = formats.FormatGate(client, role="worker")
            gate.refresh()
            done = threading.Event()

            def spin(gate: formats.FormatGate = gate, done: threading.Event = done) -> None:
                while not done.is_set():
                    gate.refresh()

            thread = threading.Thread(target=spin)
            thread.start()
            time.sleep(0.01)
            gate.stop()
            time.sleep(0.01)
            done.set()
            thread.join()
            assert not redis_client.hexists(keys.readers(), gate.process)
    finally:
        client.close()
