"""How a parked run is laid out in Redis (issue 9): its interrupt in its run's hash (no key of its
own), that hash in Redis's compact encoding, one pair of index members per pause in its workflow's
indexes, and listings across workflows merged from theirs, in order, with cursors."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from parkway import Parkway, ResumeOutcome, RunStatus, Settings
from parkway.adapters import codec
from parkway.adapters.redis import keys, layout
from parkway.adapters.redis.store import housekeeping
from parkway.runtime import executor, tokens
from parkway.runtime.clock import now_ms
from parkway.runtime.errors import InvalidAnswer
from parkway.workers import jobs
from parkway.workers.reconciler import reconcile_once
from tests import flows, indexes
from tests.conftest import SECRET, Closing, Harness
from tests.procs import RedisServer


def _client(harness: Harness) -> Any:
    return harness.pw.store.client  # type: ignore[attr-defined]  # the real Redis or the in-process one


def _raw_events(client: Any, run_id: str) -> list[tuple[bytes, bytes]]:
    """A run's events as stored, (type, data): folded into its hash (``~<i>``), else in its stream."""
    out = []
    run = client.hgetall(keys.run(run_id))
    for value in [run.get(f) for f in layout.FOLDED_FIELDS]:
        if value is None:
            break
        kind, data = layout.folded_type(value.split(b" ", 1)[1], run)
        out.append((kind.encode(), data))
    return out + [(f[b"t"], f[b"d"]) for _id, f in client.xrange(keys.events(run_id))]


def test_a_parked_run_keeps_its_interrupt_in_its_run_hash_and_two_index_members(harness: Harness) -> None:
    """While it waits, a run has its hash and its summary, no key for its interrupt and none for its
    few events (its hash keeps them: their stream goes within a second); its workflow's two indexes
    hold one member each for it, and no index spans workflows."""
    client = _client(harness)
    run_id = harness.start_and_run(flows.one_choice)
    tag = keys.run(run_id).removesuffix(":run")
    left = client.pttl(keys.events(run_id))
    assert left == -2 or 0 < left <= layout.FOLD_WAKE_MS  # gone already on a loaded machine, never kept longer
    client.delete(keys.events(run_id))  # what its TTL does
    assert sorted(k.decode() for k in client.keys(tag + "*")) == sorted([keys.run(run_id), keys.summary(run_id)])
    fields = client.hgetall(keys.run(run_id))
    request_id = harness.pw.list_interrupts(run_id=run_id).items[0].request_id
    assert fields[layout.status_field(request_id, run_id).encode()] == b"pending"
    assert fields[layout.RECORD_LATEST.encode()] == layout.short_id(request_id, run_id).encode()
    # the hash names the request id without its run id (its key has it), waiting too
    assert [f for f, v in fields.items() if request_id.encode() in f + v] == []
    assert fields[b"waiting"] == layout.short_id(request_id, run_id).encode() != request_id.encode()
    assert b"data" not in fields  # no copy of the input before a node completes
    assert all(len(f) <= layout.PART_BYTES and len(v) <= layout.PART_BYTES for f, v in fields.items())
    assert sorted(indexes.indexes(client)) == [
        keys.index("expiring", "one_choice"),
        keys.index("newest", "one_choice"),
    ]
    assert [indexes.count(client, keys.index(o, "one_choice")) for o in ("newest", "expiring")] == [1, 1]


def test_a_parked_runs_own_stream_keeps_its_interrupt_event_short_and_reads_it_whole(harness: Harness) -> None:
    """A run's own stream keeps park's interrupt event short (its run hash has the record); read back,
    it is the event its ancestors' streams keep whole, while it waits and after its answer."""
    client = _client(harness)
    root = harness.start_and_run(flows.tree, {})
    item = harness.pw.list_interrupts().items[0]
    leaf = item.run_id

    def interrupts(run_id: str) -> list[dict[str, Any]]:
        return [e.data for e in harness.pw.store.read_events(run_id, "0", None, 100) if e.type == "interrupt"]

    stored = [codec.decode(d) for t, d in _raw_events(client, leaf) if t == b"interrupt"][:1]
    assert stored == [{"h": layout.short_id(item.request_id, leaf), "x": item.expires_at}]
    whole = interrupts(root)
    assert interrupts(leaf) == whole and whole[0]["requestId"] == item.request_id and whole[0]["input"]["question"]
    assert harness.pw.resume(item.resume_token or harness.token(leaf), selected="blue").accepted
    harness.run_jobs()
    assert interrupts(leaf) == whole == interrupts(root)


