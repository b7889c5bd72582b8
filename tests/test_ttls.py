"""Every key of a run lives under a TTL, and time passing reads as what it is: what each transition
puts under a TTL (the design's invariant 5), what a run reads as once its records are gone (5), an
interrupt past its expiry (2, 3), and the retention setting (how long a run's summary outlives its
records). Replay from the journal is in test_journal, the answer bound in test_validation, the
fence a resume moves a run to and persist-then-publish in test_fences."""

from __future__ import annotations

import inspect
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import redis

from parkway import (
    CancelOutcome,
    ConfigError,
    InvalidAnswer,
    Parkway,
    ResumeOutcome,
    RunNotFound,
    RunStatus,
    Settings,
    Workflow,
    emit,
    use_interrupt,
    use_node_state,
    use_workflow_state,
)
from parkway.adapters.limits import Limits
from parkway.adapters.redis import keys, layout
from parkway.adapters.redis.connection import embedded
from parkway.adapters.redis.store.store import RedisStore
from parkway.runtime import telemetry, tokens
from parkway.runtime.protocol import InterruptRequest
from parkway.runtime.store import (
    Advance,
    Answer,
    IndexEntry,
    InterruptRecord,
    JournalEntry,
    NewRun,
    Park,
)
from parkway.workers.reconciler import reconcile_once
from tests import flows
from tests.conftest import SECRET, Closing, Harness
from tests.procs import wait_for


def _now() -> int:
    return int(time.time() * 1000)


# --- workflows these tests run (module level, so RQ workers import them) ---------------------


every_hook = Workflow("every_hook")


@every_hook.node(start=True)
def writes_everything(data: dict[str, Any]) -> dict[str, Any]:
    _, set_shared = use_workflow_state("shared")
    set_shared({"v": 1})
    seen, set_seen = use_node_state(False, key="seen")
    if not seen:
        set_seen(True)
    emit("progress", {"n": 1})
    answer = use_interrupt(flows.COLORS, id="q", ttl_ms=data.get("ttl_ms"))
    return {"answer": answer}


# --- helpers ----------------------------------------------------------------------------------


def _harness(request: pytest.FixtureRequest, kind: str, **settings: Any) -> Harness:
    """A harness like conftest's, with its own settings."""
    if kind == "embedded":
        s = Settings(secret=SECRET, **settings)
        pw = Parkway(s)
        request.addfinalizer(pw.close)
        return Harness("embedded", pw, s)
    client = request.getfixturevalue("redis_client")
    s = Settings(redis_url=request.getfixturevalue("redis_url"), secret=SECRET, **settings)
    pw = Parkway(s)
    request.addfinalizer(pw.close)
    return Harness("redis", pw, s, client)


def _event_types(harness: Harness, run_id: str) -> list[str]:
    return [e.type for e in harness.pw.store.read_events(run_id, "0", None, 1000)]


def _fence(harness: Harness, run_id: str) -> int:
    record = harness.pw.store.get_run(run_id, _now())
    assert record is not None
    return record.fence


def _answer(record: InterruptRecord, token_hash: str, value: Any = "red") -> Answer:
    """What the client commits for a choice answer to ``record``."""
    entry = JournalEntry("interrupt", record.journal_field.removeprefix("i:"), value, record.request_kind)
    return Answer(record, token_hash, None, entry, {"requestId": record.request_id}, _now())


def _pending_lookup(harness: Harness, run_id: str) -> tuple[str, InterruptRecord]:
    """The run's token (from the public API), and the interrupt record the store holds for it."""
    token = harness.token(run_id)
    lookup = harness.pw.store.lookup(run_id, tokens.hash_token(token), _now())
    assert lookup.outcome == "pending" and lookup.interrupt is not None
    return token, lookup.interrupt


def _interrupt_of(harness: Harness, run_id: str) -> tuple[str, InterruptRecord]:
    """The run's token, from its interrupt event (which outlives a short pause), and the interrupt
    record the store holds for it."""
    token = harness.interrupt_event(run_id)["resumeToken"]
    lookup = harness.pw.store.lookup(run_id, tokens.hash_token(token), _now())
    assert lookup.interrupt is not None
    return token, lookup.interrupt


