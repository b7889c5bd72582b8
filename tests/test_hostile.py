"""Hostile input: arbitrary payloads at resume and the parser, garbage in Redis and in the queue."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from parkway import ParkwayError, ResumeOutcome, RunStatus, parse_resume_metadata
from parkway.adapters.redis import keys
from parkway.errors import MalformedResume
from tests import flows
from tests.conftest import Closing, Harness

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=50),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=20,
)


@given(json_values)
@settings(max_examples=300, deadline=None)
def test_the_parser_accepts_or_refuses_with_a_parkway_error(payload: Any) -> None:
    """Whatever JSON arrives as metadata, the parser returns ResumeArgs or raises MalformedResume."""
    try:
        args = parse_resume_metadata(payload)
    except MalformedResume:
        return
    assert isinstance(args.token, str) and args.token


def _strings(value: Any) -> set[str]:
    """Every string anywhere in a JSON value (keys included)."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*(_strings(k) | _strings(v) for k, v in value.items()))
    if isinstance(value, list):
        return set().union(*(_strings(v) for v in value))
    return set()


@given(
    st.fixed_dictionaries(
        {"token": st.text(max_size=120), "requestId": st.just("int_1")},
        optional={"selected": json_values, "value": json_values},
    )
)
@example({"token": "t", "requestId": "int_1", "selected": " padded "})
@example({"token": "t", "requestId": "int_1", "selected": ["b", "a"]})
@example({"token": "t", "requestId": "int_1", "selected": {"choices": [{"id": "a"}, "b"]}})
@example({"token": "t", "requestId": "int_1", "value": {"k": [1, "x", None]}})
@example({"token": "t", "requestId": "int_1", "value": None})
@example({"token": "", "requestId": "int_1", "value": "x"})
@settings(max_examples=200, deadline=None)
def test_resume_metadata_shapes_around_a_real_token(payload: dict[str, Any]) -> None:
    """Shapes built around the resume object parse to exactly the token, request id and answer they
    carry, or raise MalformedResume for a reason: no token, not exactly one answer, or a selected
    that names no ids."""
    answers = [k for k in ("selected", "value") if k in payload]
    try:
        args = parse_resume_metadata({"metadata": {"resume": payload}})
    except MalformedResume:
        assert not payload["token"] or answers != ["value"], payload
        return
    assert (args.token, args.request_id) == (payload["token"], "int_1") and len(answers) == 1
    if answers == ["value"]:
        assert args.value == payload["value"] and args.selected is None
        return
    selected = payload["selected"]
    assert args.value is None and args.selected is not None
    assert all(isinstance(i, str) for i in args.selected) and set(args.selected) <= _strings(selected)
    if isinstance(selected, str):
        assert args.selected == [selected]
    elif isinstance(selected, list) and all(isinstance(i, str) for i in selected):
        assert args.selected == selected


@pytest.mark.parametrize("kind", ["embedded", "redis"])
def test_arbitrary_answers_never_lose_the_interrupt(request: pytest.FixtureRequest, kind: str) -> None:
    """Hundreds of arbitrary answers: each is accepted or refused with a parkway error; the
    interrupt is lost only by the one accepted answer, after which every resume is already_resolved."""
    harness = _harness(request, kind)
    run_id = harness.start_and_run(flows.one_choice)
    token = harness.token(run_id)
    request_id = harness.pw.list_interrupts(run_id=run_id).items[0].request_id
    accepted: list[Any] = []

    @given(selected=json_values, value=json_values, use_value=st.booleans())
    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    def throw(selected: Any, value: Any, use_value: bool) -> None:
        kwargs = {"value": value} if use_value else {"selected": selected}
        try:
            result = harness.pw.resume(token, **kwargs)
        except ParkwayError:
            # refused: only while the interrupt is open, and it stays open
            assert not accepted, f"{kwargs} raised after {accepted[0]} was accepted"
            assert harness.pw.get_run(run_id).status is RunStatus.WAITING
            assert [i.request_id for i in harness.pw.list_interrupts(run_id=run_id).items] == [request_id]
            return
        if accepted:
            assert result.outcome is ResumeOutcome.ALREADY_RESOLVED, (kwargs, result.outcome)
        else:
            assert result.accepted, (kwargs, result.outcome)
            accepted.append(kwargs)

    throw()  # while the interrupt is open (arbitrary answers are rarely valid ones)
    if not accepted:
        assert harness.pw.resume(token, selected="red").accepted
        accepted.append({"selected": "red"})
    throw()  # once it is answered: every resume, valid or not, is already_resolved
    harness.run_jobs()
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.COMPLETED and run.output["picked"] in ("red", "blue")
    assert [e.type for e in harness.pw.stream(run_id, timeout=5)].count("interrupt.resumed") == 1


