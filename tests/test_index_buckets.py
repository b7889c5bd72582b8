"""Stored format 4: the lex indexes (a workflow's pending interrupts newest and expiring, the filter
indexes, the run index) keep their members in buckets of at most ``keys.BUCKET_MAX``, each a listpack,
under a directory; readers read both the buckets and the single zset written before format 4, exactly,
a page at a time, whatever splits or empties between two pages."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from parkway import Parkway, Settings
from parkway.adapters import codec
from parkway.adapters.redis import formats, keys, layout
from parkway.adapters.redis.scripts import calls, scripts
from parkway.adapters.redis.store.index_reads import IndexRead
from parkway.adapters.redis.store.store import RedisStore
from parkway.runtime.clock import now_ms
from tests import flows, indexes
from tests import flows_escalate as fe
from tests.conftest import SECRET, Closing, Harness

INDEX = keys.index("newest", "buckets_test")

ADD_BODY = "local n = 0\nfor _, m in ipairs(A.members) do n = n + ix_add(K.index, m, true) end\nreturn n\n"


@pytest.fixture
def pw(redis_url: str, redis_client: redis.Redis, closing: Closing) -> Iterator[Parkway]:
    """A client on the emptied test database."""
    yield closing(Parkway(Settings(redis_url=redis_url, secret=SECRET)))


def _store(pw: Parkway) -> RedisStore:
    store = pw.store
    assert isinstance(store, RedisStore)
    return store


def _adder() -> str:
    """unlist.lua whole (constants, _common.lua, its prologue) with a body that adds its members to the
    index's buckets instead (``ix_add``, as park does in format 4)."""
    text = scripts.source("unlist", "")
    body = [line for line in Path(scripts.__file__).with_name("unlist.lua").read_text().splitlines()
            if not line.startswith("--")]
    return text.replace("\n".join(body), ADD_BODY)


def _add(r: redis.Redis, members: list[bytes], index: str = INDEX) -> int:
    return int(r.eval(_adder(), 1, index, *members))


def _remove(store: RedisStore, members: list[bytes], index: str = INDEX) -> int:
    return int(store.call_script(None, calls.Unlist(index=index, members=members)))


def _member(t: int, name: str) -> bytes:
    """A member as codec builds them: times (6 bytes each, big-endian), then a run id."""
    return t.to_bytes(6, "big") + (t + 3_600_000).to_bytes(6, "big") + name.encode()


def _pages(store: RedisStore, what: str, limit: int, index: str = INDEX) -> list[bytes]:
    """Every member, a page of ``limit`` at a time, each page starting past the last member read."""
    out: list[bytes] = []
    while True:
        if what == "asc":
            low = b"(" + out[-1] if out else "-"
            page = store.read_indexes([IndexRead(index, "asc", low, "+", limit)])[0]
        else:
            high = b"(" + out[-1] if out else "+"
            page = store.read_indexes([IndexRead(index, "desc", "-", high, limit)])[0]
        out += page
        if len(page) < limit:
            return out


def _check_shape(r: redis.Redis, index: str = INDEX) -> list[int]:
    """Every bucket is a listpack of at most BUCKET_MAX members, each within its bounds, in the
    directory's order; the companion hash counts them. The buckets' sizes."""
    sizes, previous = [], None
    entries = r.zrange(keys.bucket_directory(index), 0, -1)
    bounds = [e.rsplit(b"\0", 1)[0] for e in entries]
    for i, bucket in enumerate(indexes.buckets(r, index)):
        members = r.zrange(bucket, 0, -1)
        assert members and len(members) <= keys.BUCKET_MAX
        assert r.object("encoding", bucket) == b"listpack"
        assert members[0] >= bounds[i] and (i + 1 == len(bounds) or members[-1] < bounds[i + 1])
        assert previous is None or previous < members[0]
        previous = members[-1]
        sizes.append(len(members))
    assert int(r.hget(keys.bucket_count(index), "n") or 0) == sum(sizes)
    return sizes


def test_time_ordered_members_fill_buckets_to_the_listpack_limit(pw: Parkway, redis_client: redis.Redis) -> None:
    """Members added in order (a workflow's pauses, newest index) fill each bucket to BUCKET_MAX and
    start the next: 1,000 members take 8 buckets, all listpacks, where one zset would be a skiplist."""
    members = [_member(1_700_000_000_000 + i, f"run-{i:05d}") for i in range(1000)]
    for at in range(0, len(members), 100):
        assert _add(redis_client, members[at : at + 100]) == 100
    assert _check_shape(redis_client) == [128] * 7 + [104]
    assert indexes.members(redis_client, INDEX) == members


