"""Interrupt lifecycle telemetry: each interrupt's record, how it reads, what capture keeps out of it,
and listings of interrupts by status."""

from __future__ import annotations

import time
from typing import Any

import pytest

from parkway import (
    InterruptNotFound,
    InvalidAnswer,
    Parkway,
    ResumeOutcome,
    RunStatus,
    Settings,
    ValidationError,
    Workflow,
)
from parkway.adapters.redis import keys, layout
from parkway.errors import InvalidId
from parkway.runtime import telemetry, tokens
from parkway.workers.reconciler import reconcile_once
from tests import flows, telemetry_flows
from tests.conftest import SECRET, Harness


def _pending(harness: Harness, run_id: str) -> tuple[str, str]:
    """The run's pending interrupt: its request id and token."""
    item = harness.pw.list_interrupts(run_id=run_id, include_tokens=True).items[0]
    assert item.resume_token is not None
    return item.request_id, item.resume_token


def _expire(harness: Harness, run_id: str) -> None:
    event = harness.interrupt_event(run_id)
    time.sleep(max(0.0, event["expiresAt"] / 1000 - time.time()) + 0.1)
    reconcile_once(harness.pw.store, harness.pw.backend.dispatcher)
    harness.run_jobs()


def test_a_minted_request_id_carries_its_run_id_and_reads_by_itself(harness: Harness) -> None:
    """A request id parkway mints is i<n>_<nonce>_<run id>: get_interrupt finds it with no run id given,
    pending, with its creation, presentation and option count."""
    run_id = harness.start_and_run(flows.one_choice)
    request_id, _ = _pending(harness, run_id)
    assert request_id.startswith("i") and request_id.endswith("_" + run_id)
    assert telemetry.run_of_request(request_id) == run_id
    got = harness.pw.get_interrupt(request_id)
    life = got.lifecycle
    assert got.run_id == run_id and got.request is not None and life is not None
    assert (life.status, life.outcome, life.presentation, life.option_count) == ("pending", None, "static-options", 2)
    assert life.created_at == got.created_at and life.failures == 0 and life.ended_at is None


def test_a_resumed_interrupt_records_its_end_wait_responder_and_answer(harness: Harness) -> None:
    """Resumed: status resolved, outcome resumed, when, the wait from creation, who, the answer."""
    run_id = harness.start_and_run(flows.one_choice)
    request_id, token = _pending(harness, run_id)
    before = int(time.time() * 1000)
    assert harness.pw.resume(token, selected="red", responder="ana@example.com").accepted
    harness.run_jobs()
    life = harness.pw.get_interrupt(request_id).lifecycle
    assert life is not None
    assert (life.status, life.outcome, life.responder, life.answer) == ("resolved", "resumed", "ana@example.com", "red")
    assert life.ended_at is not None and life.ended_at >= before
    assert life.wait_ms == life.ended_at - life.created_at


def test_a_cancelled_interrupt_records_who_and_why(harness: Harness) -> None:
    """Cancelled: status and outcome cancelled, the responder and the reason."""
    run_id = harness.start_and_run(flows.denial)
    request_id, token = _pending(harness, run_id)
    assert harness.pw.cancel_interrupt(token, reason="not today", responder="bo").accepted
    harness.run_jobs()
    life = harness.pw.get_interrupt(request_id).lifecycle
    assert life is not None and life.ended_at is not None and life.wait_ms is not None
    assert (life.status, life.outcome, life.responder, life.reason) == ("cancelled", "cancelled", "bo", "not today")


def test_an_expired_interrupt_records_its_expiry_and_the_policy(harness: Harness) -> None:
    """Expired by the reconciler: status and outcome expired, the wait at least the TTL; a cancel policy
    is named as the reason."""
    for policy, reason in ((None, None), ("cancel", "cancel")):
        run_id = harness.start_and_run(flows.expiring, {"policy": policy})
        request_id = harness.interrupt_event(run_id)["requestId"]
        _expire(harness, run_id)
        life = harness.pw.get_interrupt(request_id).lifecycle
        assert life is not None and life.wait_ms is not None and life.wait_ms >= 1000
        assert (life.status, life.outcome, life.reason) == ("expired", "expired", reason)


