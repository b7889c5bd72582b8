"""Every transition is one FCALL sent by ``run_script`` on a pooled connection (not through
redis-py's per-command layers): a function Redis lacks is loaded again, a connection Redis closed is
replaced, an error reply leaves the connection usable, and the redis-py surface it uses is there."""

from __future__ import annotations

import contextvars
import inspect
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import redis
import redis.exceptions as rex
from redis.retry import Retry

from parkway import Parkway, RunStatus, Settings
from parkway.adapters.redis import keys
from parkway.adapters.redis.connection.connection import (
    function_missing,
    holding,
    load_function,
    packed,
    run_commands,
    run_script,
)
from parkway.adapters.redis.scripts.scripts import Function
from parkway.adapters.redis.store.housekeeping import FUNCTIONS_IDLE_MS
from parkway.adapters.redis.store.store import RedisStore
from parkway.errors import ParkwayError, StaleFence, StoreError
from parkway.runtime.clock import now_ms
from tests import flows
from tests.conftest import SECRET, Closing, Harness
from tests.procs import ROOT, RedisServer


def _harness(server: RedisServer, closing: Closing) -> Harness:
    settings = Settings(redis_url=server.url, secret=SECRET)
    return Harness("redis", closing(Parkway(settings)), settings, closing(redis.Redis.from_url(server.url)))


def _library(name: str, body: str = "return 1") -> Function:
    """A library of one function ``name`` running ``body``."""
    return Function(name, f"#!lua name={name}\nredis.register_function('{name}', function(KEYS, ARGV) {body} end)")


def _libraries(client: redis.Redis) -> set[str]:
    """The names of the function libraries ``client``'s server holds."""
    return {dict(zip(lib[::2], lib[1::2], strict=True))[b"library_name"].decode() for lib in client.function_list()}


def test_a_transition_whose_function_redis_lost_loads_it_again(private_redis: RedisServer, closing: Closing) -> None:
    """FUNCTION FLUSH (as after a Redis restart without its data) between the pause and the answer:
    resume's and the worker's functions are loaded again on their next call, and the run completes
    (the worker's begin is the resume's own when it begins the attempt: stored format 3)."""
    harness = _harness(private_redis, closing)
    run_id = harness.start_and_run(flows.one_choice)
    token = harness.token(run_id)
    assert harness.connection is not None
    assert harness.connection.function_list()  # the scripts are Redis functions, loaded by their first calls
    harness.connection.function_flush()
    assert harness.pw.resume(token, selected="red").accepted
    harness.run_jobs()
    assert harness.pw.get_run(run_id).status is RunStatus.COMPLETED
    names = {name.split("_")[1] for name in _libraries(harness.connection)}
    assert {"resume", "advance"} <= names


def test_a_transition_on_a_connection_redis_closed_goes_out_on_a_new_one(
    private_redis: RedisServer, closing: Closing
) -> None:
    harness = _harness(private_redis, closing)
    first = harness.pw.start(flows.one_choice, {})
    assert harness.connection is not None
    killed = harness.connection.client_kill_filter(_type="normal", skipme=True)
    assert killed >= 1  # the client's pooled connection, idle since the start
    second = harness.pw.start(flows.one_choice, {})
    harness.run_jobs()
    assert [harness.pw.get_run(r).status for r in (first, second)] == [RunStatus.WAITING] * 2


def test_an_error_reply_leaves_the_connection_in_the_pool_and_usable(
    private_redis: RedisServer, closing: Closing
) -> None:
    """A stale fence is Redis's error reply, read whole: the connection goes back to the pool, and the
    next transition on it works."""
    harness = _harness(private_redis, closing)
    run_id = harness.pw.start(flows.one_choice, {})
    store = harness.pw.store
    assert isinstance(store, RedisStore)
    with pytest.raises(StaleFence):
        store.begin(run_id, 0, 7, now_ms(), 60_000)  # the run is at fence 0
    pool = store.client.connection_pool
    assert len(pool._available_connections) == 1 and not pool._in_use_connections  # type: ignore[attr-defined]
    harness.run_jobs()
    assert harness.pw.get_run(run_id).status is RunStatus.WAITING


