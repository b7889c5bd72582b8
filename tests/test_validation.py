"""Bad input at every public entry point: a clear parkway error, and nothing changed."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from parkway import (
    ConfigError,
    InvalidAnswer,
    Parkway,
    ParkwayError,
    ResumeOutcome,
    RunNotFound,
    RunStatus,
    Settings,
    ValidationError,
    Workflow,
    WorkflowError,
    use_interrupt,
)
from parkway.errors import InvalidId, MalformedResume, PayloadTooLarge
from parkway.runtime import tokens
from parkway.runtime.protocol import check_id
from tests import flows
from tests.conftest import SECRET, Harness
from tests.test_ttls import _event_types


@pytest.mark.parametrize("bad", ["", "a:b", "{x}", "a*", "a b", "a.b", "x" * 65, "-lead", 5, None, "ä"])
def test_ids_that_could_reach_a_key_are_refused(harness: Harness, bad: object) -> None:
    """Run ids with separators, globs, hash tags, spaces or excess length never reach a key."""
    with pytest.raises(InvalidId):
        harness.pw.get_run(bad)  # type: ignore[arg-type]
    if bad is not None:
        with pytest.raises(InvalidId):
            harness.pw.start(flows.one_choice, {}, run_id=bad)  # type: ignore[arg-type]


def test_list_interrupts_validates_its_arguments(harness: Harness) -> None:
    """Filters, order, limit and cursor are checked before any read."""
    for kwargs in ({"workflow": "a:b"}, {"run_id": "*"}, {"order": "oldest"}, {"limit": 0}, {"limit": 1001},
                   {"limit": True}, {"cursor": "garbage"}, {"cursor": "e.0000000000001:0000000000002:w:r:i"}):
        with pytest.raises(ValidationError):
            harness.pw.list_interrupts(**kwargs)


@pytest.mark.parametrize("token", ["", "no-dot", "run_1.short", "bad*run." + "A" * 32, "r." + "A" * 33, 42, None])
def test_malformed_tokens_are_refused(harness: Harness, token: object) -> None:
    """Anything that is not a token raises MalformedResume before touching the store."""
    with pytest.raises(MalformedResume):
        harness.pw.resume(token, selected="red")  # type: ignore[arg-type]


def test_oversize_input_is_refused_and_nothing_is_stored(harness: Harness) -> None:
    """Run input above the payload bound raises PayloadTooLarge and creates no run."""
    with pytest.raises(PayloadTooLarge):
        harness.pw.start(flows.one_choice, {"blob": "x" * (1 << 20)}, run_id="big")
    with pytest.raises(RunNotFound):
        harness.pw.get_run("big")


def test_input_that_is_not_plain_data_is_refused(harness: Harness) -> None:
    """Objects msgpack cannot carry (no pickle) are a ValidationError."""
    with pytest.raises(ValidationError, match="plain data"):
        harness.pw.start(flows.one_choice, {"when": object()})
    with pytest.raises(ValidationError, match="dict"):
        harness.pw.start(flows.one_choice, ["not", "a", "dict"])  # type: ignore[arg-type]


def test_duplicate_run_id_is_refused(harness: Harness) -> None:
    """Starting a second run under a taken run id (another input) raises and leaves the first alone."""
    harness.start_and_run(flows.one_choice, run_id="dup")
    with pytest.raises(ValidationError, match="already exists"):
        harness.pw.start(flows.one_choice, {"other": 1}, run_id="dup")
    assert harness.pw.get_run("dup").status.value == "waiting"


def test_oversize_text_answer_is_refused(harness: Harness) -> None:
    """A text answer above the request's max length raises and the interrupt stays open."""
    run_id = harness.start_and_run(flows.two_questions)
    with pytest.raises(InvalidAnswer, match="longer"):
        harness.pw.resume(harness.token(run_id), value="x" * 20_000)
    assert harness.pw.resume(harness.token(run_id), value="ok").accepted


def test_responder_is_bounded(harness: Harness) -> None:
    """responder is a short string."""
    run_id = harness.start_and_run(flows.one_choice)
    with pytest.raises(ValidationError):
        harness.pw.resume(harness.token(run_id), selected="red", responder="x" * 500)


