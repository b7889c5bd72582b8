"""Hostile input: arbitrary payloads at resume and the parser, garbage in Redis and in the queue."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parkway import MalformedResume, ParkwayError, RunStatus, parse_resume_metadata
from parkway.adapters.redis import keys
from tests import flows
from tests.conftest import Harness

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


@given(st.fixed_dictionaries({"token": st.text(max_size=120)}, optional={"selected": json_values,
                                                                         "value": json_values}))
@settings(max_examples=200, deadline=None)
def test_resume_metadata_shapes_around_a_real_token(payload: dict[str, Any]) -> None:
    """Shapes built around the resume object never raise anything but parkway errors."""
    try:
        parse_resume_metadata({"metadata": {"resume": payload}})
    except ParkwayError:
        pass


@pytest.mark.parametrize("kind", ["embedded", "redis"])
def test_arbitrary_answers_never_lose_the_interrupt(request: pytest.FixtureRequest, kind: str) -> None:
    """Hundreds of arbitrary answers: each is accepted or refused with a parkway error; the
    interrupt is lost only by the one accepted answer."""
    harness = _harness(request, kind)
    run_id = harness.start_and_run(flows.one_choice)
    token = harness.token(run_id)
    accepted: list[Any] = []

    @given(selected=json_values, value=json_values, use_value=st.booleans())
    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    def throw(selected: Any, value: Any, use_value: bool) -> None:
        kwargs = {"value": value} if use_value else {"selected": selected}
        try:
            result = harness.pw.resume(token, **kwargs)
        except ParkwayError:
            assert accepted or harness.pw.get_run(run_id).status is RunStatus.WAITING
            return
        if result.accepted:
            accepted.append(kwargs)

    throw()
    assert len(accepted) <= 1
    if not accepted:
        assert harness.pw.resume(token, selected="red").accepted


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
    return Harness("redis", Parkway(s), s, client)


@given(st.text(max_size=200))
@settings(max_examples=200, deadline=None)
def test_arbitrary_tokens_are_refused_or_unknown(token: str) -> None:
    """A random string is never accepted as a token of a run it does not belong to."""
    from parkway import Parkway, ResumeOutcome, Settings
    from tests.conftest import SECRET

    pw = _embedded_client(Parkway, Settings, SECRET)
    try:
        outcome = pw.resume(token, selected="x").outcome
    except ParkwayError:
        return
    assert outcome is ResumeOutcome.UNKNOWN


_embedded: dict[str, Any] = {}


def _embedded_client(parkway_cls: Any, settings_cls: Any, secret: str) -> Any:
    if "pw" not in _embedded:
        _embedded["pw"] = parkway_cls(settings_cls(secret=secret))
    return _embedded["pw"]


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
    from parkway import CorruptRecord

    run_id = harness.start_and_run(flows.one_choice)
    harness.connection.xadd(keys.events(run_id), {"t": "data", "d": json.dumps({"x": 1}).encode() + b"\xc1"})
    with pytest.raises(CorruptRecord):
        list(harness.pw.stream(run_id, timeout=2))