def _lapse(harness: Harness, run_id: str) -> None:
    """Move the waiting run's ``expires`` into the past by hand (as the clock passing it would),
    leaving its records: its interrupt can no longer be answered."""
    client = harness.pw.store.client  # the real or the in-process Redis
    assert client.hget(keys.run(run_id), "status") == b"waiting"
    client.hset(keys.run(run_id), "expires", 1)


def _stranger() -> tuple[str, str, InterruptRecord]:
    """A run id, token (signed with the test key) and interrupt of a run that only ever existed in
    another, throwaway embedded deployment: to this one's store, a run that never was."""
    with Parkway(Settings(secret=SECRET)) as other:
        run_id = other.start(flows.one_choice, {})
        other.drain()
        token = other.list_interrupts(run_id=run_id, include_tokens=True).items[0].resume_token
        assert token is not None
        lookup = other.store.lookup(run_id, tokens.hash_token(token), _now())
    assert lookup.interrupt is not None
    return run_id, token, lookup.interrupt


def _sleep_until(epoch_ms: float) -> None:
    time.sleep(max(0.0, epoch_ms / 1000 - time.time()))


# --- 1. every key a transition writes is under its TTL (invariant 5) ---------------------------
#
# Each transition is driven through the Store API on a run of its own: the steps before it, then
# the transition. On Redis every key of the run is first given a far-off sentinel TTL, so the PTTL
# read after the transition shows which keys it (re)expired and to what. The same transitions run
# on the in-process Redis of embedded mode: a check of fakeredis's fidelity for parkway's TTLs.

T = 60_000
"""the run's TTL"""
P = 40_000
"""the pause's TTL (use_interrupt's ttl_ms)"""
G = 10_000
"""how long a waiting run's records outlive its pause"""
R = 3_600_000
"""how long the summary outlives the records"""
LIMITS = Limits(expiry_grace_ms=G, retention_ms=R)
SENTINEL = 9_000_000_000
SLACK = 5_000
WF = "ttl_probe"
_ERROR = {"message": "gone", "type": "tests.Gone", "traceback": "", "node": "first"}


class Scene:
    """One run driven transition by transition through a Store."""

    def __init__(self, store: Any, clock: Callable[[], int]) -> None:
        self.store, self.clock = store, clock
        self.run_id = "run_" + uuid.uuid4().hex
        self.step = 0
        self.fence = 0
        self.token_hash = ""
        self.interrupt: InterruptRecord | None = None

    def create(self) -> None:
        self.store.create_run(
            NewRun(self.run_id, WF, f"tests.test_ttls:{WF}", "first", {"x": 1}, T, self.clock())
        )

    def begin(self) -> None:
        self.store.begin(self.run_id, self.step, self.fence, self.clock(), self.clock() + 60_000)

    def begin_lost(self) -> None:
        """An attempt whose worker stopped renewing its lease at once."""
        self.store.begin(self.run_id, self.step, self.fence, self.clock(), self.clock() - 1)

    def redispatch(self) -> None:
        result = self.store.redispatch(self.run_id, self.step, self.fence, self.clock())
        assert result.outcome == "requeued"
        self.fence = result.fence

    def record_journal(self) -> None:
        entry = JournalEntry("state", "seen", True)
        # over 64 bytes: the run's events stay in its stream when it parks (not folded into its hash),
        # so park's rebuild of the stream under the records' TTL is what this scene checks
        event = ("data", {"dataType": "probe", "data": {"pad": "x" * layout.PART_BYTES}})
        self.store.write_entry(self.run_id, self.fence, self.step, "journal", "n:seen", entry, event, self.clock())

    record_next = record_journal

    def record_workflow(self) -> None:
        self.store.write_entry(self.run_id, self.fence, self.step, "workflow", "shared", {"v": 1}, None, self.clock())

    def advance(self) -> None:
        events = [("node.completed", {"node": "first", "step": 0}), ("node.started", {"node": "second", "step": 1})]
        self.fence = self.store.advance(
            self.run_id, self.fence, self.step, Advance({"x": 2}, "second", None, events, self.clock())
        )
        self.step += 1

    def park(self) -> None:
        now = self.clock()
        request_id = "int_" + uuid.uuid4().hex[:24]
        self.token_hash = uuid.uuid4().hex * 2
        self.interrupt = InterruptRecord(
            request_id, self.run_id, WF, "second", self.step, "i:q", InterruptRequest.model_validate(flows.COLORS),
            now, now + P, self.token_hash,
        )
        park = Park(self.interrupt, P, {"requestId": request_id}, now)
        self.fence = self.store.park(self.run_id, self.fence, self.step, park)

    def resume(self) -> None:
        assert self.interrupt is not None
        commit = self.store.resume(self.run_id, _answer(self.interrupt, self.token_hash))
        assert commit.outcome is ResumeOutcome.ACCEPTED
        self.fence = commit.fence

    begin_resumed = begin

    def complete(self) -> None:
        events = [("node.completed", {}), ("run.completed", {}), ("done", {"status": "completed"})]
        advance = Advance({"x": 3}, None, {"x": 3}, events, self.clock())
        self.fence = self.store.advance(self.run_id, self.fence, self.step, advance)

    def finish(self) -> None:
        self.store.finish(self.run_id, self.fence, "failed", _ERROR, ("run.failed", {}), self.clock())

    def recover(self) -> None:
        assert self.store.recover(self.run_id, self.clock(), 3, _ERROR).outcome == "requeued"

    def recover_fails(self) -> None:
        assert self.store.recover(self.run_id, self.clock(), 1, _ERROR).outcome == "failed"

    def release(self) -> None:
        self.fence = self.store.release(self.run_id, self.fence, self.step, {"step": self.step}, self.clock())

    def lapse(self) -> None:
        """The pause's TTL passes (the clock moves past it; the records stay for the grace)."""
        clock = self.clock
        self.clock = lambda: clock() + P

    def expire(self) -> None:
        assert self.interrupt is not None
        i = self.interrupt
        entry = IndexEntry(i.created_at, i.expires_at, WF, self.run_id, i.request_id)
        assert self.store.expire(entry, self.clock()).outcome == "expired"


