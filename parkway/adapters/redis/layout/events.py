"""A run's events: its stream, the events folded into a parked run's hash, the short interrupt event
and how readers rebuild it; and the reads of several round trips (plans) that read them."""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ....runtime import telemetry
from ....runtime.executor import interrupt_event
from ....runtime.store import InterruptRecord, StoredEvent
from ... import codec
from .. import keys
from .records import FOLDED_FIELDS, FOLDED_TYPES, RELATIVE_MS, T, _s, full_id, interrupt_in, short_id

# --- events ------------------------------------------------------------------------


def event_from(entry_id: str, kind: str, data_blob: bytes) -> StoredEvent:
    data = codec.decode(data_blob, what="event")
    ts = int(entry_id.split("-", 1)[0])
    return StoredEvent(entry_id, kind, ts, data if isinstance(data, dict) else {"value": data})


def short_interrupt_event(record: InterruptRecord) -> dict[str, Any]:
    """The interrupt event as its run's own stream keeps it: the interrupt's <req> (``h``), its
    expiry (``x``) and audience (``a``: an escalation changes the record's, not this event's), and
    nothing its record holds: readers rebuild the rest from it (``with_interrupts``), so a parked
    run's stream does not keep its request twice (~370 bytes less for a 200-byte request) and the
    event fits in one field of a parked run's hash."""
    short = short_id(record.request_id, record.run_id)
    return {"h": short, "x": record.expires_at} | ({"a": record.audience} if record.audience else {})


def is_short_event(event: StoredEvent) -> bool:
    """Whether ``event`` is an interrupt event kept short (``short_interrupt_event``)."""
    return event.type == "interrupt" and "h" in event.data and "requestId" not in event.data


def has_short(events: Sequence[StoredEvent]) -> bool:
    """Whether ``events`` hold a short interrupt event (``with_interrupts`` needs the run hash)."""
    return any(is_short_event(e) for e in events)


def _position(event_id: str) -> tuple[int, int]:
    ms, _, seq = event_id.partition("-")
    return int(ms), int(seq or 0)


def fold_value(entry_id: str, kind: str, data: bytes, first: str | None = None) -> bytes:
    """A folded event's value (as ``fold_fields`` in ``_common.lua`` writes it): its entry id, a space,
    its type's length in one byte and its type (or 0 and its index in ``FOLDED_TYPES``), its data.
    ``first``: the first folded event's id, for a later one (whose id is kept relative to it:
    ``relative_id``)."""
    kind_bytes = kind.encode()
    stored = relative_id(entry_id, first) if first is not None else entry_id
    named = bytes([0, FOLDED_TYPES.index(kind) + 1]) if kind in FOLDED_TYPES else bytes([len(kind_bytes)]) + kind_bytes
    return stored.encode() + b" " + named + data


def folded_type(rest: bytes, run: Mapping[bytes, Any] | None = None) -> tuple[str, bytes]:
    """A folded event's type and data from what follows its id: a type length and the type, or a
    length of 0 and the type's index in ``FOLDED_TYPES`` (from 1), or two zero bytes: the usual
    run.started, its data made from the run hash ``run`` (``started_data``), or (format 4) 0 and the
    index plus 128: the rest of its data after the head made from the run hash (``folded_head``)."""
    size = rest[0]
    if size == 0 and rest[1] == 0:
        run = run or {}
        return "run.started", started_data(_s(run.get(b"wf")), run.get(b"input") or b"")
    if size == 0 and rest[1] > 128:
        kind = FOLDED_TYPES[rest[1] - 129]
        return kind, folded_head(kind, run or {}) + rest[2:]
    if size == 0:
        return FOLDED_TYPES[rest[1] - 1], rest[2:]
    return rest[1 : 1 + size].decode(), rest[1 + size :]


def folded_head(kind: str, run: Mapping[bytes, Any]) -> bytes:
    """The head of a folded event's data that format 4 leaves out and makes again from the parked run's
    hash (``folded_head`` in _common.lua): node.started's node and step, an interrupt event's short id."""
    if kind == "node.started":
        return b"\x83\xa4node" + codec.encode(_s(run.get(b"node"))) + b"\xa4step" + codec.encode(
            int(run.get(b"step") or 0)) + b"\xa6replay"
    if kind == "interrupt":
        return b"\x82\xa1h" + codec.encode(_s(run.get(b"rq")))
    raise ValueError(f"no head is made for a folded {kind}")


def started_data(workflow: str, input_: bytes) -> bytes:
    """A run's usual run.started data, ``{"workflow", "input"}``, from its hash's ``wf`` and ``input``
    (a parked run's hash keeps it folded without it: ``started_data`` in ``_common.lua``)."""
    return b"\x82\xa8workflow" + codec.encode(workflow) + b"\xa5input" + input_


def relative_id(entry_id: str, first: str) -> str:
    """A later folded event's id as its field keeps it: ms after the first folded event's id, then
    ``-<seq>`` only when its sequence number is not 0."""
    ms, seq = _position(entry_id)
    return f"{ms - _position(first)[0]}" + (f"-{seq}" if seq else "")


def _absolute_id(stored: str, base_ms: int) -> str:
    """A later folded event's entry id from its relative one (``relative_id``; one folded whole, as
    before ids were relative, reads as itself: no run is parked ``base_ms`` ms after its first event)."""
    ms, seq = _position(stored)
    return f"{ms if ms >= base_ms else base_ms + ms}-{seq}"