def test_a_refused_answer_is_counted_and_the_same_token_then_accepts(harness: Harness) -> None:
    """An answer that does not fit is refused and leaves the interrupt open: its record counts the
    refusal with the reason and the time; the same token then accepts, and the count stays."""
    run_id = harness.start_and_run(flows.one_choice)
    request_id, token = _pending(harness, run_id)
    for _ in range(2):
        with pytest.raises(InvalidAnswer):
            harness.pw.resume(token, selected="green")
    life = harness.pw.get_interrupt(request_id).lifecycle
    assert life is not None and life.status == "pending" and life.outcome is None
    assert life.failures == 2 and life.last_failure and "green" in life.last_failure and life.last_failure_at
    assert harness.pw.resume(token, selected="blue").accepted
    harness.run_jobs()
    life = harness.pw.get_interrupt(request_id).lifecycle
    assert life is not None and (life.outcome, life.failures, life.answer) == ("resumed", 2, "blue")



def test_a_refusal_racing_the_answer_counts_nothing_once_the_interrupt_is_closed(harness: Harness) -> None:
    """A refusal's count lands only on the token's open interrupt: one committed after the answer
    won (the client read the interrupt open, then lost the race) leaves the record as it ended."""
    from parkway.runtime.clock import now_ms

    run_id = harness.start_and_run(flows.one_choice)
    request_id, token = _pending(harness, run_id)
    assert harness.pw.resume(token, selected="blue").accepted
    token_hash = tokens.hash_token(token)
    failure = telemetry.failure(now_ms(), "InvalidAnswer", "late", ("input", "output"))
    assert harness.pw.store.refuse(run_id, token_hash, request_id, failure, now_ms()) == 0
    assert harness.pw.store.refuse(run_id, token_hash, "i9_zzzzz_" + run_id, failure, now_ms()) == 0
    life = harness.pw.get_interrupt(request_id).lifecycle
    assert life is not None and life.failures == 0 and life.last_failure is None


def test_a_contract_violation_is_counted_and_the_record_names_the_contract(harness: Harness) -> None:
    """A contract interrupt's record carries its schema id and version and the contract presentation;
    a violating answer counts as refused; a valid one then resumes it."""
    run_id = harness.start_and_run(flows.contracted, {"team": "data"})
    request_id, token = _pending(harness, run_id)
    with pytest.raises(InvalidAnswer):
        harness.pw.resume(token, value={"job_id": "nope"})
    assert harness.pw.resume(token, value={"job_id": "job-7"}).accepted
    harness.run_jobs()
    life = harness.pw.get_interrupt(request_id).lifecycle
    assert life is not None
    assert (life.presentation, life.option_count, life.schema_id, life.schema_version) == ("contract", 0, "pick-job", 2)
    assert (life.failures, life.outcome, life.answer) == (1, "resumed", {"job_id": "job-7", "note": None})


def test_each_presentation_and_its_option_count_is_recorded(harness: Harness) -> None:
    """static-options with its options counted, dynamic-picker with 0 (and its schema id), freeform 0."""
    run_id = harness.start_and_run(flows.kinds)
    first, token = _pending(harness, run_id)
    assert harness.pw.resume(token, selected=["product"]).accepted
    harness.run_jobs()
    second, _ = _pending(harness, run_id)
    text_run = harness.start_and_run(telemetry_flows.free)
    third, _ = _pending(harness, text_run)
    seen = []
    for request_id in (first, second, third):
        life = harness.pw.get_interrupt(request_id).lifecycle
        assert life is not None
        seen.append((life.presentation, life.option_count, life.schema_id))
    assert seen == [("static-options", 2, None), ("dynamic-picker", 0, "jobs"), ("freeform", 0, None)]


def test_an_accepted_answer_whose_replay_fails_the_run_is_resume_failed(harness: Harness) -> None:
    """The answer is accepted, then the node's replay with it fails the run: the outcome is
    resume_failed with the error as the reason; the status stays resolved."""
    run_id = harness.start_and_run(telemetry_flows.brittle)
    request_id, token = _pending(harness, run_id)
    assert harness.pw.resume(token, selected="go").accepted
    harness.run_jobs()
    assert harness.pw.get_run(run_id).status is RunStatus.FAILED
    life = harness.pw.get_interrupt(request_id).lifecycle
    assert life is not None and (life.status, life.outcome) == ("resolved", "resume_failed")
    assert life.reason == "cannot handle go" and life.ended_at is not None