def test_pages_are_exact_across_buckets_and_splits_in_both_orders(pw: Parkway, redis_client: redis.Redis) -> None:
    """600 members added in random order (splits in the middle of buckets) read back whole, no gap and no
    repeat, page by page from a cursor (ascending and descending, pages of 1, 7, 128, 500); a count over
    any range is the members in it."""
    rng = random.Random(36)
    members = [_member(rng.randrange(1_700_000_000_000, 1_700_001_000_000), f"r{i}") for i in range(600)]
    rng.shuffle(members)
    _add(redis_client, members)
    sizes = _check_shape(redis_client)
    assert len(sizes) >= 5 and sum(sizes) == 600
    ordered = sorted(members)
    store = _store(pw)
    for limit in (1, 7, 128, 500):
        assert _pages(store, "asc", limit) == ordered
        assert _pages(store, "desc", limit) == ordered[::-1]
    for lo, hi in ((0, 600), (0, 37), (129, 400), (255, 256), (599, 600), (300, 300)):
        low, high = b"[" + ordered[lo], (b"(" + ordered[hi]) if hi < 600 else "+"
        assert store.read_indexes([IndexRead(INDEX, "count", low, high)]) == [hi - lo]
        assert store.read_indexes([IndexRead(INDEX, "asc", low, high, 1000)])[0] == ordered[lo:hi]
        assert store.read_indexes([IndexRead(INDEX, "desc", low, high, 1000)])[0] == ordered[lo:hi][::-1]


def test_old_and_bucketed_members_are_read_as_one_index_and_removed_from_either(
    pw: Parkway, redis_client: redis.Redis
) -> None:
    """Members of the single zset (written before format 4) and of the buckets interleave in every page
    and count; removal takes a member out of whichever form holds it; a bucket emptied leaves the
    directory, and the last takes the directory and its companion hash with it."""
    members = [_member(1_700_000_000_000 + i, f"m{i:04d}") for i in range(400)]
    old, new = members[::2], members[1::2]
    redis_client.zadd(INDEX, dict.fromkeys(old, 0))
    _add(redis_client, new)
    store = _store(pw)
    assert _pages(store, "desc", 33) == members[::-1] and _pages(store, "asc", 50) == members
    assert store.read_indexes([IndexRead(INDEX, "count", b"[" + members[100], "+")]) == [300]
    assert store.read_indexes([IndexRead(INDEX, "count", "-", b"(" + members[100])]) == [100]
    assert _remove(store, [old[0], new[0], b"absent"]) == 2
    assert indexes.members(redis_client, INDEX) == sorted(set(members) - {old[0], new[0]})
    first = indexes.buckets(redis_client, INDEX)[0]
    assert _remove(store, list(redis_client.zrange(first, 0, -1))) > 0
    assert not redis_client.exists(first)
    assert first not in indexes.buckets(redis_client, INDEX)
    _check_shape(redis_client)
    _remove(store, new)  # what is left of them
    assert not redis_client.exists(keys.bucket_directory(INDEX), keys.bucket_count(INDEX))
    assert indexes.members(redis_client, INDEX) == sorted(old[1:])
    assert _pages(store, "asc", 64) == sorted(old[1:])


def test_a_reader_paging_while_others_add_and_remove_sees_each_member_present_throughout_once(
    pw: Parkway, redis_client: redis.Redis, redis_url: str
) -> None:
    """Threads add members at random places (splitting buckets) and remove others while a reader pages
    through, again and again: every member present from before the first page to after the last is read
    exactly once, in order, and no member is read twice."""
    rng = random.Random(4)
    stable = sorted(_member(rng.randrange(1_700_000_000_000, 1_700_000_100_000), f"s{i}") for i in range(300))
    churn = [_member(rng.randrange(1_700_000_000_000, 1_700_000_100_000), f"c{i}") for i in range(600)]
    _add(redis_client, stable + churn[:200])
    store = _store(pw)
    stop = threading.Event()
    errors: list[BaseException] = []

    def write(part: list[bytes]) -> None:
        conn = redis.Redis.from_url(redis_url)
        try:
            i = 0
            while not stop.is_set():
                m = part[i % len(part)]
                if rng.random() < 0.5:
                    _add(conn, [m])
                else:
                    _remove(store, [m])
                i += 1
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            conn.close()

    writers = [threading.Thread(target=write, args=(churn[k::3],)) for k in range(3)]
    for t in writers:
        t.start()
    try:
        for round_ in range(6):
            what = "desc" if round_ % 2 else "asc"
            seen = _pages(store, what, 9)
            assert len(seen) == len(set(seen))
            assert seen == sorted(seen, reverse=what == "desc")
            assert set(stable) <= set(seen)
    finally:
        stop.set()
        for t in writers:
            t.join(10)
    assert not errors
    _check_shape(redis_client)