def test_a_parked_runs_events_move_into_its_hash_and_back_with_their_ids(harness: Harness) -> None:
    """A parked run's few events move into its hash (its stream key goes); stream() reads them the
    same from there, and an answer puts them back in the stream with their ids before its own, so a
    reader that had read them all gets only what is new."""
    client = _client(harness)
    run_id = harness.start_and_run(flows.one_choice)
    before = harness.pw.store.read_events(run_id, "0", None, 100)
    assert [e.type for e in before] == ["run.started", "node.started", "interrupt"]  # each once
    client.delete(keys.events(run_id))  # gone within layout.FOLD_WAKE_MS
    assert harness.pw.store.read_events(run_id, "0", None, 100) == before
    assert harness.pw.store.read_events(run_id, before[0].id, None, 100) == before[1:]
    assert harness.pw.store.read_events(run_id, before[-1].id, None, 100) == []
    assert harness.pw.resume(harness.token(run_id), selected="red").accepted
    assert not any(f.startswith(b"~") for f in client.hkeys(keys.run(run_id)))
    # embedded, the worker thread may already have begun the node again (node.started) and more
    new = harness.pw.store.read_events(run_id, before[-1].id, None, 100)
    assert [e.type for e in new][:1] == ["interrupt.resumed"]
    assert harness.pw.store.read_events(run_id, "0", None, 100)[: len(before) + len(new)] == [*before, *new]
    harness.run_jobs()
    assert [e.type for e in harness.pw.stream(run_id, timeout=5)][-1] == "done"


def test_a_parked_run_hash_keeps_the_compact_encoding_on_redis(harness: Harness) -> None:
    """On Redis, the run hash of a parked run with a 200-byte request stays a listpack (one value
    over 64 bytes would make it a hash table several times its size)."""
    if harness.kind != "redis":
        pytest.skip("fakeredis does not model Redis's encodings")
    run_id = harness.start_and_run(flows.one_choice)
    assert _client(harness).object("encoding", keys.run(run_id)) == b"listpack"


def test_a_parked_run_with_an_event_over_64_bytes_keeps_its_stream_and_its_compact_hash(harness: Harness) -> None:
    """Park folds a run's events into its hash only if each fits in 64 bytes: a tenant of 24
    characters makes run.started longer (format 4 keeps the first event's id in a few bytes), so the
    events stay in the stream and the hash stays a listpack; stream() reads them the same. The stream
    kept is rebuilt at its real size (Redis 7 allocates a new stream's first node at 4 KiB however few
    entries it holds). An input of ~50 bytes (a listpack value itself) does not: the usual run.started
    is folded without its data, which the hash's input and workflow make again."""
    if harness.kind != "redis":
        pytest.skip("fakeredis does not model Redis's encodings")
    client = _client(harness)
    folded = harness.start_and_run(flows.one_choice, {"note": "x" * 40})
    assert len(client.hget(keys.run(folded), "input")) <= layout.PART_BYTES
    client.delete(keys.events(folded))  # gone within layout.FOLD_WAKE_MS
    started = harness.pw.store.read_events(folded, "0", None, 100)[0]
    assert started.type == "run.started" and started.data == {"workflow": "one_choice", "input": {"note": "x" * 40}}
    run_id = harness.start_and_run(flows.one_choice, {"note": "x"}, tenant="acme" * 6)
    assert not client.hexists(keys.run(run_id), layout.folded_event_field(0))
    assert client.xlen(keys.events(run_id)) == 3 and client.pttl(keys.events(run_id)) > layout.FOLD_WAKE_MS
    assert client.object("encoding", keys.run(run_id)) == b"listpack"
    assert client.memory_usage(keys.events(run_id), samples=0) < 2048
    events = harness.pw.store.read_events(run_id, "0", None, 100)
    assert [e.type for e in events] == ["run.started", "node.started", "interrupt"]