def test_the_redis_py_surface_run_script_uses_is_there(private_redis: RedisServer, closing: Closing) -> None:
    """What run_script reads of redis-py: the pool's get_connection and release, a connection's
    send_command, read_response, disconnect and retry (whose call_with_retry takes the call and what
    to do after a failed attempt), and Redis's refusal of a function it lacks as a ResponseError
    that ``function_missing`` knows; a function loaded twice (two processes) is no error."""
    client = closing(redis.Redis.from_url(private_redis.url))
    script = _library("pw_test_echo", "return {KEYS[1], ARGV[1]}")
    with pytest.raises(rex.ResponseError) as refused:
        client.fcall(script.name, 1, "k", "v")
    assert function_missing(refused.value) and not function_missing(rex.ResponseError("STALE GONE run is gone"))
    for name in ("send_command", "read_response", "disconnect"):
        assert callable(getattr(redis.Connection, name)), name
    conn = client.connection_pool.get_connection()
    assert isinstance(conn.retry, Retry)
    client.connection_pool.release(conn)
    assert list(inspect.signature(Retry.call_with_retry).parameters)[1:3] == ["do", "fail"]
    assert run_script(client, script, ["k"], [b"v"]) == [b"k", b"v"]  # loaded on first use
    assert run_script(client, script, ["k2"], [3]) == [b"k2", b"3"]
    load_function(client, script)  # already there: left as it is
    assert run_script(client, script, ["k3"], ["w"]) == [b"k3", b"w"]


def test_commands_sent_together_read_as_a_pipeline_would(private_redis: RedisServer, closing: Closing) -> None:
    """run_commands (the worker's take-and-begin round trip) returns each command's reply in order,
    an error reply as its ResponseError in its place, and leaves the connection in the pool, usable;
    a connection Redis closed is replaced, as a pipeline's is."""
    client = closing(redis.Redis.from_url(private_redis.url))
    client.rpush("l", "a", "b")
    replies = run_commands(client, [("LREM", "l", 1, "a"), ("INCR", "l"), ("EXPIRE", "l", 100), ("GET", "none")])
    assert replies[0] == 1 and isinstance(replies[1], rex.ResponseError) and replies[2:] == [1, None]
    pool = client.connection_pool
    assert len(pool._available_connections) == 1 and not pool._in_use_connections  # type: ignore[attr-defined]
    admin = closing(redis.Redis.from_url(private_redis.url))  # (killing its own connection too, the
    admin.client_kill_filter(_type="normal", skipme=True)  # kill's reply could be lost: a race of the test)
    assert run_commands(client, [("LLEN", "l"), ("PING",)]) == [1, b"PONG"]


def test_commands_are_packed_as_redis_py_packs_them(private_redis: RedisServer, closing: Closing) -> None:
    """packed (hiredis's packer) writes what redis-py's would, in one buffer, for every argument type
    the scripts' calls hold; an argument neither packs raises redis-py's DataError, as before."""
    client = closing(redis.Redis.from_url(private_redis.url))
    conn = client.connection_pool.get_connection()
    try:
        commands = [("FCALL", "pw_x_" + "f" * 16, 2, "k1", "k2", b"\x00\xff", 12345678901234, -5, 0, 1.5, "ünï", ""),
                    ("WAIT", 1, 100)]
        assert packed(conn, commands) == [b"".join(conn.pack_commands(commands))]
        with pytest.raises(rex.DataError):
            packed(conn, [("SET", "k", None)])
    finally:
        client.connection_pool.release(conn)