def _harness(request: pytest.FixtureRequest, kind: str) -> Harness:
    from parkway import Parkway, Settings
    from tests.conftest import SECRET

    if kind == "embedded":
        s = Settings(secret=SECRET)
        pw = Parkway(s)
        request.addfinalizer(pw.close)
        return Harness("embedded", pw, s)
    client = request.getfixturevalue("redis_client")
    s = Settings(redis_url=request.getfixturevalue("redis_url"), secret=SECRET)
    pw = Parkway(s)
    request.addfinalizer(pw.close)
    return Harness("redis", pw, s, client)


def _forge(token: str, at: int, text: str) -> str:
    """``token`` with the character at ``at`` (modulo its length) replaced by ``text``."""
    i = at % len(token)
    return token[:i] + text + token[i + 1 :]


def test_arbitrary_tokens_are_refused_or_unknown(closing: Closing) -> None:
    """Random strings, and real tokens with a character changed, are never accepted (with a valid
    answer): they raise MalformedResume or read unknown, and the runs they aim at keep waiting."""
    from parkway import Parkway, Settings
    from tests.conftest import SECRET

    pw = closing(Parkway(Settings(secret=SECRET)))
    runs = [pw.start(flows.one_choice, {}) for _ in range(3)]
    pw.drain()
    real = [pw.list_interrupts(run_id=r, include_tokens=True).items[0].resume_token or "" for r in runs]
    forged = st.builds(_forge, st.sampled_from(real), st.integers(0, 200), st.text(min_size=0, max_size=2))

    @given(st.text(max_size=200) | forged)
    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    def throw(token: str) -> None:
        assume(token not in real)
        try:
            outcome = pw.resume(token, selected="red").outcome
        except MalformedResume:
            return
        assert outcome is ResumeOutcome.UNKNOWN, token

    try:
        throw()
        for run_id, token in zip(runs, real, strict=True):
            assert pw.get_run(run_id).status is RunStatus.WAITING
            assert pw.resume(token, selected="red").accepted
    finally:
        pw.close()


def test_garbage_in_a_run_record_fails_that_run_not_the_worker(harness: Harness) -> None:
    """Malformed msgpack in a run's data is a clear error for that run; other runs go on."""
    if harness.connection is None:
        pytest.skip("writes garbage into Redis")
    bad = harness.pw.start(flows.one_choice, {})
    good = harness.pw.start(flows.one_choice, {})
    harness.connection.hset(keys.run(bad), "data", b"\xc1\xff garbage")
    harness.run_jobs()
    run = harness.pw.store.get_run(good, 0)
    assert run is not None and run.status is RunStatus.WAITING
    raw = harness.connection.hgetall(keys.run(bad))
    assert raw[b"status"] == b"failed"
    assert b"cannot be decoded" in raw[b"error"]


def test_garbage_in_the_queue_does_not_take_the_worker_down(harness: Harness) -> None:
    """A job whose payload is not msgpack fails in RQ; the worker carries on with the next job."""
    if harness.connection is None:
        pytest.skip("writes garbage into Redis")
    from rq import Queue

    from parkway.workers.serializer import MsgpackSerializer

    queue = Queue(harness.settings.queue, connection=harness.connection, serializer=MsgpackSerializer)
    harness.connection.hset("rq:job:junk", mapping={"data": b"\x00\xff\xfe not msgpack", "status": "queued",
                                                     "created_at": "2026-01-01T00:00:00.000000Z"})
    harness.connection.rpush(queue.key, "junk")
    run_id = harness.pw.start(flows.one_choice, {})
    harness.run_jobs()
    assert harness.pw.get_run(run_id).status is RunStatus.WAITING


def test_corrupt_event_json_in_the_stream_is_reported(harness: Harness) -> None:
    """An event entry that is not msgpack is reported as CorruptRecord, not a crash of the reader."""
    if harness.connection is None:
        pytest.skip("writes garbage into Redis")
    from parkway.errors import CorruptRecord

    run_id = harness.start_and_run(flows.one_choice)
    harness.connection.xadd(keys.events(run_id), {"t": "data", "d": json.dumps({"x": 1}).encode() + b"\xc1"})
    with pytest.raises(CorruptRecord):
        list(harness.pw.stream(run_id, timeout=2))