_BASE = ["create", "begin", "record_journal", "record_workflow"]
_PARKED = _BASE + ["advance", "record_next", "park"]
PATHS = {
    "create": ["create"],
    "begin": ["create", "begin"],
    "redispatch": ["create", "redispatch"],
    "record_journal": _BASE[:3],
    "record_workflow": _BASE,
    "advance": _BASE + ["advance"],
    "record_next": _BASE + ["advance", "record_next"],
    "park": _PARKED,
    "resume": _PARKED + ["resume"],
    "complete": _PARKED + ["resume", "begin_resumed", "complete"],
    "finish": _BASE + ["finish"],
    "recover": ["create", "begin_lost", "record_journal", "record_workflow", "recover"],
    "recover_fails": ["create", "begin_lost", "record_journal", "record_workflow", "recover_fails"],
    "release": _BASE + ["release"],
    "expire": _PARKED + ["lapse", "expire"],
}
"""the steps that lead to each transition, the transition last"""

ANY = None
"""a key that must have some TTL, whatever it is (the transition did not write it)"""


def _kept(ttl: int) -> int:
    """The most a key protected for ``ttl`` ms lives: renewed, it is given the slack too."""
    return ttl + ttl // layout.RENEW_SLACK


def _redis_ttls(target: str, s: Scene) -> dict[str, int | None]:
    """Every key of the run after ``target``, with the TTL ``target`` must have given it."""
    r = s.run_id
    run, ev, ws, summ = keys.run(r), keys.events(r), keys.workflow_state(r), keys.summary(r)
    j0, j1, held = keys.journal(r, 0), keys.journal(r, 1), P + G
    snap = keys.snapshots(r)  # renewed by advance, park, resume and spawn (fork reads it)
    kept = T + R  # the summary outlives the records by the retention
    table: dict[str, dict[str, int | None]] = {
        "create": {run: T, ev: T, summ: kept},
        "begin": {run: ANY, ev: ANY, summ: ANY},
        "redispatch": {run: ANY, ev: ANY, summ: ANY},
        "record_journal": {run: T, ev: T, j0: T, summ: kept},
        "record_workflow": {run: T, ev: T, j0: T, ws: T, summ: kept},
        "advance": {run: T, ev: T, ws: T, snap: T, summ: kept},
        "record_next": {run: T, ev: T, ws: T, j1: T, snap: ANY, summ: kept},
        "park": {run: held, ev: held, ws: held, j1: held, snap: held, summ: held + R},
        "resume": {run: T, ev: T, ws: T, j1: T, snap: T, summ: kept},
        "complete": {run: T, ev: T, ws: T, snap: T, summ: kept},
        "finish": {run: T, ev: T, ws: T, j0: ANY, summ: kept},
        "recover": {run: ANY, ev: ANY, ws: ANY, j0: ANY, summ: ANY},
        "recover_fails": {run: ANY, ev: ANY, ws: ANY, j0: ANY, summ: ANY},
        "release": {run: T, ev: T, ws: ANY, j0: ANY, summ: kept},
        "expire": {run: ANY, ev: ANY, ws: ANY, j1: ANY, snap: ANY, summ: ANY},
    }
    return table[target]