def test_a_second_pause_moves_the_first_record_aside_and_both_still_read(harness: Harness) -> None:
    """A second pause of the run takes the short part names (r0, r1, ...; none left over from the
    first); the first record moves under names of its own and still reads by request id; the first
    token reads already_resolved, the second resumes."""
    client = _client(harness)
    run_id = harness.start_and_run(flows.two_questions)
    first = harness.token(run_id)
    first_id = harness.pw.list_interrupts(run_id=run_id).items[0].request_id
    assert harness.pw.resume(first, selected="red").accepted
    harness.run_jobs()
    second = harness.token(run_id)
    held = harness.pw.list_interrupts(run_id=run_id).items[0]
    fields = client.hgetall(keys.run(run_id))
    parts = int(fields[b"rn"])
    assert fields[layout.RECORD_LATEST.encode()] == layout.short_id(held.request_id, run_id).encode()
    assert not [f for f in fields if f.startswith(b"r") and f[1:].isdigit() and int(f[1:]) >= parts]
    earlier = harness.pw.store.get_interrupt(run_id, first_id)
    assert earlier is not None and earlier.request_id == first_id
    assert earlier.request is not None and earlier.request.question
    assert harness.pw.resume(first, value="another").outcome is ResumeOutcome.ALREADY_RESOLVED
    assert harness.pw.lookup(second).request_id == held.request_id  # type: ignore[union-attr]


def test_a_listing_of_every_workflow_merges_theirs_in_order_with_cursors(harness: Harness) -> None:
    """Pauses of three workflows, listed without a filter two at a time in both orders: each once,
    in order, across the workflows' indexes; a workflow first seen after a listing is in the next."""
    made = [harness.start_and_run(wf) for wf in (flows.one_choice, flows.two_questions, flows.kinds) * 3]
    for order in ("newest", "expiring"):
        seen, times, cursor = [], [], None
        while True:
            page = harness.pw.list_interrupts(order=order, limit=2, cursor=cursor)
            seen += [i.run_id for i in page.items]
            times += [i.created_at if order == "newest" else i.expires_at for i in page.items]
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert sorted(seen) == sorted(made)
        assert times == sorted(times, reverse=order == "newest")
    late = harness.start_and_run(flows.denial)
    assert late in [i.run_id for i in harness.pw.list_interrupts(limit=100).items]


def test_the_reconciler_has_redis_drop_the_streams_parks_left_to_expire(tmp_path: Path) -> None:
    """A park that folds a run's events into its hash leaves its stream FOLD_WAKE_MS for blocked
    readers; Redis drops an expired key only when it is read or its sampler reaches it (which, in a
    large keyspace, takes minutes). The reconciler reads each parked run's stream once its time is
    up, from the pause feed, so Redis frees it then; the events still read the same from the hash.
    Redis's own sampler is switched off here, so only those reads can free the streams."""
    server = RedisServer(tmp_path, appendonly=False, extra=("--enable-debug-command", "local"))
    server.start()
    try:
        client = redis.Redis.from_url(server.url)
        client.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
        settings = Settings(redis_url=server.url, secret=SECRET)
        rt = jobs.install(settings)
        with Parkway(settings) as pw:
            runs = [pw.start(flows.one_choice, {}) for _ in range(5)]
            for run_id in runs:
                executor.execute(rt.store, rt.options, run_id, 0, 0)
            events = [rt.store.read_events(r, "0", None, 100) for r in runs]
            assert all([e.type for e in got] == ["run.started", "node.started", "interrupt"] for got in events)
            assert all(client.hexists(keys.run(r), "~0") for r in runs)
            time.sleep(layout.FOLD_WAKE_MS / 1000 + 0.1)
            before = client.dbsize()  # counts the expired streams: nothing has read them
            early = reconcile_once(rt.store, rt.dispatcher, now=now_ms())  # within the margin: untouched
            assert not early and client.dbsize() == before
            reconcile_once(rt.store, rt.dispatcher, now=now_ms() + housekeeping.RECLAIM_MARGIN_MS)
            assert client.exists(keys.reclaimed())  # the pass's cursor: one key more, five streams less
            assert before + 1 - client.dbsize() == len(runs)
            assert rt.store.reclaim_folded(now_ms() + housekeeping.RECLAIM_MARGIN_MS, 100) == 0  # each park once
            assert [rt.store.read_events(r, "0", None, 100) for r in runs] == events
            assert all(pw.get_run(r).status is RunStatus.WAITING for r in runs)
    finally:
        server.stop()