def test_parked_runs_list_exactly_from_buckets_and_keep_them_listpacks(pw: Parkway, redis_client: redis.Redis) -> None:
    """320 parked runs of one workflow (and 20 of another) with an audience: their newest, expiring and
    audience indexes and the run index are buckets, every one a listpack; every page of the listings
    (both orders, one workflow and all merged, by audience) lists each run once; the pending count
    (/metrics) counts them; answered runs leave every index and listing."""
    store = _store(pw)
    assert store.formats.refresh().writes == layout.BUCKETS_FORMAT
    ids = [pw.start(fe.asks_audience, {"audience": "team:ops"}) for _ in range(320)]
    others = [pw.start(flows.one_choice, {}) for _ in range(20)]
    _run_jobs(pw)
    for index in (keys.index("newest", "asks_audience"), keys.index("expiring", "asks_audience"),
                  keys.filter_index("aud", "team:ops"), keys.runs()):
        assert not redis_client.exists(index)
        assert len(_check_shape(redis_client, index)) >= 3
    assert _listed(pw, "newest", 47, workflow="asks_audience") == _newest_first(pw, ids)
    assert sorted(_listed(pw, "expiring", 64, workflow="asks_audience")) == sorted(ids)
    assert sorted(_listed(pw, "newest", 50)) == sorted(ids + others)
    assert sorted(_listed(pw, "newest", 30, audience="team:ops")) == sorted(ids)
    assert store.tallies(now_ms()).pending == {"asks_audience": 320, "one_choice": 20}
    answered = ids[::3]
    for run_id in answered:
        assert pw.resume(_token(pw, redis_client, run_id), selected="red").accepted
    left = [r for r in ids if r not in answered]
    assert sorted(_listed(pw, "newest", 47, workflow="asks_audience")) == sorted(left)
    assert sorted(_listed(pw, "newest", 30, audience="team:ops")) == sorted(left)
    assert store.tallies(now_ms()).pending["asks_audience"] == len(left)
    assert indexes.count(redis_client, keys.index("expiring", "asks_audience")) == len(left)
    assert {r.run_id for r in _all_runs(pw)} >= set(ids + others)


def test_runs_parked_before_and_after_the_switch_to_format_4_list_as_one(
    pw: Parkway, redis_client: redis.Redis
) -> None:
    """With a live process that reads up to format 3, parks write the single zsets; once it is gone,
    buckets; listings read both as one, exactly, and an answer or the reconciler's expiry takes a
    run out of whichever form holds it."""
    store = _store(pw)
    redis_client.hset(keys.readers(), "old-worker", formats.announcement((1, 2, 3), "worker", now_ms() + 60_000))
    assert store.formats.refresh().writes == 3
    old = [pw.start(flows.one_choice, {}) for _ in range(150)]
    _run_jobs(pw)
    newest = keys.index("newest", "one_choice")
    assert redis_client.zcard(newest) == 150 and not redis_client.exists(keys.bucket_directory(newest))
    redis_client.hdel(keys.readers(), "old-worker")
    assert store.formats.refresh().writes == layout.BUCKETS_FORMAT
    new = [pw.start(flows.one_choice, {}) for _ in range(150)]
    _run_jobs(pw)
    assert redis_client.zcard(newest) == 150 and sum(_check_shape(redis_client, newest)) == 150
    assert _listed(pw, "newest", 41, workflow="one_choice") == _newest_first(pw, old + new)
    assert sorted(_listed(pw, "expiring", 41)) == sorted(old + new)
    assert store.tallies(now_ms()).pending == {"one_choice": 300}
    for run_id in old[:10] + new[:10]:
        assert pw.resume(_token(pw, redis_client, run_id), selected="red").accepted
    assert sorted(_listed(pw, "newest", 41)) == sorted(old[10:] + new[10:])
    assert redis_client.zcard(newest) == 140 and indexes.count(redis_client, newest) == 280


def _newest_first(pw: Parkway, run_ids: list[str]) -> list[str]:
    """The runs in the newest order of their interrupts (created when each parked), as their members sort."""
    wanted = set(run_ids)
    members = [m for wf in {pw.get_run(r).workflow for r in run_ids}
               for m in indexes.members(_store(pw).client, keys.index("newest", wf))]
    found = [codec.parse_member(m, "newest", "").run_id for m in sorted(members, reverse=True)]
    assert wanted <= set(found)
    return [r for r in found if r in wanted]