def test_unknown_run_is_run_not_found(harness: Harness) -> None:
    """get_run of an id never used raises RunNotFound."""
    with pytest.raises(RunNotFound):
        harness.pw.get_run("never-used")


def test_bad_workflow_references_fail_at_start(harness: Harness) -> None:
    """A reference that does not import, or names something else, raises WorkflowError at start."""
    for ref in ("no_colon", "tests.flows:nothing", "tests.flows:COLORS", "no_such_module_xyz:wf"):
        with pytest.raises(WorkflowError):
            harness.pw.start(ref, {})


def test_workflow_definitions_are_checked() -> None:
    """Bad names, duplicate nodes and edges to unknown nodes are refused."""
    with pytest.raises(InvalidId):
        Workflow("bad name")
    wf = Workflow("w")
    wf.add_node("a", lambda d: None)
    with pytest.raises(WorkflowError):
        wf.add_node("a", lambda d: None)
    wf.edge("a", "ghost")
    with pytest.raises(WorkflowError, match="ghost"):
        wf.validate()


@pytest.mark.parametrize(
    "env",
    [{"PARKWAY_TTL_MS": "soon"}, {"PARKWAY_TTL_MS": "10"}, {"PARKWAY_SECRET": "short"},
     {"PARKWAY_REDIS_URL": "http://x"}, {"PARKWAY_QUEUE": "a:b"}],
)
def test_bad_settings_are_config_errors(env: dict[str, str]) -> None:
    """Settings that cannot work fail at startup with ConfigError."""
    with pytest.raises((ConfigError, InvalidId)):
        Settings.from_env(env)


def test_ttl_precedence_argument_over_env_over_default() -> None:
    """The TTL comes from an argument, else PARKWAY_TTL_MS, else 15 minutes."""
    assert Settings.from_env({}).ttl_ms == 15 * 60 * 1000
    assert Settings.from_env({"PARKWAY_TTL_MS": "60000"}).ttl_ms == 60_000
    assert Settings.from_env({"PARKWAY_TTL_MS": "60000"}, ttl_ms=120_000).ttl_ms == 120_000


def test_start_ttl_is_validated(harness: Harness) -> None:
    """start(ttl_ms=...) below a second or past a year and a day is refused as invalid input."""
    for ttl in (5, -5, 10**15):
        with pytest.raises(ValidationError, match="ttl_ms"):
            harness.pw.start(flows.one_choice, {}, ttl_ms=ttl)


def test_errors_keep_their_fields_through_pickle() -> None:
    """Exceptions carry structured fields and survive pickling (RQ and logging may pickle them)."""
    err = InvalidAnswer("nope", request_id="int_1")
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is InvalidAnswer and again.request_id == "int_1" and str(again) == "nope"
    assert isinstance(again, ParkwayError)


def test_tokens_are_long_random_looking_and_stored_hashed() -> None:
    """A token embeds its run and request ids, carries 192 bits from the HMAC, verifies only under
    its key, and only its SHA-256 is stored."""
    token = tokens.mint(SECRET.encode(), "run_1", "int_a")
    assert tokens.run_id_of(token) == "run_1"
    parsed = tokens.parse(token)
    assert (parsed.run_id, parsed.request_id, len(parsed.signature)) == ("run_1", "int_a", 24)
    assert tokens.verify(SECRET.encode(), parsed) and not tokens.verify(b"another key" * 4, parsed)
    assert not tokens.verify(SECRET.encode(), tokens.parse(token.replace("int_a", "int_b")))
    assert tokens.mint(SECRET.encode(), "run_1", "int_b") != token
    assert len(tokens.hash_token(token)) == 64 and token not in tokens.hash_token(token)


def test_redis_holds_no_token_in_clear(harness: Harness) -> None:
    """Nothing in Redis contains a resume token (only its hash)."""
    if harness.connection is None:
        pytest.skip("a Redis property")
    run_id = harness.start_and_run(flows.one_choice)
    token = harness.token(run_id).encode()
    secret_part = token.split(b".", 1)[1]
    for key in harness.connection.scan_iter("*"):
        kind = harness.connection.type(key)
        dump = harness.connection.dump(key) or b""
        assert secret_part not in dump, (key, kind)