def _global_keys(workflows: tuple[str, ...]) -> set[str]:
    """The keys keys.py names outside any run: those its argument-less functions build, and the
    interrupt indexes (of every order, and of each of ``workflows``), and the indexes of closed
    interrupts (of every status, and of each of ``workflows``)."""
    found = {keys.index(order, wf) for order in ("newest", "expiring") for wf in workflows}
    # each index's buckets (format 4: a directory, its companion hash, one bucket for these few members)
    found |= {f(ix) for ix in set(found) | {keys.runs()} for f in (keys.bucket_directory, keys.bucket_count)}
    found |= {keys.bucket(ix, 1) for ix in set(found) | {keys.runs()}}
    found |= {keys.closed_index(status, wf) for status in telemetry.CLOSED_STATUSES for wf in workflows}
    for name, fn in inspect.getmembers(keys, inspect.isfunction):
        required = [p for p in inspect.signature(fn).parameters.values() if p.default is p.empty]
        if fn.__module__ == keys.__name__ and not name.startswith("_") and not required:
            found.add(fn())
    return found


def _assert_only_global_keys_persist(client: redis.Redis, workflows: tuple[str, ...]) -> None:
    allowed = _global_keys(workflows)
    persistent = {k.decode() for k in client.keys("pw:*") if client.pttl(k) == -1}
    assert persistent <= allowed, f"keys without a TTL: {sorted(persistent - allowed)}"


@pytest.mark.parametrize("renewal", ["sentinel", "fresh"])
@pytest.mark.parametrize("server", ["redis", "fakeredis"])
@pytest.mark.parametrize("target", list(PATHS))
def test_each_transition_puts_every_key_it_writes_under_its_ttl(
    request: pytest.FixtureRequest, server: str, target: str, renewal: str
) -> None:
    """After each transition every key of the run has a TTL, and each key it writes has the one that
    protects it: the run's TTL, the pause's plus the grace for the records of a waiting run (the
    interrupt is in the run's hash), the retention for the summary; on Redis and on the in-process one.
    Records found with far more left than the transition needs (``sentinel``: set behind parkway's
    back, with the run hash's ``until`` as a script that set that TTL would have written it) are
    renewed to it, and ``until`` with them; records just renewed by the transition before (``fresh``) are left as they
    are, and a key the transition creates takes their TTL. The run hash's ``until`` is never later
    than its TTL (the clock of ``expire``'s scene has moved past the pause: it is not checked there)."""
    if server == "redis":
        redis_client: Any = request.getfixturevalue("redis_client")
    else:
        redis_client = embedded.client(embedded.server())
    scene = Scene(RedisStore(redis_client, LIMITS), _now)
    *before, transition = PATHS[target]
    for name in before:
        getattr(scene, name)()
    pattern = keys.run(scene.run_id).removesuffix(":run") + "*"
    if renewal == "sentinel":
        for key in redis_client.keys(pattern):
            redis_client.pexpire(key, SENTINEL)
        if redis_client.exists(keys.run(scene.run_id)):  # (create's scene has no run yet)
            # as a script that set that TTL would have written it: by a clock read before the script
            redis_client.hset(keys.run(scene.run_id), "until", _now() + SENTINEL - 1_000)
    getattr(scene, transition)()
    until, left = redis_client.hget(keys.run(scene.run_id), "until"), redis_client.pttl(keys.run(scene.run_id))
    if until is not None and target != "expire":
        assert int(until) <= _now() + left + 1, (until, left, target)  # now read after the PTTL: not before Redis's

    found = {k.decode(): redis_client.pttl(k) for k in redis_client.keys(pattern)}
    expected = _redis_ttls(target, scene)
    assert sorted(found) == sorted(expected)
    for key, ttl in found.items():
        assert ttl > 0, f"{key} has no TTL after {target}"
        want = expected[key]
        if want is not ANY:
            assert want - SLACK <= ttl <= _kept(want), f"{key} has PTTL {ttl} after {target}; expected {want}"
    _assert_only_global_keys_persist(redis_client, (WF,))