def test_a_run_failing_after_its_node_moved_on_leaves_the_outcome_resumed(harness: Harness) -> None:
    """Only the replay that received the answer can make it resume_failed: a later node failing does not."""
    run_id = harness.start_and_run(flows.two_questions)
    first, token = _pending(harness, run_id)
    assert harness.pw.resume(token, selected="red").accepted
    harness.run_jobs()
    _, second = _pending(harness, run_id)  # the same activation paused again: the first's replay went on
    harness.pw.cancel(run_id)
    life = harness.pw.get_interrupt(first).lifecycle
    assert life is not None and life.outcome == "resumed"
    assert second


def test_the_record_outlives_the_run_for_the_retention(harness: Harness) -> None:
    """After the run's TTL its records are gone, and get_interrupt still answers from the lifecycle
    record in its summary (request and answer captured); the listing by status still shows it."""
    run_id = harness.pw.start(flows.one_choice, {"ttl_ms": 30_000}, ttl_ms=1000)  # the run's TTL: 1 s once answered
    harness.run_jobs()
    request_id, token = _pending(harness, run_id)
    assert harness.pw.resume(token, selected="blue", responder="cy").accepted
    harness.run_jobs()
    time.sleep(1.3)
    client = harness.pw.store.client  # type: ignore[attr-defined]
    assert not client.exists(keys.run(run_id)) and client.exists(keys.summary(run_id))
    got = harness.pw.get_interrupt(request_id)
    assert got.lifecycle is not None and got.request is not None
    assert (got.lifecycle.status, got.lifecycle.outcome, got.lifecycle.answer) == ("resolved", "resumed", "blue")
    assert (got.node, got.step, got.workflow, got.request.question) == ("choose", 0, "one_choice", "Pick a color")
    listed = harness.pw.list_interrupts(status="resolved", workflow="one_choice").items
    assert [i.request_id for i in listed] == [request_id]


def _every_value(client: Any, run_id: str) -> dict[str, list[bytes]]:
    """Every field name and value of every key of the run's hash tag, by key."""
    out: dict[str, list[bytes]] = {}
    for key in client.keys(keys.run(run_id).rsplit(":", 1)[0] + ":*"):
        name, kind = key.decode(), client.type(key).decode()
        if kind == "hash":
            out[name] = [x for pair in client.hgetall(key).items() for x in pair]
        elif kind == "stream":
            out[name] = [x for _, fields in client.xrange(key) for pair in fields.items() for x in pair]
        elif kind == "string":
            out[name] = [client.get(key)]
        else:
            raise AssertionError(f"{name} is a {kind}")
    return out


def test_capture_off_leaves_no_content_in_the_lifecycle_records(harness: Harness) -> None:
    """capture_content=(): after reading every key of the run, no lifecycle field of its summary holds
    the question, an option's label or an answer, while it was open or after; nor does get_interrupt's
    or a listing's output of the ended interrupts. The run's own records keep what they need (the open
    request, the journal's answers) under the run's TTL."""
    client = harness.pw.store.client  # type: ignore[attr-defined]
    run_id = harness.start_and_run(telemetry_flows.secret)
    code_id, token = _pending(harness, run_id)
    content = [telemetry_flows.SECRET_QUESTION.encode(), b"Zeta-7731", b"OPEN-SESAME-99", b"Quartz-Lantern"]

    def lifecycle_values() -> list[bytes]:
        summary = client.hgetall(keys.summary(run_id))
        return [v for f, v in summary.items() if f.split(b":")[0] in (b"i", b"e", b"f", b"fl", b"x")]

    def leaks(values: list[bytes]) -> list[bytes]:
        return [c for c in content for v in values if c in v]

    everything = _every_value(client, run_id)
    run = client.hgetall(keys.run(run_id))
    record = b"".join(run[layout.record_field(i).encode()] for i in range(int(run[b"rn"])))  # its 64-byte parts
    assert leaks([record]), "the open request lives in the run's record (for validation)"
    assert lifecycle_values() == []  # while open, its record is the run's (the summary gets it at the end)
    with pytest.raises(InvalidAnswer):
        harness.pw.resume(token, selected=["OPEN-SESAME-99", "x"])
    assert lifecycle_values() and not leaks(lifecycle_values())  # the refusal, by its type only
    assert harness.pw.resume(token, value="OPEN-SESAME-99", responder="dee").accepted
    harness.run_jobs()
    door_id, door_token = _pending(harness, run_id)
    everything = _every_value(client, run_id)
    assert leaks(everything[keys.journal(run_id, 0)]), "the journal keeps the answer (the replay needs it)"
    assert lifecycle_values() and not leaks(lifecycle_values())
    assert harness.pw.resume(door_token, selected="opt-q").accepted
    harness.run_jobs()
    assert harness.pw.get_run(run_id).output["code"] == "OPEN-SESAME-99"
    everything = _every_value(client, run_id)
    assert not leaks(everything[keys.summary(run_id)])  # the whole summary: what outlives the run
    assert lifecycle_values() and not leaks(lifecycle_values())
    for request_id in (code_id, door_id):
        got = harness.pw.get_interrupt(request_id)
        assert got.request is None and got.lifecycle is not None and got.lifecycle.answer is None
        assert got.lifecycle.outcome == "resumed" and got.lifecycle.responder in ("dee", None)
        assert not leaks([got.model_dump_json().encode()])
    life = harness.pw.get_interrupt(code_id).lifecycle
    assert life is not None and life.failures == 1 and life.last_failure == "InvalidAnswer"
    listed = harness.pw.list_interrupts(status="resolved", workflow="secret_ask")
    assert len(listed.items) == 2 and not leaks([listed.model_dump_json().encode()])