def test_embedded_default_without_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without PARKWAY_REDIS_URL, Parkway() runs embedded: the Redis store, on an in-process Redis."""
    monkeypatch.delenv("PARKWAY_REDIS_URL", raising=False)
    with Parkway() as pw:
        assert pw.settings.embedded and type(pw.store).__name__ == "RedisStore"


@pytest.mark.parametrize(
    "token",
    [
        None,
        7,
        "",
        "run_1",
        "run_1." + "A" * 32,  # the request id is missing
        "run_1.int_a." + "A" * 31,  # too short by one: valid base64 shape otherwise
        "run_1.int_a." + "A" * 33,  # too long by one
        "run_1.int_a." + "A" * 32 + "=",  # lengthened by padding: decodes to the very 24 bytes
        "run_1.int_a." + "A" * 32 + "==",
        "run_1.int_a." + "A" * 36,  # lengthened by a whole quantum (27 bytes)
        "run_1.int_a." + "A" * 28,  # truncated by a whole quantum (21 bytes)
        "run_1.int_a." + "A" * 31 + "=",  # the right length, but padding in the middle of a signature
        "run_1.int_a." + "A" * 31 + "*",  # the right length, a character outside base64url
        "run 1.int_a." + "A" * 32,
        "run_1\n.int_a." + "A" * 32,
        "run_1.int:a." + "A" * 32,
        "run_1.int_a.x." + "A" * 32,
        "r" * 65 + ".int_a." + "A" * 32,
        "r" * 300,
    ],
)
def test_malformed_tokens_are_refused_before_any_lookup(token: object) -> None:
    """Each malformed token (wrong part count, ids, signature length or alphabet) raises MalformedResume."""
    with pytest.raises(MalformedResume):
        tokens.parse(token)


def test_a_token_of_exactly_the_signature_length_parses() -> None:
    """The length check is exact: 32 base64url characters pass (the cases above fail by one)."""
    assert tokens.parse("run_1.int_a." + "A" * 32).request_id == "int_a"


@pytest.mark.parametrize("bad", ["abc", "1-", "-1", "1-2-3", "1 ", "１", "9" * 21, "", 7, None])
def test_event_positions_are_validated_before_a_read(harness: Harness, bad: object) -> None:
    """A malformed ``after`` is the caller's error (ValidationError), never a Redis refusal."""
    run_id = harness.pw.start(flows.one_choice, {})
    with pytest.raises(ValidationError, match="event id"):
        list(harness.pw.stream(run_id, after=bad, timeout=1))  # type: ignore[arg-type]
    session = harness.pw.sessions.open("tests.session_flows:echo", owner="ada", tenant="acme")
    with pytest.raises(ValidationError, match="event id"):
        harness.pw.sessions.events(session, after=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["evil\n", "evil\r\n", "\nevil", "ev\nil", "evil ", "a" * 65, "", "-x", "é", "١٢"])
def test_ids_are_checked_by_full_match(bad: str) -> None:
    """An id with a trailing newline (which `$` would let through), a space, a non-ASCII letter or
    digit, or the wrong length is refused."""
    with pytest.raises(InvalidId):
        check_id(bad, "run id")


@pytest.mark.parametrize("where", ["run_id", "workflow", "request_id", "queue"])
def test_a_trailing_newline_reaches_no_key(harness: Harness, where: str) -> None:
    """start(run_id="evil\\n"), a listing filter, a resume's requestId and a queue name ending in a
    newline are refused before anything is written."""
    with pytest.raises(ValidationError):
        if where == "run_id":
            harness.pw.start(flows.one_choice, {}, run_id="evil\n")
        elif where == "workflow":
            harness.pw.list_interrupts(workflow="one_choice\n")
        elif where == "request_id":
            run_id = harness.start_and_run(flows.one_choice)
            harness.pw.resume(harness.token(run_id), selected="red", request_id="int_x\n")
        else:
            Settings(queue="parkway\n")
    with pytest.raises(ValidationError):
        harness.pw.list_interrupts(cursor="n.0000000000000:0000000000000:w:r:q\n")


