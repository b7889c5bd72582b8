"""The physical layout of a run's records (``parkway.adapters.redis.layout``), without Redis: what a
run's hash holds is read back as it was written, and the event read is one plan for sync and async."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from parkway.adapters import codec
from parkway.adapters.redis import keys, layout
from parkway.runtime import journal, telemetry
from parkway.runtime.protocol import InterruptRequest
from parkway.runtime.store import InterruptRecord, StoredEvent

RUN = "run_" + "a" * 32


def _record(**changes: Any) -> InterruptRecord:
    request_id = telemetry.mint_request_id(RUN, 3, "int_fallback")
    record = InterruptRecord(
        request_id=request_id,
        run_id=RUN,
        workflow="approve",
        node="ask",
        step=2,
        journal_field=journal.interrupt("color"),
        request=InterruptRequest.model_validate({
            "kind": "choice",
            "question": "Which colour? " * 20,
            "options": [{"id": "red", "label": "Red"}, {"id": "blue", "label": "Blue"}],
        }),
        created_at=1_700_000_000_000,
        expires_at=1_700_000_060_000,
        token_hash="ab" * 16,
        audience="team:ops",
        tenant="acme",
        ref="flows:approve",
    )
    return replace(record, **changes)


def _hash(record: InterruptRecord, *extra: Any) -> dict[bytes, bytes]:
    """The run hash fields a park writes for ``record`` (as HGETALL returns them)."""
    flat = [
        "wf", record.workflow,
        "ref", record.ref,
        layout.token_field(record.token_hash), layout.short_id(record.request_id, RUN),
        layout.status_field(record.request_id, RUN), "pending",
        *layout.record_parts(record),
        *extra,
    ]
    return {_b(flat[i]): _b(flat[i + 1]) for i in range(0, len(flat), 2)}


def _b(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def test_an_interrupt_record_round_trips_through_its_parts() -> None:
    """A record written as 64-byte parts (``rq``, ``rn``, ``r0``...) reads back as the same record."""
    record = _record()
    fields = _hash(record)
    assert int(fields[b"rn"]) > 1  # the request is long: several parts
    assert all(len(f) <= layout.PART_BYTES and len(v) <= layout.PART_BYTES for f, v in fields.items())
    assert layout.interrupt_in(RUN, record.request_id, fields) == record


def test_an_earlier_interrupt_is_read_from_the_parts_park_moved_it_to() -> None:
    """An earlier interrupt's record, under ``r:<req>:<i>``, is found by its request id; one the
    run's hash does not hold reads as None."""
    earlier = _record(request_id=telemetry.mint_request_id(RUN, 1, "x"), token_hash="cd" * 16)
    parts = layout.split(layout.interrupt_to_blob(earlier))
    moved = [x for i, part in enumerate(parts) for x in (layout.earlier_record_field(earlier.request_id, RUN, i), part)]
    fields = _hash(_record(), *moved, layout.token_field(earlier.token_hash), layout.short_id(earlier.request_id, RUN))
    assert layout.interrupt_in(RUN, earlier.request_id, fields) == earlier
    assert layout.interrupt_in(RUN, "int_unknown", fields) is None


def test_a_minted_request_id_is_named_without_its_run_id_and_expanded_on_read() -> None:
    """The run's records name a minted request id without its run id; ``full_id`` restores it, and
    leaves ids parkway did not mint (or another run's) as they are."""
    minted = telemetry.mint_request_id(RUN, 7, "int_fallback")
    short = layout.short_id(minted, RUN)
    assert RUN not in short and layout.full_id(short, RUN) == minted
    assert layout.short_id("int_abc", RUN) == "int_abc" == layout.full_id("int_abc", RUN)
    other = telemetry.mint_request_id("run_other", 7, "x")
    assert layout.short_id(other, RUN) == other
    assert layout.status_field(minted, RUN) == "s:" + short
    assert layout.lifecycle_field("e", minted, RUN) == "e:" + short