def _listed(pw: Parkway, order: str, limit: int, **filters: Any) -> list[str]:
    """Every page of a pending listing, following its cursor; the run ids in order, repeats kept."""
    out: list[str] = []
    cursor = None
    while True:
        page = pw.list_interrupts(order=order, limit=limit, cursor=cursor, **filters)
        out += [i.run_id for i in page.items]
        if page.next_cursor is None:
            return out
        cursor = page.next_cursor


def _all_runs(pw: Parkway) -> list[Any]:
    out: list[Any] = []
    cursor = None
    while True:
        page = pw.list_runs(limit=100, cursor=cursor)
        out += page.items
        if page.next_cursor is None:
            return out
        cursor = page.next_cursor


def _harness(pw: Parkway) -> Harness:
    return Harness("redis", pw, pw.settings, _store(pw).client)


def _run_jobs(pw: Parkway) -> None:
    _harness(pw).run_jobs()


def _token(pw: Parkway, r: redis.Redis, run_id: str) -> str:
    return _harness(pw).token(run_id)


def test_the_reconcilers_expiry_takes_bucketed_members_out(pw: Parkway, redis_client: redis.Redis) -> None:
    """Interrupts past their TTL in buckets are found by the reconciler's expiry scan and leave every
    index; the workflow then leaves the set of workflows (prune_idle), its buckets gone."""
    from parkway.workers.reconciler import reconcile_once

    ids = [pw.start(flows.one_choice, {}, ttl_ms=1000) for _ in range(140)]
    _run_jobs(pw)
    newest = keys.index("newest", "one_choice")
    assert indexes.count(redis_client, newest) == 140 and not redis_client.exists(newest)
    store, later = _store(pw), now_ms() + 1500
    assert store.overdue(later).count == 140
    for _ in range(5):
        reconcile_once(store, pw.backend.dispatcher, now=later)
        if not indexes.count(redis_client, newest):
            break
    assert indexes.count(redis_client, newest) == indexes.count(redis_client, keys.index("expiring", "one_choice")) == 0
    assert {pw.get_run(r).status.value for r in ids} == {"expired"}
    reconcile_once(store, pw.backend.dispatcher, now=later)
    assert not redis_client.keys("pw:ix:*")


def test_a_listing_paging_while_runs_park_and_resume_sees_each_run_waiting_throughout_once(
    pw: Parkway, redis_client: redis.Redis, redis_url: str, closing: Closing
) -> None:
    """One thread parks new runs and another answers some of those parked before, while the listings
    (newest, expiring, by audience) are paged through again and again: no run is listed twice in one
    pass, and every run that waited from before the pass to after it is listed in it."""
    waiting = [pw.start(fe.asks_audience, {"audience": "team:ops"}) for _ in range(200)]
    answered = [pw.start(fe.asks_audience, {"audience": "team:ops"}) for _ in range(60)]
    _run_jobs(pw)
    tokens = [_token(pw, redis_client, r) for r in answered]
    stop = threading.Event()
    errors: list[BaseException] = []
    parker, answerer = (closing(Parkway(Settings(redis_url=redis_url, secret=SECRET))) for _ in range(2))

    def park() -> None:
        try:
            while not stop.is_set():
                for _ in range(5):
                    parker.start(fe.asks_audience, {"audience": "team:ops"})
                _run_jobs(parker)
        except BaseException as exc:  # reported below
            errors.append(exc)

    def answer() -> None:
        try:
            for token in tokens:
                assert answerer.resume(token, selected="red").accepted
                time.sleep(0.01)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=park), threading.Thread(target=answer)]
    for t in threads:
        t.start()
    try:
        for round_ in range(6):
            order, filters = ("newest", {"workflow": "asks_audience"}) if round_ % 3 == 0 else (
                ("expiring", {}) if round_ % 3 == 1 else ("newest", {"audience": "team:ops"}))
            seen = _listed(pw, order, 17, **filters)
            assert len(seen) == len(set(seen)), f"a run listed twice ({order}, {filters})"
            assert set(waiting) <= set(seen)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors
    for index in (keys.index("newest", "asks_audience"), keys.filter_index("aud", "team:ops")):
        _check_shape(redis_client, index)


def test_a_listing_loads_its_read_function_again_when_the_server_lost_it(
    pw: Parkway, redis_client: redis.Redis
) -> None:
    """A server that lost parkway's functions (restarted without its data) answers the listing's read
    ``Function not found``; the listing loads it again and reads, in that call."""
    run_id = pw.start(flows.one_choice, {})
    _run_jobs(pw)
    assert [i.run_id for i in pw.list_interrupts().items] == [run_id]
    redis_client.function_flush()
    assert [i.run_id for i in pw.list_interrupts().items] == [run_id]
    redis_client.function_flush()
    assert [i.run_id for i in pw.list_interrupts(workflow="one_choice").items] == [run_id]