def _nested(depth: int) -> list:
    value: list = ["red"]
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [400, 600, 5000])
def test_deep_answers_and_inputs_are_refused_and_the_interrupt_stays_open(harness: Harness, depth: int) -> None:
    """A selected or value nested hundreds of levels deep, and such a run input, raise a parkway
    error (never RecursionError); the interrupt stays open."""
    run_id = harness.start_and_run(flows.one_choice)
    token = harness.token(run_id)
    with pytest.raises(InvalidAnswer):
        harness.pw.resume(token, selected=_nested(depth))
    with pytest.raises(ValidationError):
        harness.pw.start(flows.one_choice, {"deep": _nested(depth)})
    assert harness.pw.resume(token, selected="red").accepted


def test_resume_message_needs_the_request_id_and_checks_it(harness: Harness) -> None:
    """resume_message without requestId is malformed; with another request's id it is refused."""
    run_id = harness.start_and_run(flows.one_choice)
    token = harness.token(run_id)
    with pytest.raises(MalformedResume, match="requestId"):
        harness.pw.resume_message({"metadata": {"resume": {"token": token, "selected": "red"}}})
    with pytest.raises(InvalidAnswer, match="requestId"):
        resume = {"token": token, "requestId": "int_other", "selected": "red"}
        harness.pw.resume_message({"metadata": {"resume": resume}})
    assert harness.pw.get_run(run_id).status is RunStatus.WAITING


@pytest.mark.parametrize("answer", [{}, {"selected": "red"}])
def test_cancel_in_a_message_cancels_and_is_never_recorded_as_an_answer(harness: Harness, answer: dict) -> None:
    """{cancel: true} (alone, or beside an answer) cancels the interrupt: the run ends cancelled,
    no answer is recorded, and the token is spent."""
    run_id = harness.start_and_run(flows.one_choice)
    token = harness.token(run_id)
    request_id = token.split(".")[1]
    message = {"metadata": {"resume": {"token": token, "requestId": request_id, "cancel": True, **answer}}}
    assert harness.pw.resume_message(message).accepted
    harness.run_jobs()
    run = harness.pw.get_run(run_id)
    assert run.status is RunStatus.CANCELLED and "picked" not in run.data
    events = [e.type for e in harness.pw.store.read_events(run_id, "0", None, 1000)]
    assert "interrupt.cancelled" in events and "interrupt.resumed" not in events
    assert harness.pw.resume(token, selected="red").outcome is ResumeOutcome.ALREADY_RESOLVED


long_text = Workflow("long_text")


@long_text.node(start=True)
def asks_for_a_long_text(data: dict[str, Any]) -> dict[str, Any]:
    answer = use_interrupt({"kind": "text", "question": "Paste the log", "maxLength": 200_000}, id="log")
    return {"length": len(answer)}


def test_an_answer_above_the_byte_bound_is_refused_and_the_interrupt_stays_open(harness: Harness) -> None:
    """A text answer within the request's maxLength but above the 64 KiB answer bound (100,000 ASCII
    characters; 30,000 three-byte characters) raises PayloadTooLarge and leaves the interrupt open;
    60,000 characters then resume it."""
    assert harness.settings.limits.max_answer_bytes == 64 << 10
    run_id = harness.start_and_run(long_text)
    token = harness.token(run_id)
    request_id = harness.pw.list_interrupts(run_id=run_id).items[0].request_id
    for text in ("x" * 100_000, "\u20ac" * 30_000):
        with pytest.raises(PayloadTooLarge):
            harness.pw.resume(token, value=text)
        assert harness.pw.get_run(run_id).status is RunStatus.WAITING
        assert [i.request_id for i in harness.pw.list_interrupts(run_id=run_id).items] == [request_id]
    assert "interrupt.resumed" not in _event_types(harness, run_id)
    assert harness.pw.resume(token, value="y" * 60_000).accepted
    harness.run_jobs()
    assert harness.pw.get_run(run_id).output == {"length": 60_000}
