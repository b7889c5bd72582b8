"""The walk from ``Parkway.resume`` to the node's first line on replay makes each check once, in one
place: the request is validated where it is made (at park), the resume script reads the interrupt
it takes once, and the attempt's begin returns the run's record, not the whole run hash."""

from __future__ import annotations

import dataclasses
import re
from importlib import resources
from typing import Any

import pytest

from parkway.adapters import codec
from parkway.adapters.redis import formats, keys, layout
from parkway.adapters.redis.store.store import RedisStore
from parkway.runtime import hooks
from parkway.runtime.clock import now_ms
from parkway.runtime.errors import CorruptRecord
from parkway.runtime.protocol import InterruptRequest, ResumeOutcome, RunStatus
from parkway.runtime.store import Answer, InterruptRecord
from tests import flows
from tests.conftest import Harness


def _counting(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[Any]:
    calls: list[Any] = []
    real = getattr(owner, name)

    def counted(*args: Any, **kw: Any) -> Any:
        calls.append(args)
        return real(*args, **kw)

    monkeypatch.setattr(owner, name, counted)
    return calls


def test_replay_builds_the_request_only_when_the_node_pauses(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A contract ask is built and checked (its payload against the contract) when the node pauses;
    on replay after the answer the journal entry's kind is compared, and nothing is built again."""
    built = _counting(monkeypatch, hooks, "_request_of")
    run_id = harness.start_and_run(flows.contracted, {"team": "ops"})
    assert len(built) == 1
    assert harness.pw.resume(harness.token(run_id), value={"job_id": "job-42"}).accepted
    harness.run_jobs()
    assert harness.pw.get_run(run_id).output == {"team": "ops", "job": "job-42", "note": None}
    assert len(built) == 1


def test_a_request_kind_reads_as_validation_reads_it() -> None:
    """Replay's kind of a request dict is the one validation infers (none for one it would refuse)."""
    kind_of = hooks.InterruptRequest.kind_of
    assert kind_of({"question": "q"}) == "text"
    assert kind_of({"options": [{"id": "a", "label": "A"}]}) == "choice"
    assert kind_of({"kind": "choice", "multiple": True}) == "multi-choice"
    assert kind_of({"kind": 5}) is None and kind_of({"multiple": "yes"}) is None


def test_resume_commit_reads_neither_the_token_nor_the_step_again() -> None:
    """resume_commit takes the interrupt resume_refused read (its request id and the run's step) as
    an argument: the exactly-once check and the commit read them once, in one place."""
    source = resources.files("parkway.adapters.redis.scripts").joinpath("_resume.lua").read_text()
    body = re.search(r"local function resume_commit\(K, A, pending\)\n(.*?)\nend\n", source, re.S)
    assert body is not None
    assert "A.token_field" not in body.group(1) and "'step'" not in body.group(1)


@pytest.mark.parametrize("fmt", [3, 4])
def test_begin_returns_the_run_record_not_the_run_hash(harness: Harness, fmt: int) -> None:
    """After an answer, the attempt's begin returns the run's RunRecord fields (``layout.RUN_FIELDS``),
    not its token field, and reads the run as a full read does; the answered interrupt's record parts
    only in format 4, which keeps no ``paused``: they say the version the replay checks."""
    store = harness.pw.store
    assert isinstance(store, RedisStore)
    if fmt == 3:  # a live reader of formats up to 3 holds the writers at 3
        held = formats.announcement((1, 2, 3), "worker", now_ms() + 60_000)
        store.client.hset(keys.readers(), "format-3-worker", held)
    assert store.formats.refresh().writes == fmt
    run_id = harness.start_and_run(flows.stepper, {"tag": "walk"})
    answer = harness.pw.prepare_answer(harness.token(run_id), selected="red")
    assert isinstance(answer, Answer)  # committed without a job: this test begins the attempt
    assert harness.manual_store.resume(run_id, answer).outcome is ResumeOutcome.ACCEPTED
    before = store.get_run(run_id, now_ms())
    assert before is not None and before.status is RunStatus.QUEUED
    now = now_ms()
    command, attempt_of = store.begin_command(run_id, None, before.fence, now, now + 60_000)
    reply = store.client.execute_command(*command)
    names = {name.decode() for name in reply[0][::2]}
    record = {"rq", "rn"} | {f"r{i}" for i in range(int(store.client.hget(keys.run(run_id), "rn")))}
    assert names - record <= set(layout.RUN_FIELDS), names - record - set(layout.RUN_FIELDS)
    assert (names & record) == (record if fmt == 4 else set())
    began = attempt_of(reply).run
    assert began.status is RunStatus.RUNNING and began.paused_version is not None
    assert dataclasses.replace(began, status=before.status, updated_at=before.updated_at) == before



def test_the_stored_request_is_validated_once_where_the_record_is_read(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Answering reads the interrupt's record and checks the answer against its request as the
    record's reader built it: the request is validated once (in the reader), not again by the client."""
    run_id = harness.start_and_run(flows.stepper, {"tag": "once"})
    token = harness.token(run_id)
    validated = _counting(monkeypatch, InterruptRequest, "model_validate")
    prepared = harness.pw.prepare_answer(token, selected="red", fresh=True)
    assert isinstance(prepared, Answer) and prepared.entry.detail == "choice"
    assert len(validated) == 1


def test_a_stored_request_that_does_not_validate_is_a_corrupt_record() -> None:
    """The record's reader is where a stored request is checked: one that does not validate is a
    CorruptRecord there (not a pydantic error further on)."""
    record = InterruptRecord(
        "int_x", "run_x", "w", "n", 0, "i:q", InterruptRequest.model_validate(flows.COLORS), 0, 1, "h"
    )
    raw = codec.decode(layout.interrupt_to_blob(record), what="interrupt")
    raw[_REQUEST_AT] = {"kind": "bogus"}
    with pytest.raises(CorruptRecord):
        layout.interrupt_from_blob("run_x", "w", "h", codec.encode(raw, what="interrupt"), "int_x")


_REQUEST_AT = 4
"""the request's place in a stored interrupt record's array (after request id, node, step, journal field)"""