def test_the_reconcilers_stream_pass_reads_only_run_ids_from_the_pause_feed(private_redis: RedisServer) -> None:
    """The pause feed is a Redis stream anyone with access can append to: an entry whose run id is
    not a run id (no match of the id pattern) makes no key; the pass moves past it all the same."""
    client = redis.Redis.from_url(private_redis.url)
    try:
        settings = Settings(redis_url=private_redis.url, secret=SECRET)
        rt = jobs.install(settings)
        client.xadd(keys.pauses(), {"w": "w", "r": "run_" + "a" * 32})
        client.xadd(keys.pauses(), {"w": "w", "r": "x}:evil {y"})
        last = client.xadd(keys.pauses(), {"w": "w", "r": ""})
        client.config_resetstat()
        assert rt.store.reclaim_folded(now_ms() + 60_000, 100) == 3
        stats = client.info("commandstats")
        assert stats["cmdstat_exists"]["calls"] == 1  # the one run id's stream, nothing for the others
        assert client.get(keys.reclaimed()) == last
    finally:
        client.close()


def test_events_put_back_after_the_parked_stream_is_gone_live_as_long_as_the_run(harness: Harness) -> None:
    """A parked run whose stream Redis has dropped (FOLD_WAKE_MS after the park) expires: the expiry
    puts its folded events back in a new stream and appends its own. That stream is under the run's
    remaining life (expire.lua renews nothing itself), not a key without a TTL, and reads whole."""
    client = _client(harness)
    run_id = harness.start_and_run(flows.one_choice, {}, ttl_ms=1000)  # the pause takes the run's TTL
    assert client.hexists(keys.run(run_id), layout.folded_event_field(0))
    time.sleep(layout.FOLD_WAKE_MS / 1000 + 0.2)
    if client.exists(keys.events(run_id)):  # embedded, the worker's own sweep may have expired the run first
        assert harness.kind == "embedded" and harness.pw.get_run(run_id).status is RunStatus.EXPIRED
    else:  # gone with its wake copy
        reconcile_once(harness.pw.store, harness.pw.backend.dispatcher)
    assert harness.pw.get_run(run_id).status is RunStatus.EXPIRED
    stream, run = client.pttl(keys.events(run_id)), client.pttl(keys.run(run_id))
    assert 0 < stream <= run + 50, (stream, run)  # read one after the other: a few ms apart
    types = [e.type for e in harness.pw.store.read_events(run_id, "0", None, 100)]
    assert types == ["run.started", "node.started", "interrupt", "interrupt.expired", "done"]


def test_a_run_whose_stream_was_lost_gets_one_back_under_its_ttl_when_a_node_begins(
    redis_url: str, redis_client: redis.Redis, closing: Closing
) -> None:
    """Begin appends node.started to a stream that may no longer exist (dropped by hand, or by Redis
    under memory pressure): the stream it makes lives as long as the run's records, never without a
    TTL, even if the attempt then dies before any other transition renews it. (On Redis: no worker
    runs the queued job before the test begins it by hand.)"""
    harness = Harness("redis", closing(Parkway(Settings(redis_url=redis_url, secret=SECRET))), Settings(), redis_client)
    client = redis_client
    run_id = harness.pw.start(flows.one_choice, {})
    client.delete(keys.events(run_id))
    now = now_ms()
    harness.pw.store.begin(run_id, 0, 0, now, now + 60_000)  # and the attempt dies here
    stream, run = client.pttl(keys.events(run_id)), client.pttl(keys.run(run_id))
    assert 0 < stream <= run + 50, (stream, run)  # read one after the other: a few ms apart