@pytest.mark.parametrize("server", ["redis", "fakeredis"])
def test_records_within_their_window_are_not_renewed(request: pytest.FixtureRequest, server: str) -> None:
    """A transition that finds the run's records with at least the TTL it needs left, and no more than
    that plus the slack, renews none of them (the write costs no PEXPIRE); below the TTL it renews all."""
    if server == "redis":
        redis_client: Any = request.getfixturevalue("redis_client")
    else:
        redis_client = embedded.client(embedded.server())
    scene = Scene(RedisStore(redis_client, LIMITS), _now)
    for name in ["create", "begin", "record_journal", "record_workflow"]:
        getattr(scene, name)()
    pattern = keys.run(scene.run_id).removesuffix(":run") + "*"
    within = _kept(T) - 100
    for key in redis_client.keys(pattern):
        redis_client.pexpire(key, within)
    scene.record_journal()
    ttls = {k.decode(): redis_client.pttl(k) for k in redis_client.keys(pattern) if not k.endswith(b":sum")}
    assert all(within - SLACK <= ttl <= within for ttl in ttls.values()), ttls
    for key in redis_client.keys(pattern):
        redis_client.pexpire(key, T - 1000)
    scene.record_journal()
    ttls = {k.decode(): redis_client.pttl(k) for k in redis_client.keys(pattern) if not k.endswith(b":sum")}
    assert all(_kept(T) - SLACK <= ttl <= _kept(T) for ttl in ttls.values()), ttls


def test_a_real_run_leaves_no_key_of_its_own_without_a_ttl(harness: Harness) -> None:
    """A run that writes workflow state, node state, an event and a pause, then completes, has every
    key under a TTL at each stop: while it waits, its records (the interrupt in the run's hash) live
    for the pause plus the grace, and no key of the interrupt's own is left."""
    client: Any = harness.pw.store.client  # the real Redis, or the in-process one

    run_id = harness.start_and_run(every_hook, {"ttl_ms": 30_000})
    pattern = keys.run(run_id).removesuffix(":run") + "*"
    grace = harness.settings.limits.expiry_grace_ms
    waiting = {k.decode(): client.pttl(k) for k in client.keys(pattern)}
    waiting.pop(keys.summary(run_id))
    assert keys.run(run_id) in waiting
    assert waiting and all(30_000 + grace - SLACK <= ttl <= _kept(30_000 + grace) for ttl in waiting.values()), waiting
    _assert_only_global_keys_persist(client, (every_hook.name,))

    assert harness.pw.resume(harness.token(run_id), selected="red").accepted
    harness.run_jobs()
    assert harness.pw.get_run(run_id).status is RunStatus.COMPLETED
    done = {k.decode(): client.pttl(k) for k in client.keys(pattern)}
    assert done and all(ttl > 0 for ttl in done.values()), done
    _assert_only_global_keys_persist(client, (every_hook.name,))


# --- 2. expired is not unknown once the records are gone (invariant 5) -------------------------


