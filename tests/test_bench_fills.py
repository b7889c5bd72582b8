"""The benchmark's ways of filling Redis with parked runs still write what a worker writes.

Benchmarks are not tests (they live in bench/ and gate nothing on a time); but their fills
run parkway's own code paths by hand, and when parkway's contract moves they break only
when someone next runs the bench. These run them small, on the test Redis.
"""

from __future__ import annotations

import pytest
import redis

from bench import flows, populate
from bench.env import flush
from parkway import Parkway, RunStatus, Settings
from tests.conftest import SECRET, Closing
from tests.procs import RedisServer


def _pw(redis_url: str) -> Parkway:
    return Parkway(Settings(redis_url=redis_url, secret=SECRET))


def test_park_runs_parks_each_run_through_the_executor(
    redis_client: redis.Redis, redis_url: str, closing: Closing
) -> None:
    pw = closing(_pw(redis_url))
    parked, last = populate.park_runs(pw, 5)
    assert parked == 5 and pw.get_run(last).status is RunStatus.WAITING
    assert len(pw.list_interrupts(workflow="bench_cycle").items) == 5


def test_pipelined_and_bulk_fills_index_every_run(redis_client: redis.Redis, redis_url: str, closing: Closing) -> None:
    parked, _ = populate.park_runs(closing(_pw(redis_url)), 4, pipelined=True)
    bulk, last = populate.bulk_park(closing(_pw(redis_url)), 6)
    pw = closing(_pw(redis_url))
    page = pw.list_interrupts(workflow="bench_cycle", limit=100, include_tokens=True)
    # pipelined: a template run plus the four it reports; bulk: its count includes its template
    assert (parked, bulk) == (4, 7)
    assert len(page.items) == 1 + parked + bulk
    assert pw.get_run(last).status is RunStatus.WAITING
    replayed = next(i for i in page.items if i.run_id == last)
    assert replayed.request.question == flows.REQUEST["question"]
    assert pw.resume(replayed.resume_token or "", selected=flows.ANSWER).accepted


def test_the_benchmarks_flush_refuses_a_server_that_holds_other_databases(
    private_redis: RedisServer, closing: Closing
) -> None:
    """The figures empty their server (FLUSHALL): one that holds another database is not theirs, and is
    left alone; one that holds only the client's own database is emptied."""
    mine = closing(redis.Redis.from_url(private_redis.url))
    other = closing(redis.Redis.from_url(private_redis.url.rsplit("/", 1)[0] + "/3"))
    mine.set("bench:key", 1)
    other.set("someone:else", 1)
    with pytest.raises(RuntimeError, match=r"holds other databases \(db3\)"):
        flush(mine)
    assert other.get("someone:else") == b"1" and mine.get("bench:key") == b"1"
    other.delete("someone:else")
    flush(mine)
    assert mine.dbsize() == 0


def test_the_listing_figures_middle_cursor_is_one_the_client_accepts(
    redis_client: redis.Redis, redis_url: str, closing: Closing
) -> None:
    """Figure 5's deep page starts from a cursor it makes from the index (cursors are sealed under the
    deployment's secret: an unsealed one is refused as invalid)."""
    from bench import listing

    pw = closing(_pw(redis_url))
    populate.bulk_park(closing(_pw(redis_url)), 7)
    n = listing.pending(redis_client)
    cursor, after = listing.middle_cursor(pw, redis_client, n)
    page = pw.list_interrupts(cursor=cursor, limit=2)
    assert page.items[0].run_id == after