def folded_after(
    values: Sequence[bytes | None], after: str, run: Mapping[bytes, Any] | None = None
) -> list[StoredEvent]:
    """The events folded into a parked run's hash (``values``: ``FOLDED_FIELDS``' values; ``run``: the
    hash, for a run.started kept without its data) after ``after``: the first's id whole, the
    others' relative to it (``relative_id``)."""
    out: list[StoredEvent] = []
    start = _position(after)
    base_ms = 0
    for i, value in enumerate(values):
        if value is None:
            break
        stored, _, rest = value.partition(b" ")
        entry_id = stored.decode()
        if i == 0:
            base_ms, seq = _position(entry_id)
            if base_ms < RELATIVE_MS:  # format 4: in ms after the run's creation
                base_ms += int((run or {}).get(b"cr") or 0)
                entry_id = f"{base_ms}-{seq}"
        else:
            entry_id = _absolute_id(entry_id, base_ms)
        if not rest or _position(entry_id) <= start:
            continue
        out.append(event_from(entry_id, *folded_type(rest, run)))
    return out


def merged(folded: list[StoredEvent], streamed: list[StoredEvent], count: int) -> list[StoredEvent]:
    """The first ``count`` of a run's folded and streamed events, in order, each once (the stream
    still holds the folded ones for ``FOLD_WAKE_MS`` after the park)."""
    if not folded:
        return streamed
    seen = {e.id for e in streamed}
    return sorted([*streamed, *(e for e in folded if e.id not in seen)], key=lambda e: _position(e.id))[:count]


def events_from(reply: Any) -> list[StoredEvent]:
    """The events of an XREAD reply on one stream, as stored (see ``with_interrupts``)."""
    out: list[StoredEvent] = []
    for _stream, entries in reply or []:
        for entry_id, fields in entries:
            out.append(event_from(_s(entry_id), _s(fields[b"t"]), fields[b"d"]))
    return out


def with_interrupts(run_id: str, events: list[StoredEvent], fields: Mapping[bytes, bytes]) -> list[StoredEvent]:
    """``events`` with each interrupt event its stream keeps short rebuilt from its record in the run
    hash ``fields``: the event park would have written whole (its expiry and audience as the short
    one says: an escalation changes the record's). A record gone leaves its request id and expiry."""
    return [_rebuilt(run_id, e, fields) if is_short_event(e) else e for e in events]


def _rebuilt(run_id: str, event: StoredEvent, fields: Mapping[bytes, bytes]) -> StoredEvent:
    request_id = full_id(str(event.data["h"]), run_id)
    record = interrupt_in(run_id, request_id, fields) if fields else None
    if record is None:
        return replace(event, data={"requestId": request_id, "expiresAt": event.data.get("x")})
    record = replace(record, expires_at=int(event.data["x"]), audience=event.data.get("a"))
    return replace(event, data=interrupt_event(record, telemetry.public_request(record.request)))


def events_page(run_id: str, after: str, fields: Mapping[bytes, bytes], reply: Any, count: int) -> list[StoredEvent]:
    """The first ``count`` of a run's events after ``after``, from one read of its hash (``fields``,
    HGETALL) and of its stream (``reply``, XREAD): the events a parked run keeps in its hash and the
    stream's, each once, in order, with park's short interrupt events rebuilt from the record the
    hash holds (``with_interrupts``)."""
    folded = folded_after([fields.get(f) for f in FOLDED_FIELDS], after, fields)
    return with_interrupts(run_id, merged(folded, events_from(reply), count), fields)


# --- reads of several round trips, for sync and asyncio drivers ------------------------

Command = tuple[Any, ...]
"""one Redis command, as ``execute_command`` takes it (its reply parsed as the named method's)"""
Plan = Generator[list[Command], list[Any], T]
"""a read: each step yields the commands of one round trip (sent together in one pipeline) and is
sent their replies; it returns the result. ``RedisStore`` drives plans on its client, the HTTP
server's event streams on an asyncio one: one read, two drivers."""


def _xread(stream: str, after: str, count: int, block_ms: int | None = None) -> Command:
    block = ("BLOCK", block_ms) if block_ms else ()
    return ("XREAD", "COUNT", count, *block, "STREAMS", stream, after)


def read_events(run_id: str, after: str, block_ms: int | None, count: int) -> Plan[list[StoredEvent]]:
    """The run's events after ``after``: its hash and its stream in one round trip (``events_page``);
    when there are none and ``block_ms``, an XREAD BLOCK on the stream (which wakes when a resume
    puts the folded events back with their ids and appends: only the new ones are after
    ``after``), and the hash again only if what it returns holds a short interrupt event."""
    stream, run = keys.events(run_id), keys.run(run_id)
    fields, reply = yield [("HGETALL", run), _xread(stream, after, count)]
    out = events_page(run_id, after, fields, reply, count)
    if out or not block_ms:
        return out
    (reply,) = yield [_xread(stream, after, count, block_ms)]
    out = events_from(reply)
    if not has_short(out):
        return out
    (fields,) = yield [("HGETALL", run)]
    return with_interrupts(run_id, out, fields)