@pytest.fixture(params=["embedded", "redis"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_past_ttl_and_grace_a_run_reads_expired_and_one_never_seen_reads_unknown(
    request: pytest.FixtureRequest, kind: str
) -> None:
    """Once a waiting run's records are gone (its TTL and the grace past; an embedded reconciler
    that has not recorded its expiry yet keeps them until it does, and the grace again at most), get_run
    says expired and its token resumes expired, while a run that never existed is RunNotFound and
    its token unknown."""
    h = _harness(request, kind, limits=Limits(expiry_grace_ms=300))
    run_id = h.start_and_run(flows.one_choice, {"ttl_ms": 1000}, ttl_ms=1000)
    token, record = _interrupt_of(h, run_id)
    stranger_run, stranger_token, stranger_record = _stranger()
    _sleep_until(record.expires_at + 300 + 200)

    # the records are gone: only the summary is left
    wait_for(lambda: h.pw.store.read_events(run_id, "0", None, 10) == [], 5, "the run's records to go")
    run = h.pw.get_run(run_id)
    assert run.status is RunStatus.EXPIRED and run.interrupt is None
    assert h.pw.resume(token, selected="red").outcome is ResumeOutcome.EXPIRED
    assert h.pw.resume(token, selected="green").outcome is ResumeOutcome.EXPIRED  # nothing left to validate
    # a token another key signed, for the same run and request, learns nothing: unknown, not expired
    forged = tokens.mint(b"not the deployment's key" * 2, run_id, record.request_id)
    assert h.pw.resume(forged, selected="red").outcome is ResumeOutcome.UNKNOWN
    assert h.pw.cancel_interrupt(token).outcome is ResumeOutcome.EXPIRED
    assert h.pw.cancel(run_id).outcome is CancelOutcome.ALREADY_FINISHED
    assert h.pw.store.resume(run_id, _answer(record, tokens.hash_token(token))).outcome is ResumeOutcome.EXPIRED
    assert h.pw.list_interrupts().items == ()

    with pytest.raises(RunNotFound):
        h.pw.get_run(stranger_run)
    assert h.pw.resume(stranger_token, selected="red").outcome is ResumeOutcome.UNKNOWN
    with pytest.raises(RunNotFound):
        h.pw.cancel(stranger_run)
    answer = _answer(stranger_record, tokens.hash_token(stranger_token))
    assert h.pw.store.resume(stranger_run, answer).outcome is ResumeOutcome.UNKNOWN


def test_past_its_pause_ttl_an_invalid_answer_reads_expired(harness: Harness) -> None:
    """Past the pause's TTL but within the grace (records kept, the interrupt past its expiry), even an answer
    that would be refused reads expired: there is nothing left to validate it against."""
    run_id = harness.start_and_run(flows.one_choice, {"ttl_ms": 1000})
    token, record = _interrupt_of(harness, run_id)
    _sleep_until(record.expires_at + 100)
    assert harness.pw.store.read_events(run_id, "0", None, 10)  # the records are still there
    assert harness.pw.resume(token, selected="green").outcome is ResumeOutcome.EXPIRED
    assert harness.pw.resume(token, value=12).outcome is ResumeOutcome.EXPIRED
    assert harness.pw.resume(token, selected="red").outcome is ResumeOutcome.EXPIRED
    assert harness.pw.get_run(run_id).status in (RunStatus.WAITING, RunStatus.EXPIRED)  # until the reconciler's pass
    reconcile_once(harness.pw.store, harness.pw.backend.dispatcher)
    assert harness.pw.get_run(run_id).status is RunStatus.EXPIRED


def test_a_run_that_ends_after_the_retention_still_reads_its_end_once_its_records_go(
    request: pytest.FixtureRequest, kind: str
) -> None:
    """A run that completes later than the retention after its start reads completed, not an error
    or unknown, once its records are past their TTL."""
    h = _harness(request, kind, limits=Limits(expiry_grace_ms=300, retention_ms=1500))
    run_id = h.start_and_run(flows.one_choice, {"ttl_ms": 3000}, ttl_ms=1000)
    token, record = _interrupt_of(h, run_id)
    _sleep_until(record.created_at + 1600)  # the retention counted from the start has passed
    assert h.pw.resume(token, selected="red").accepted
    h.run_jobs()
    assert h.pw.get_run(run_id).status is RunStatus.COMPLETED
    time.sleep(1.2)  # the records' TTL (1000 ms) passes
    assert h.pw.store.read_events(run_id, "0", None, 10) == []
    assert h.pw.get_run(run_id).status is RunStatus.COMPLETED


def test_a_pause_longer_than_the_retention_still_reads_expired_once_its_records_go(
    request: pytest.FixtureRequest, kind: str
) -> None:
    """A pause whose TTL outlasts the retention, once recorded expired and past the grace (and the
    renewal's slack), reads expired, not an error or unknown."""
    h = _harness(request, kind, limits=Limits(expiry_grace_ms=400, retention_ms=1000))
    run_id = h.start_and_run(flows.one_choice, {"ttl_ms": 1500}, ttl_ms=1000)
    token, record = _interrupt_of(h, run_id)
    _sleep_until(record.expires_at + 50)
    reconcile_once(h.pw.store, h.pw.backend.dispatcher)  # what a worker's reconciler does
    _sleep_until(record.created_at + _kept(1500 + 400) + 200)
    assert h.pw.store.read_events(run_id, "0", None, 10) == []
    assert h.pw.get_run(run_id).status is RunStatus.EXPIRED
    assert h.pw.resume(token, selected="red").outcome is ResumeOutcome.EXPIRED


# --- 3. an interrupt past its expiry (invariants 2, 3) -------------------------------------------


def test_a_resume_that_finds_the_interrupt_past_its_expiry_says_expired(harness: Harness) -> None:
    """A resume that looked the token up while it was pending, and finds it past its expiry when it
    commits (expired in between) says expired, not already_resolved, and changes nothing."""
    run_id = harness.start_and_run(flows.one_choice)
    token, record = _pending_lookup(harness, run_id)
    fence, events = _fence(harness, run_id), _event_types(harness, run_id)
    _lapse(harness, run_id)

    commit = harness.pw.store.resume(run_id, _answer(record, tokens.hash_token(token)))
    assert commit.outcome is ResumeOutcome.EXPIRED and commit.request_id == record.request_id
    assert _fence(harness, run_id) == fence and _event_types(harness, run_id) == events
    assert harness.pw.store.get_run(run_id, _now()).status is RunStatus.WAITING  # type: ignore[union-attr]
    assert harness.pw.resume(token, selected="red").outcome is ResumeOutcome.EXPIRED


def test_a_resume_of_a_resolved_interrupt_says_already_resolved_even_at_the_store(harness: Harness) -> None:
    """The other side of the same branch: a second commit for an answered interrupt is already_resolved
    (another answer; the same one again reads accepted, a retry)."""
    run_id = harness.start_and_run(flows.one_choice)
    token, record = _pending_lookup(harness, run_id)
    answer = _answer(record, tokens.hash_token(token))
    assert harness.pw.store.resume(run_id, answer).outcome is ResumeOutcome.ACCEPTED
    other = _answer(record, tokens.hash_token(token), "blue")
    assert harness.pw.store.resume(run_id, other).outcome is ResumeOutcome.ALREADY_RESOLVED
    assert harness.pw.store.resume(run_id, answer).outcome is ResumeOutcome.ACCEPTED


def test_a_token_past_its_expiry_reads_expired_before_its_answer_is_checked(harness: Harness) -> None:
    """A valid token whose interrupt is past its expiry reads expired, even with an answer that would
    be refused: lookup says expired before anything validates the answer."""
    run_id = harness.start_and_run(flows.one_choice)
    token, record = _pending_lookup(harness, run_id)
    _lapse(harness, run_id)
    assert harness.pw.store.lookup(run_id, tokens.hash_token(token), _now()).outcome == "expired"
    assert harness.pw.resume(token, selected="green").outcome is ResumeOutcome.EXPIRED
    assert harness.pw.resume(token, selected="red").outcome is ResumeOutcome.EXPIRED
    assert harness.pw.cancel_interrupt(token).outcome is ResumeOutcome.EXPIRED


def test_before_its_expiry_an_invalid_answer_is_refused(harness: Harness) -> None:
    """The control for the test above: the same invalid answer on a live token raises InvalidAnswer."""
    run_id = harness.start_and_run(flows.one_choice)
    with pytest.raises(InvalidAnswer):
        harness.pw.resume(harness.token(run_id), selected="green")


def test_retention_is_a_setting(redis_url: str, redis_client: redis.Redis, closing: Closing) -> None:
    """PARKWAY_RETENTION_MS sets how long a run's summary outlives its records (7 days by default)."""
    assert Settings.from_env({}).limits.retention_ms == 7 * 24 * 3600 * 1000
    settings = Settings.from_env({"PARKWAY_RETENTION_MS": "5000"}, redis_url=redis_url, secret=SECRET)
    assert settings.limits == Limits(retention_ms=5000)
    run_id = closing(Parkway(settings)).start(flows.one_choice, {})
    records, summary = redis_client.pttl(keys.run(run_id)), redis_client.pttl(keys.summary(run_id))
    assert 0 < records < summary <= records + 5000 and summary >= records + 4000
    with pytest.raises(ConfigError):
        Settings.from_env({"PARKWAY_RETENTION_MS": "soon"})