def test_capture_per_interrupt_overrides_the_workflows(harness: Harness) -> None:
    """use_interrupt(capture_content=("input",)) keeps the request and not the answer."""
    run_id = harness.start_and_run(telemetry_flows.input_only)
    request_id, token = _pending(harness, run_id)
    assert harness.pw.resume(token, value="private words").accepted
    harness.run_jobs()
    got = harness.pw.get_interrupt(request_id)
    assert got.lifecycle is not None and got.lifecycle.capture == ("input",)
    assert got.request is not None and got.request.question == "A note?" and got.lifecycle.answer is None
    assert "private words" not in got.model_dump_json()


def test_listings_by_status_page_newest_end_first_by_workflow(harness: Harness) -> None:
    """Five resolved, one cancelled, one expired: each status lists its own, newest end first, two at
    a time with cursors, each once; the workflow filter holds; pending stays the default."""
    resolved = []
    for _ in range(5):
        run_id = harness.start_and_run(flows.one_choice)
        request_id, token = _pending(harness, run_id)
        assert harness.pw.resume(token, selected="red").accepted
        resolved.append(request_id)
        time.sleep(0.002)  # distinct end times
    harness.run_jobs()
    cancel_run = harness.start_and_run(flows.denial)
    cancelled, token = _pending(harness, cancel_run)
    harness.pw.cancel_interrupt(token)
    expire_run = harness.start_and_run(flows.expiring, {"policy": None})
    expired = harness.interrupt_event(expire_run)["requestId"]
    pending_run = harness.start_and_run(flows.one_choice)
    _expire(harness, expire_run)
    seen, cursor = [], None
    while True:
        page = harness.pw.list_interrupts(status="resolved", limit=2, cursor=cursor)
        seen += [i.request_id for i in page.items]
        assert all(i.lifecycle and i.lifecycle.status == "resolved" for i in page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == resolved[::-1]
    assert [i.request_id for i in harness.pw.list_interrupts(status="cancelled").items] == [cancelled]
    assert [i.request_id for i in harness.pw.list_interrupts(status="expired").items] == [expired]
    assert harness.pw.list_interrupts(status="resolved", workflow="denial").items == ()
    assert [i.run_id for i in harness.pw.list_interrupts().items] == [pending_run]
    by_run = harness.pw.list_interrupts(status="resolved", run_id=telemetry.run_of_request(resolved[0]))
    assert [i.request_id for i in by_run.items] == [resolved[0]]


def test_closed_indexes_are_pruned_past_the_retention(redis_url: str, redis_client: Any) -> None:
    """A member older than the retention is left out of listings and removed by the reconciler's next
    pass (the scripts that add to a closed index do not prune it)."""
    from parkway.adapters.limits import Limits

    settings = Settings(redis_url=redis_url, secret=SECRET, limits=Limits(retention_ms=1000))
    with Parkway(settings) as pw:
        harness = Harness("redis", pw, settings, redis_client)
        first = harness.start_and_run(flows.one_choice)
        first_req, token = _pending(harness, first)
        assert pw.resume(token, selected="red").accepted
        time.sleep(1.1)
        assert pw.list_interrupts(status="resolved").items == ()
        second = harness.start_and_run(flows.one_choice)
        second_req, token = _pending(harness, second)
        assert pw.resume(token, selected="red").accepted
        assert [i.request_id for i in pw.list_interrupts(status="resolved").items] == [second_req]
        assert redis_client.zcard(keys.closed_index("resolved", "one_choice")) == 2
        reconcile_once(pw.store, pw.backend.dispatcher)
        members = redis_client.zrange(keys.closed_index("resolved", "one_choice"), 0, -1)
        assert len(members) == 1 and members[0].endswith(second_req.encode())
        assert first_req != second_req


def test_bad_input_gets_clear_errors(harness: Harness) -> None:
    """A bad status, order or cursor, a request id that is no id, one without its run id, one that is
    unknown: each a clear error, nothing changed."""
    with pytest.raises(ValidationError, match="status must be"):
        harness.pw.list_interrupts(status="done")
    with pytest.raises(ValidationError, match="newest first"):
        harness.pw.list_interrupts(status="resolved", order="expiring")
    with pytest.raises(ValidationError, match="invalid cursor"):
        harness.pw.list_interrupts(status="expired", cursor="r.123")
    with pytest.raises(InvalidId):
        harness.pw.get_interrupt("i1_abcde_run x")
    with pytest.raises(ValidationError, match="pass run_id"):
        harness.pw.get_interrupt("int_" + "ab" * 12)
    with pytest.raises(InterruptNotFound):
        harness.pw.get_interrupt("i9_abcde_run_missing")
    with pytest.raises(InterruptNotFound):
        harness.pw.get_interrupt("int_" + "ab" * 12, run_id="run_missing")


def test_a_capture_setting_that_is_not_one_is_refused() -> None:
    """capture_content takes a tuple of "input" and "output": a lone string or another word is refused."""
    from parkway import WorkflowError

    with pytest.raises(WorkflowError, match="capture_content"):
        Workflow("bad_capture", capture_content="input")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="input"):
        telemetry.check_capture(("input", "content"))