def test_folded_events_are_read_after_a_position_merged_with_the_stream_once_each() -> None:
    """Events folded into a parked run's hash (``~0``...) read back after ``after``, and merged with
    the stream's in order, each once (the stream keeps them a little while after the park)."""
    data = [codec.encode({"n": i}) for i in range(3)]
    t = 1_700_000_000_000  # ms, as a stream's ids are
    ids = [f"{t}-0", f"{t}-1", f"{t + 1000}-0"]
    firsts = [None, ids[0], ids[0]]
    values = [layout.fold_value(i, "note", d, f) for i, d, f in zip(ids, data, firsts, strict=True)]
    # the first keeps its id whole, the others relative to it (ms after it, -<seq> when not 0)
    assert [v.split(b" ", 1)[0] for v in values] == [ids[0].encode(), b"0-1", b"1000"]
    whole = [layout.fold_value(i, "note", d) for i, d in zip(ids, data, strict=True)]  # as folded before
    assert layout.folded_after(whole, "0-0") == layout.folded_after(values, "0-0")
    fields = {f: v for f, v in zip(layout.FOLDED_FIELDS, values, strict=False)}
    folded = layout.folded_after([fields.get(f) for f in layout.FOLDED_FIELDS], ids[0])
    assert [(e.id, e.type, e.data) for e in folded] == [(ids[1], "note", {"n": 1}), (ids[2], "note", {"n": 2})]
    later = f"{t + 2000}-0"
    streamed = [StoredEvent(ids[2], "note", t + 1000, {"n": 2}), StoredEvent(later, "note", t + 2000, {"n": 3})]
    assert [e.id for e in layout.merged(folded, streamed, 10)] == [ids[1], ids[2], later]
    assert len(layout.FOLDED_FIELDS) == layout.FOLD_MAX and layout.FOLDED_FIELDS[0] == b"~0"


def test_a_short_interrupt_event_is_rebuilt_from_the_record_in_the_run_hash() -> None:
    """Park's short interrupt event (``h``, ``x``, ``a``) reads as the whole event, its expiry and
    audience the short one's; with the record gone, as its request id and expiry."""
    record = _record()
    short = StoredEvent("5-0", "interrupt", 5, layout.short_interrupt_event(replace(record, audience="team:leads")))
    assert layout.is_short_event(short) and layout.has_short([short])
    (whole,) = layout.with_interrupts(RUN, [short], _hash(record))
    assert whole.data["requestId"] == record.request_id and whole.data["audience"] == "team:leads"
    assert not layout.is_short_event(whole)
    (bare,) = layout.with_interrupts(RUN, [short], {})
    assert bare.data == {"requestId": record.request_id, "expiresAt": record.expires_at}


def test_a_lifecycle_part_is_joined_from_its_pieces_and_found_by_its_expanded_id() -> None:
    """A lifecycle part written in 64-byte pieces (``<kind>:<req>:<i>``) reads back whole, and the
    summary's fields name its interrupt by its full request id."""
    record = _record()
    part = telemetry.created(record)
    blob = layout.lifecycle_blob(part, 1 << 20)
    stem = layout.lifecycle_field("i", record.request_id, RUN)
    summary = {f"{stem}:{i}".encode(): piece for i, piece in enumerate(layout.split(blob))}
    assert len(summary) > 1
    assert layout.lifecycle_part(summary, "i", record.request_id, RUN) == part
    assert layout.lifecycle_ids(summary, "i", RUN) == [record.request_id]


def test_the_event_read_is_one_plan_of_round_trips() -> None:
    """``read_events`` asks for the run's hash and stream in one round trip; with nothing new and a
    block, a blocking XREAD; the hash again only when that returns a short interrupt event."""
    record = _record()
    plan = layout.read_events(RUN, "0", 500, 10)
    first = next(plan)
    assert first[0] == ("HGETALL", keys.run(RUN)) and first[1][0] == "XREAD" and "BLOCK" not in first[1]
    second = plan.send([{}, []])
    assert second == [("XREAD", "COUNT", 10, "BLOCK", 500, "STREAMS", keys.events(RUN), "0")]
    short = codec.encode(layout.short_interrupt_event(record))
    third = plan.send([[[keys.events(RUN).encode(), [(b"9-0", {b"t": b"interrupt", b"d": short})]]]])
    assert third == [("HGETALL", keys.run(RUN))]
    with pytest.raises(StopIteration) as done:
        plan.send([_hash(record)])
    (event,) = done.value.value
    assert event.id == "9-0" and event.data["requestId"] == record.request_id


def test_the_journal_names_each_hook_by_its_own_prefix() -> None:
    """Journal fields: a position for hooks without an id, a prefix per hook otherwise; a child's
    outcome and what was asked of it are two fields of one name."""
    assert journal.position(0) == "@0"
    assert journal.interrupt_name(journal.interrupt("color")) == "color" and journal.interrupt_name("@0") == ""
    assert journal.child_name(journal.child("kid")) == "kid" != journal.child_asked("kid")
    assert journal.trigger_seq("g:12") == 12 and journal.trigger_seq("g:x") is None