def test_a_held_connection_is_never_shared_with_another_thread(private_redis: RedisServer, closing: Closing) -> None:
    """Inside ``holding`` (a worker's job), calls in its thread go over the one held connection; a thread
    started with a copy of the job's context (as ``asyncio.to_thread`` copies it) takes its own from the
    pool: two threads on one connection would read each other's replies."""
    client = closing(redis.Redis.from_url(private_redis.url))
    ids: dict[str, int] = {}

    def connection_id(name: str) -> None:
        ids[name] = int(run_commands(client, [("CLIENT", "ID")])[0])

    with holding(client):
        connection_id("job")
        connection_id("job again")
        context = contextvars.copy_context()
        thread = threading.Thread(target=context.run, args=(connection_id, "thread"))
        thread.start()
        thread.join()
    assert ids["job"] == ids["job again"]
    assert ids["thread"] != ids["job"]


def test_a_redis_without_functions_is_refused_in_words_that_say_what_it_needs(
    tmp_path: Path, closing: Closing
) -> None:
    """parkway's scripts are Redis functions (Redis 7.0+): a server without FCALL and FUNCTION (renamed
    away here, as on an older Redis; or FUNCTION alone) refuses the first transition with an error
    that names the version needed, not a bare ``unknown command``; no run is half written."""
    for missing in (["FCALL", "FUNCTION"], ["FUNCTION"]):
        renamed = [arg for command in missing for arg in ("--rename-command", command, "")]
        server = RedisServer(tmp_path / "-".join(missing), appendonly=False, extra=renamed)
        server.dir.mkdir()
        server.start()
        try:
            with Parkway(Settings(redis_url=server.url, secret=SECRET)) as pw:  # closed while its server answers
                with pytest.raises(ParkwayError, match=r"Redis 7\.0 or newer"):
                    pw.start(flows.one_choice, {})
                # the key's fingerprint, and the formats the client reads (adapters/redis/formats.py): no run
                assert sorted(closing(redis.Redis.from_url(server.url)).keys("*")) == [b"pw:keyid", b"pw:readers"]
        finally:
            server.stop()


def test_a_full_redis_refuses_an_answer_whole_and_takes_it_once_memory_frees(
    private_redis: RedisServer, closing: Closing
) -> None:
    """At ``maxmemory`` (noeviction), Redis refuses a committing function before it runs: the resume
    raises StoreError saying why, the interrupt is still pending with nothing of the answer written,
    and the same answer is accepted once memory frees; the connection stays usable."""
    harness = _harness(private_redis, closing)
    run_id = harness.start_and_run(flows.one_choice)
    token = harness.token(run_id)
    assert harness.connection is not None
    harness.connection.config_set("maxmemory", 1)
    try:
        with pytest.raises(StoreError, match="maxmemory"):
            harness.pw.resume(token, selected="red")
        assert [i.run_id for i in harness.pw.list_interrupts(run_id=run_id).items] == [run_id]
        assert harness.pw.get_run(run_id).status is RunStatus.WAITING
    finally:
        harness.connection.config_set("maxmemory", 0)
    assert harness.pw.resume(token, selected="red").accepted
    harness.run_jobs()
    assert harness.pw.get_run(run_id).status is RunStatus.COMPLETED




def test_the_reconciler_deletes_other_versions_libraries_none_loaded_for_a_day(
    private_redis: RedisServer, closing: Closing
) -> None:
    """Each deploy of changed scripts loads libraries under new names, and Redis keeps (and persists)
    the old ones: prune_idle deletes those of another version that no process loaded for a day,
    keeps one loaded within the day (a process of that version may still run) and this version's
    however old its load; a process that still calls a deleted one loads it again."""
    harness = _harness(private_redis, closing)
    run_id = harness.start_and_run(flows.one_choice)
    store = harness.pw.store
    assert isinstance(store, RedisStore) and harness.connection is not None
    admin = harness.connection
    old, recent = _library("pw_create_" + "0" * 16), _library("pw_create_" + "1" * 16)
    foreign = _library("another_apps_library")  # named in the hash by another hand: never parkway's to delete
    for library in (old, recent, foreign):
        load_function(admin, library)
    now = now_ms()
    day = FUNCTIONS_IDLE_MS
    current = {name.decode() for name in admin.hkeys(keys.functions())} - {old.name, recent.name, foreign.name}
    assert current and current <= store.function_names()  # what the run loaded was recorded
    admin.hset(keys.functions(), mapping={old.name: now - day - 1, recent.name: now - day + 60_000, foreign.name: 0,
                                          **{name: now - 3 * day for name in current}})
    store.prune_idle(now)

    assert old.name not in _libraries(admin) and current <= _libraries(admin)
    assert recent.name in _libraries(admin) and foreign.name in _libraries(admin)
    assert old.name.encode() not in admin.hkeys(keys.functions())
    assert run_script(admin, old, [], []) == 1  # a process still on that version loads it again
    assert harness.pw.resume(harness.token(run_id), selected="red").accepted


