"""An idle deployment returns to baseline: once the runs' TTL, the expiry grace and the retention
have passed with no traffic, the reconciler's passes leave Redis holding only parkway's few fixed
keys, whatever the load left (closed-interrupt indexes, a retired workflow's name, the pause feed)."""

from __future__ import annotations

import time

import redis

from parkway import Parkway, RunStatus, Settings
from parkway.adapters.limits import Limits
from parkway.workers.reconciler import reconcile_once
from tests import flows, indexes
from tests.conftest import SECRET, Closing, Harness
from tests.procs import wait_for

TTL_MS, GRACE_MS, RETENTION_MS = 1000, 1000, 3000
FIXED = {b"pw:metrics", b"pw:keyid", b"pw:secret", b"pw:reconciler", b"pw:functions", b"rq:queues", b"pw:readers"}
"""what an idle deployment keeps: the counters, the token key's fingerprint (and the key itself
without PARKWAY_SECRET), the reconciler's lock (with a TTL), RQ's set of queues, and the stored
formats its live processes read (one field each, pruned once lapsed: adapters/redis/formats.py)"""


def _leftovers(client: redis.Redis) -> set[bytes]:
    """Keys beyond the fixed ones, but for RQ's that expire by themselves (a burst worker's record)."""
    return {k for k in client.keys("*") if k not in FIXED and not (k.startswith(b"rq:") and client.pttl(k) > 0)}


def test_after_load_and_ttl_plus_retention_only_the_fixed_keys_are_left(
    redis_client: redis.Redis, redis_url: str, closing: Closing
) -> None:
    """Runs answered, cancelled, expired (expire and cancel policies) and completed, then nothing:
    after TTL + grace + retention, a reconciler pass leaves none of their keys, no closed-interrupt
    index, no workflow name and no pause feed."""
    settings = Settings(redis_url=redis_url, secret=SECRET, ttl_ms=TTL_MS,
                        limits=Limits(retention_ms=RETENTION_MS, expiry_grace_ms=GRACE_MS))
    pw = closing(Parkway(settings))
    harness = Harness("redis", pw, settings, redis_client)
    answered = pw.start(flows.one_choice, {"ttl_ms": 5000})  # (a burst worker takes a second to leave)
    cancelled = pw.start(flows.one_choice, {"ttl_ms": 5000})
    expired = pw.start(flows.expiring, {"policy": None})
    replayed = pw.start(flows.expiring, {"policy": "cancel"})
    pw.start(flows.shared_state, {})
    harness.run_jobs()
    assert pw.resume(harness.token(answered), selected="red").accepted
    assert pw.cancel_interrupt(harness.token(cancelled)).accepted

    def ended() -> bool:
        reconcile_once(pw.store, pw.backend.dispatcher)
        harness.run_jobs()
        return all(pw.get_run(r).status.finished for r in (answered, cancelled, expired, replayed))

    wait_for(ended, 10, "every run to end")
    assert pw.get_run(expired).status is RunStatus.EXPIRED
    assert any(k.startswith(b"pw:ic:") for k in redis_client.keys("*"))  # the load left its indexes
    time.sleep((TTL_MS + GRACE_MS + RETENTION_MS) / 1000 + 0.2)
    reconcile_once(pw.store, pw.backend.dispatcher)
    left = _leftovers(redis_client)
    assert left == set(), {k: redis_client.type(k) for k in left} | {"workflows": redis_client.smembers("pw:workflows")}


def test_a_retired_workflow_is_forgotten_while_one_still_waiting_keeps_its_keys(
    redis_client: redis.Redis, redis_url: str, closing: Closing
) -> None:
    """A workflow whose interrupts all ended past the retention leaves the set of workflows with its
    indexes; one still waiting keeps its name, its index and the pause feed, and lists as before."""
    settings = Settings(redis_url=redis_url, secret=SECRET, ttl_ms=TTL_MS,
                        limits=Limits(retention_ms=RETENTION_MS, expiry_grace_ms=GRACE_MS))
    pw = closing(Parkway(settings))
    harness = Harness("redis", pw, settings, redis_client)
    retired = pw.start(flows.one_choice, {"ttl_ms": 5000})
    harness.run_jobs()
    assert pw.resume(harness.token(retired), selected="red").accepted
    harness.run_jobs()
    time.sleep((TTL_MS + RETENTION_MS) / 1000 + 0.2)
    waiting = pw.start(flows.two_questions, {}, ttl_ms=60_000)
    harness.run_jobs()
    reconcile_once(pw.store, pw.backend.dispatcher)
    assert redis_client.smembers("pw:workflows") == {b"two_questions"}
    assert not redis_client.exists("pw:ic:resolved:one_choice")
    assert redis_client.exists("pw:pauses") == 1
    assert indexes.indexes(redis_client) == {"pw:ix:newest:two_questions", "pw:ix:expiring:two_questions"}
    assert [i.run_id for i in pw.list_interrupts().items] == [waiting]
