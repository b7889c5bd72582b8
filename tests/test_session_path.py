"""A session's active path, kept by the scripts that move its head (so a send never walks it): it
is always the path the messages' parents give from the head, whatever raced to change it."""

from __future__ import annotations

import random
import threading

import redis

from parkway import Caller
from parkway.adapters.redis import keys
from parkway.errors import BranchBusy, BranchParked
from tests import session_flows as sf
from tests.conftest import Harness

ADA = Caller("user", "ada", "acme")


def _assert_kept(h: Harness, client: redis.Redis, sid: str) -> None:
    """The kept path equals the one the parents give from the head, read in one step (a worker may
    be moving the head meanwhile)."""
    pipe = client.pipeline(transaction=True)
    pipe.hgetall(keys.session_up(sid))
    pipe.hmget(keys.session(sid), "head", "pd")
    pipe.lrange(keys.session_path(sid), 0, -1)
    up, (head, depth), path = pipe.execute()
    walked = []
    m = head or b""
    while m:
        walked.append(m.decode())
        m = up[m]
    assert [m.decode() for m in path] == list(reversed(walked))
    assert int(depth) == len(walked)


def _step(h: Harness, sid: str, rnd: random.Random) -> None:
    """A send, an edit of a user message, or a switch to any message (or before the first)."""
    view = h.pw.sessions.get(sid)
    users = [m.id for m in view.messages.values() if m.role == "user"]
    choice = rnd.random()
    try:
        if choice < 0.4 or not users:
            h.pw.sessions.send(sid, "hello", caller=ADA)
        elif choice < 0.7:
            h.pw.sessions.edit(sid, rnd.choice(users), "again", caller=ADA)
        else:
            h.pw.sessions.switch(sid, rnd.choice(["", *view.messages]), caller=ADA)
    except (BranchBusy, BranchParked):
        pass


def test_the_kept_active_path_is_the_heads_path_after_sends_edits_switches_and_replies(harness: Harness) -> None:
    client = harness.pw.store.client  # type: ignore[attr-defined]
    sid = harness.pw.sessions.open(sf.echo, owner="ada", tenant="acme")
    rnd = random.Random(7)
    for i in range(30):
        _step(harness, sid, rnd)
        if i % 3 == 2:
            harness.run_jobs()  # the agent's replies move the head below the messages they answer
        _assert_kept(harness, client, sid)


def test_the_kept_active_path_survives_racing_sends_edits_switches_and_a_worker(harness: Harness) -> None:
    client = harness.pw.store.client  # type: ignore[attr-defined]
    sid = harness.pw.sessions.open(sf.echo, owner="ada", tenant="acme")
    harness.pw.sessions.send(sid, "first", caller=ADA)
    harness.run_jobs()
    done = threading.Event()
    errors: list[BaseException] = []

    def client_ops(seed: int) -> None:
        rnd = random.Random(seed)
        try:
            for _ in range(8):
                _step(harness, sid, rnd)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def worker() -> None:
        while not done.is_set():
            harness.run_jobs()

    threads = [threading.Thread(target=client_ops, args=(seed,)) for seed in range(4)]
    runner = threading.Thread(target=worker)
    runner.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    runner.join()
    harness.run_jobs()
    assert errors == []
    _assert_kept(harness, client, sid)


def test_a_session_from_before_the_path_was_kept_gets_it_built_on_its_next_transition(harness: Harness) -> None:
    client = harness.pw.store.client  # type: ignore[attr-defined]
    sid = harness.pw.sessions.open(sf.echo, owner="ada", tenant="acme")
    for _ in range(3):
        harness.pw.sessions.send(sid, "hello", caller=ADA)
        harness.run_jobs()
    client.delete(keys.session_path(sid))
    client.hdel(keys.session(sid), "pd")  # as a session written before this layout
    harness.pw.sessions.send(sid, "hello", caller=ADA)
    _assert_kept(harness, client, sid)
    harness.run_jobs()
    _assert_kept(harness, client, sid)


def test_a_path_kept_as_a_hash_before_it_was_a_list_is_built_as_a_list_and_the_hash_left_to_expire(
    harness: Harness,
) -> None:
    """A session written when the path was a hash (``hd`` its length, the key ``path``) gets the
    list on its next transition; the old key, which no script names any more, expires with the
    TTL it has."""
    client = harness.pw.store.client  # type: ignore[attr-defined]
    sid = harness.pw.sessions.open(sf.echo, owner="ada", tenant="acme")
    for _ in range(2):
        harness.pw.sessions.send(sid, "hello", caller=ADA)
        harness.run_jobs()
    path = client.lrange(keys.session_path(sid), 0, -1)
    old = keys.session_path(sid).rsplit(":", 1)[0] + ":path"
    client.delete(keys.session_path(sid))
    client.hdel(keys.session(sid), "pd")
    client.hset(old, mapping={m: d for d, m in enumerate(path, start=1)})
    client.hset(keys.session(sid), "hd", len(path))
    client.pexpire(old, 60_000)
    harness.pw.sessions.send(sid, "hello", caller=ADA)
    harness.run_jobs()
    _assert_kept(harness, client, sid)
    assert client.hget(keys.session(sid), "hd") is None and 0 < client.pttl(old) <= 60_000
    assert client.pttl(keys.session_path(sid)) > 0