def test_an_id_that_would_be_too_long_falls_back_and_reads_with_its_run_id(harness: Harness) -> None:
    """A run id too long to carry in a request id: the interrupt parks under a random int_<hex> id,
    and get_interrupt reads it given the run id."""
    run_id = harness.pw.start(flows.one_choice, {}, run_id="r" * 60)
    harness.run_jobs()
    request_id, token = _pending(harness, run_id)
    assert telemetry.run_of_request(request_id) is None
    assert harness.pw.resume(token, selected="red").accepted
    harness.run_jobs()
    life = harness.pw.get_interrupt(request_id, run_id=run_id).lifecycle
    assert life is not None and life.outcome == "resumed"
    assert [i.request_id for i in harness.pw.list_interrupts(status="resolved").items] == [request_id]


def test_a_reused_run_id_mints_new_request_ids_and_old_tokens_answer_nothing(harness: Harness) -> None:
    """Once a run's records and summary are gone its id may be used again: the new run's interrupt
    gets another request id (the nonce), so the old run's token reads unknown, not accepted."""
    client = harness.pw.store.client  # type: ignore[attr-defined]
    run_id = harness.start_and_run(flows.one_choice, run_id="reused")
    first, old_token = _pending(harness, run_id)
    client.delete(*client.keys(keys.run(run_id).rsplit(":", 1)[0] + ":*"))  # past the retention
    assert harness.start_and_run(flows.one_choice, run_id="reused") == run_id
    second, _ = _pending(harness, run_id)
    assert first != second and telemetry.run_of_request(second) == run_id
    assert harness.pw.resume(old_token, selected="red").outcome is ResumeOutcome.UNKNOWN


def test_the_summary_with_lifecycle_records_keeps_the_compact_encoding_on_redis(harness: Harness) -> None:
    """On Redis, a summary holding a resolved interrupt's record (request and answer captured, a
    refusal with its message) stays a listpack: the record's parts are at most 64 bytes, named
    without the run id a minted request id carries."""
    if harness.kind != "redis":
        pytest.skip("fakeredis does not model Redis's encodings")
    run_id = harness.start_and_run(flows.one_choice)
    _, token = _pending(harness, run_id)
    with pytest.raises(InvalidAnswer):
        harness.pw.resume(token, selected="a-long-option-id-that-does-not-exist-" * 2)
    assert harness.pw.resume(token, selected="red", responder="someone@example.com").accepted
    client = harness.pw.store.client  # type: ignore[attr-defined]
    assert client.object("encoding", keys.summary(run_id)) == b"listpack"
    assert all(len(f) <= 64 and len(v) <= 64 for f, v in client.hgetall(keys.summary(run_id)).items())