@pytest.mark.parametrize("extra", ["eight more events", "one not parkway's"])
def test_park_folds_only_a_few_events_of_parkways_own_shape(harness: Harness, extra: str) -> None:
    """Park moves a run's events into its hash only when there are at most FOLD_MAX of them, each
    parkway's own (type and data): more, or one appended by something else, and the stream stays
    whole, as written, and reads the same."""
    if harness.kind == "embedded":
        pytest.skip("the embedded worker parks the run before the test can append to its stream")
    client = _client(harness)
    run_id = harness.pw.start(flows.one_choice, {})
    stream = keys.events(run_id)
    if extra == "eight more events":
        for _ in range(layout.FOLD_MAX):
            client.xadd(stream, {"t": "note", "d": codec.encode({}, what="event")})
    else:
        client.xadd(stream, {"someone": "else"})
    harness.run_jobs()
    assert harness.pw.get_run(run_id).status is RunStatus.WAITING
    assert not client.hexists(keys.run(run_id), layout.folded_event_field(0))
    expected = 3 + (layout.FOLD_MAX if extra == "eight more events" else 1)
    assert client.xlen(stream) == expected and client.pttl(stream) > layout.FOLD_WAKE_MS


def test_a_parked_run_hash_holds_no_zero_crash_count_and_its_later_events_ids_relative(harness: Harness) -> None:
    """A parked run's hash carries no crash count of 0 (none reads 0), keeps its folded events' ids
    after the first relative to it (a few bytes instead of ~15 each) and their usual types as one
    byte (the hash stays in a smaller allocation); read back, the events have their ids and types."""
    client = _client(harness)
    run_id = harness.start_and_run(flows.one_choice)
    before = harness.pw.store.read_events(run_id, "0", None, 100)
    fields = client.hgetall(keys.run(run_id))
    assert b"crashes" not in fields
    stored = [fields[f].split(b" ", 1)[0].decode() for f in layout.FOLDED_FIELDS if f in fields]
    first_ms, cr = int(before[0].id.split("-")[0]), int(fields[b"cr"])
    # format 4: the first id in ms after the run's creation (whole when Redis's clock was behind the caller's)
    assert len(stored) == 3 and stored[0] in (before[0].id, str(first_ms - cr))
    assert stored[1:] == [layout.relative_id(e.id, before[0].id) for e in before[1:]]
    assert all(len(s) < 8 for s in stored[1:])
    named = [fields[f].split(b" ", 1)[1] for f in layout.FOLDED_FIELDS if f in fields]
    assert named[0] == b"\0\0"  # the usual run.started: its data is made from the hash's wf and input
    # format 4: node.started and the interrupt event keep only what the hash cannot make again (index + 128)
    assert [n[:2] for n in named[1:]] == [bytes([0, layout.FOLDED_TYPES.index(e.type) + 129]) for e in before[1:]]
    assert before[0].type == "run.started" and before[0].data == {"workflow": "one_choice", "input": {}}
    client.delete(keys.events(run_id))  # gone within layout.FOLD_WAKE_MS
    assert harness.pw.store.read_events(run_id, "0", None, 100) == before
    assert harness.pw.resume(harness.token(run_id), selected="red").accepted
    assert [e.id for e in harness.pw.store.read_events(run_id, "0", None, 100)][:3] == [e.id for e in before]


def test_a_run_parked_when_token_fields_were_hex_still_resumes_by_its_token(harness: Harness) -> None:
    """A token field keeps 128 bits of the token's hash as base64url (22 characters); a run parked
    before, whose field has them as 32 hex digits, is still found by its token: looked up, refused
    and answered."""
    client = _client(harness)
    run_id = harness.start_and_run(flows.one_choice)
    token = harness.token(run_id)
    token_hash = tokens.hash_token(token)
    new = layout.token_field(token_hash)
    fields = client.hgetall(keys.run(run_id))
    assert new.encode() in fields and len(new) == len(layout.TOKEN_PREFIX) + 22
    legacy = layout.TOKEN_PREFIX + token_hash[: layout.TOKEN_FIELD_HEX]
    client.hset(keys.run(run_id), legacy, fields[new.encode()])
    client.hdel(keys.run(run_id), new)
    found = harness.pw.lookup(token)
    assert getattr(found, "run_id", None) == run_id, found
    with pytest.raises(InvalidAnswer):  # not an option: refused, and counted (refuse.lua)
        harness.pw.resume(token, selected="purple")
    assert any(f.startswith(b"f:") for f in client.hkeys(keys.summary(run_id)))
    assert harness.pw.resume(token, selected="red").accepted