def test_a_worker_on_a_redis_without_functions_refuses_to_start(tmp_path: Path) -> None:
    """``parkway worker`` on a server without FCALL and FUNCTION (before Redis 7.0) exits at once with
    an error that says what it needs, instead of taking jobs it cannot begin and failing each one."""
    renamed = [arg for command in ("FCALL", "FUNCTION") for arg in ("--rename-command", command, "")]
    server = RedisServer(tmp_path, appendonly=False, extra=renamed)
    server.start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PARKWAY_")}
        env.update(PYTHONPATH=str(ROOT), PARKWAY_SECRET=SECRET)
        done = subprocess.run([sys.executable, "-m", "parkway.cli", "worker", "--burst", "--redis-url", server.url],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "parkway: error:" in done.stderr and "Redis 7.0 or newer" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    finally:
        server.stop()


def test_the_reconcilers_prune_loads_its_function_again_when_redis_lost_it(
    private_redis: RedisServer, closing: Closing
) -> None:
    """prune_idle sends one prune per workflow in a pipeline, its function loaded once by this store:
    a Redis that lost it since (FUNCTION FLUSH, a restart without data) answers those calls that no
    such function exists, having run nothing; each is made again, loading it, and the pass completes."""
    harness = _harness(private_redis, closing)
    harness.start_and_run(flows.one_choice)
    store = harness.pw.store
    assert isinstance(store, RedisStore) and harness.connection is not None
    assert store.prune_idle(now_ms()) == []  # loads the prune function (the workflow still has its interrupt)
    harness.connection.function_flush()
    assert store.prune_idle(now_ms()) == []
    assert any(name.startswith("pw_prune_") for name in _libraries(harness.connection))


def test_processes_racing_to_load_a_function_redis_lacks_all_get_their_answer_taken_once(
    private_redis: RedisServer, closing: Closing
) -> None:
    """Eight clients, each on its own connections, answer eight interrupts at once on a Redis that has
    just lost its functions: each finds resume's function missing, several load it at the same moment
    (all but the first find it there already, which is no error), and every answer is accepted once;
    the same answers sent again read accepted without a second commit."""
    harness = _harness(private_redis, closing)
    runs = [harness.start_and_run(flows.one_choice) for _ in range(8)]
    tokens = [harness.token(r) for r in runs]
    settings = Settings(redis_url=private_redis.url, secret=SECRET)
    clients = [closing(Parkway(settings)) for _ in runs]
    assert harness.connection is not None
    harness.connection.function_flush()
    barrier = threading.Barrier(len(runs))
    outcomes: list[str] = [""] * len(runs)

    def answer(i: int) -> None:
        barrier.wait()
        outcomes[i] = clients[i].resume(tokens[i], selected="red").outcome.value

    threads = [threading.Thread(target=answer, args=(i,)) for i in range(len(runs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert outcomes == ["accepted"] * len(runs)
    assert [c.resume(t, selected="red").outcome.value for c, t in zip(clients, tokens, strict=True)] == ["accepted"] * 8
    harness.run_jobs()
    assert [harness.pw.get_run(r).status for r in runs] == [RunStatus.COMPLETED] * len(runs)
    resumed = [[e.type for e in harness.pw.stream(r, timeout=5)].count("interrupt.resumed") for r in runs]
    assert resumed == [1] * len(runs)