KEY_NAME_BYTES = 44
"""the longest key name or sorted-set member that takes jemalloc's 48-byte class (an sds string of
``n`` bytes takes ``n`` + 4: 45 bytes take the 64-byte class)"""


def _allocation(n: int) -> int:
    """jemalloc's size class for an allocation of ``n`` bytes (the small classes, to 1 KiB)."""
    classes = [8, 16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640, 768, 896, 1024]
    return next(c for c in classes if c >= n)


def test_a_run_id_parkway_mints_is_unique_and_keeps_its_keys_and_members_in_the_48_byte_class(harness: Harness) -> None:
    """A run id parkway chooses is ``run_`` and 128 random bits (26 base32 characters), a valid id;
    its run's key names and its index members are at most 44 bytes, so each takes a 48-byte
    allocation where 45 bytes take 64."""
    ids = {harness.pw.start(flows.one_choice, {}) for _ in range(200)}
    assert len(ids) == 200 and all(re.fullmatch(r"run_[a-z2-7]{26}", i) for i in ids)
    run_id = harness.start_and_run(flows.one_choice)
    client = _client(harness)
    names = [k for k in client.keys(keys.run(run_id).removesuffix(":run") + "*") if not k.endswith(b":ev")]
    assert len(names) == 2 and all(len(k) <= KEY_NAME_BYTES for k in names)
    members = [m for o in ("newest", "expiring") for m in indexes.members(client, keys.index(o, "one_choice"))
               if run_id.encode() in m]
    assert len(members) == 2 and all(_allocation(len(m) + 4) == 48 for m in members)


def test_a_parked_runs_keys_stay_within_their_allocation_classes(harness: Harness) -> None:
    """On Redis, a run of the benchmark's workflow parked on its ~200-byte request has a hash that takes
    a listpack of at most 768 bytes under a 48-byte key name, and a summary of at most 128: ``MEMORY
    USAGE`` of each is at most those classes plus the key's own object and dict entry, which a longer
    name or a fatter hash would pass (bench/weight.py measures the whole)."""
    if harness.kind != "redis":
        pytest.skip("fakeredis does not model Redis's memory")
    client = _client(harness)
    run_id = harness.start_and_run("bench.flows:cycle", {"i": 1})
    assert client.hget(keys.run(run_id), "status") == b"waiting"
    overhead = 16 + 48 + 24  # the value's object, the key's sds (48-byte class), the key's dict entry
    assert client.memory_usage(keys.run(run_id), samples=0) <= 768 + overhead
    assert client.memory_usage(keys.summary(run_id), samples=0) <= 128 + overhead


def test_a_store_names_its_functions_while_another_thread_registers_a_features_scripts(redis_url: str) -> None:
    """The reconciler's sweep lists the store's function names (to keep them from being pruned) on
    its own thread while a job's thread may register a feature's scripts (sessions, at first use):
    neither ever sees the other's set change under it (a sweep once died of "Set changed size
    during iteration")."""
    import threading

    from parkway.adapters.redis.connection.connection import connect
    from parkway.adapters.redis.store.store import RedisStore
    from parkway.sessions import calls  # noqa: F401 - gives the loader the sessions' folder
    from parkway.sessions.store import SCRIPTS

    failures: list[BaseException] = []
    for _ in range(20):
        store = RedisStore(connect(redis_url))

        def names(store: RedisStore = store) -> None:
            try:
                store.function_names()  # the first call builds each library: a wide window
            except BaseException as exc:  # noqa: BLE001 - reported below
                failures.append(exc)

        thread = threading.Thread(target=names)
        thread.start()
        time.sleep(0.001)
        store.add_scripts(SCRIPTS)
        thread.join()
        assert {store._scripts[name].name for name in SCRIPTS} <= store.function_names()
        store.client.close()
    assert not failures, failures[0]
