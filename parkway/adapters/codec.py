"""msgpack encoding of checkpoints, and the shapes of index members and cursors.

Everything a store keeps is msgpack of plain types (no pickle, no classes).
Encoding enforces the payload bound; decoding turns garbage into
:class:`CorruptRecord`. Index members and listing cursors are built here, in
one place, so that the order and paging of interrupts has one definition.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgpack

from ..runtime import telemetry
from ..runtime.errors import CorruptRecord, PayloadTooLarge, ValidationError
from ..runtime.protocol import RunStatus
from ..runtime.store import IndexEntry, InterruptRecord, JournalEntry, Lifecycle, NewRun, RunRecord, StoredEvent
from .redis import keys

DEFAULT_MAX_BYTES = 1 << 20


def encode(value: Any, *, limit: int = DEFAULT_MAX_BYTES, what: str = "payload") -> bytes:
    try:
        blob: bytes = msgpack.packb(value, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValidationError(
            f"{what} is not plain data (dict, list, str, int, float, bool, None, bytes): {exc}"
        ) from exc
    if len(blob) > limit:
        raise PayloadTooLarge(f"{what} is {len(blob)} bytes encoded; the limit is {limit}", size=len(blob), limit=limit)
    return blob


def decode(blob: bytes | None, *, what: str = "record") -> Any:
    if blob is None:
        return None
    try:
        return msgpack.unpackb(blob, raw=False)
    except Exception as exc:  # msgpack raises several unrelated types on garbage
        raise CorruptRecord(f"{what} cannot be decoded: {exc}", what=what) from exc


def entry_to_blob(entry: JournalEntry, limit: int) -> bytes:
    return encode([entry.kind, entry.name, entry.value, entry.detail, entry.status], limit=limit, what="journal value")


def entry_from_blob(blob: bytes) -> JournalEntry:
    raw = decode(blob, what="journal entry")
    if not isinstance(raw, list) or len(raw) != 5:
        raise CorruptRecord("journal entry has the wrong shape", what="journal entry")
    return JournalEntry(*raw)


_INTERRUPT_FIELDS = (
    "request_id",
    "node",
    "step",
    "journal_field",
    "request",
    "created_at",
    "expires_at",
    "on_expire",
    "root_run_id",
    "parent_run_id",
    "version",
    "audience",
    "tenant",
    "capture",
)
"""an interrupt record's fields in the order its stored array holds them; the run id, the workflow
and the token hash are its run's (the key, the run's ``wf``, the field that maps the token to it),
and so is the request id: the array holds nil in its place (the field naming the record has it)"""
_OPTIONAL_TAIL = 3
"""the last fields (audience, tenant, capture), which records written before them lack (they read as
None, and a record without ``capture`` captures both)"""


def interrupt_to_blob(record: InterruptRecord) -> bytes:
    """The record as a msgpack array in ``_INTERRUPT_FIELDS`` order: no field names, nothing its run
    holds (its request id is nil: the run hash names the record by it, ``rq``)."""
    return encode([None, *(getattr(record, name) for name in _INTERRUPT_FIELDS[1:])], what="interrupt")


def interrupt_from_blob(
    run_id: str, workflow: str, token_hash: str, blob: bytes, request_id: str, ref: str = ""
) -> InterruptRecord:
    """The record ``interrupt_to_blob`` wrote, for the interrupt ``request_id`` (a record written
    before the id was left out holds it too: that one wins), of a run of ``workflow`` (by ``ref``)."""
    raw = decode(blob, what="interrupt")
    if not isinstance(raw, list) or not len(_INTERRUPT_FIELDS) - _OPTIONAL_TAIL <= len(raw) <= len(_INTERRUPT_FIELDS):
        raise CorruptRecord("interrupt record has the wrong shape", what="interrupt")
    try:
        fields = dict(zip(_INTERRUPT_FIELDS, raw, strict=False))
        fields["request_id"] = fields["request_id"] or request_id
        fields["capture"] = tuple(fields.get("capture", ("input", "output")))
        return InterruptRecord(run_id=run_id, workflow=workflow, token_hash=token_hash, ref=ref, **fields)
    except TypeError as exc:
        raise CorruptRecord(f"interrupt record has the wrong shape: {exc}", what="interrupt") from exc


def held_interrupt_event(record: InterruptRecord) -> dict[str, Any]:
    """The interrupt event as its run's own stream keeps it: the interrupt's name in the run hash
    (``h``), its expiry (``x``) and audience (``a``: an escalation changes the record's, not this
    event's), and nothing its record holds: readers rebuild the rest from it
    (``store.with_interrupts``), so a parked run's stream does not keep its request twice (~370
    bytes less for a 200-byte request) and the event fits in one field of a parked run's hash."""
    held = keys.held_id(record.request_id, record.run_id)
    return {"h": held, "x": record.expires_at} | ({"a": record.audience} if record.audience else {})


def is_held_event(event: StoredEvent) -> bool:
    """Whether ``event`` is an interrupt event kept short (``held_interrupt_event``)."""
    return event.type == "interrupt" and "h" in event.data and "requestId" not in event.data


def split(blob: bytes, size: int) -> list[bytes]:
    """``blob`` in parts of at most ``size`` bytes (at least one part)."""
    return [blob[i : i + size] for i in range(0, len(blob), size)] or [b""]


def run_from_fields(run_id: str, f: dict[str, Any]) -> RunRecord:
    """Build a RunRecord from the run's stored fields (str keys; blobs still encoded)."""
    try:
        return RunRecord(
            run_id=run_id,
            workflow=_s(f["wf"]),
            ref=_s(f["ref"]),
            status=RunStatus(_s(f["status"])),
            node=_s(f.get("node")) or None,
            step=int(f["step"]),
            fence=int(f["fence"]),
            input=decode(f.get("input"), what="run input"),
            data=decode(f.get("data", f.get("input")), what="run data") or {},  # no data yet: the input
            output=decode(f.get("output"), what="run output"),
            error=decode(f.get("error"), what="run error"),
            created_at=int(f["created"]),
            updated_at=int(f["updated"]),
            ttl_ms=int(f["ttl"]),
            expires_at=int(f["expires"]) if f.get("expires") else None,
            waiting_on=_s(f.get("waiting")) or None,
            lineage=lineage_from(_s(f.get("lineage"))),
            paused_version=_paused(_s(f.get("paused")), int(f["step"])),
            tenant=_s(f.get("tenant")) or None,
            racing=_racing(f),
            owner=_s(f.get("owner")) or None,
            origin=_s(f.get("origin")) or None,
            session=_s(f.get("session")) or None,
        )
    except (KeyError, ValueError) as exc:
        raise CorruptRecord(f"run {run_id} record is incomplete or invalid: {exc!r}", run_id=run_id) from exc


def _racing(f: dict[str, Any]) -> str | None:
    """The child run racing the run's interrupt (``rc``), while that interrupt (status field ``rs``) is pending."""
    status_field = _s(f.get("rs"))
    return (_s(f.get("rc")) or None) if status_field and _s(f.get(status_field)) == "pending" else None


def _paused(text: str, step: int) -> str | None:
    """The code version of the current activation's last pause (``paused`` is ``<step> <version>``)."""
    at, _, version = text.partition(" ")
    return version if version and at == str(step) else None


def lineage_field(lineage: Sequence[tuple[str, int]]) -> str:
    """A child run's ancestors as its record keeps them: ``run:step`` words, parent first."""
    return " ".join(f"{run_id}:{step}" for run_id, step in lineage)


def lineage_from(text: str) -> tuple[tuple[str, int], ...]:
    """A child run's ancestors from its record's ``lineage`` field (see ``lineage_field``)."""
    out = []
    for word in text.split():
        run_id, _, step = word.rpartition(":")
        out.append((run_id, int(step)))
    return tuple(out)


def summary_record(run_id: str, summary: Mapping[str, Any]) -> RunRecord:
    """What a run reads as once its records are past their TTL."""
    try:
        status = str(summary["status"])
        final = status in ("completed", "failed", "cancelled")
        return RunRecord(
            run_id=run_id,
            workflow=str(summary["wf"]),
            status=RunStatus(status) if final else RunStatus.EXPIRED,
            created_at=int(summary["created"]),
            updated_at=int(summary["updated"]),
            tenant=str(summary["tenant"]) if summary.get("tenant") else None,
            owner=str(summary["owner"]) if summary.get("owner") else None,
            origin=str(summary["origin"]) if summary.get("origin") else None,
            session=str(summary["session"]) if summary.get("session") else None,
        )
    except (KeyError, ValueError) as exc:
        raise CorruptRecord(f"run {run_id} summary is incomplete or invalid: {exc!r}", run_id=run_id) from exc


def authority_arg(run: NewRun) -> str:
    """Whose a new run is, as ``create.lua`` takes it: ``tenant=<id> owner=<id> origin=<rank>``
    (each only when set; ids and ranks hold no space or ``=``)."""
    given = (("tenant", run.tenant), ("owner", run.owner), ("origin", run.origin))
    return " ".join(f"{name}={value}" for name, value in given if value)


def _s(v: Any) -> str:
    if v is None:
        return ""
    return v.decode() if isinstance(v, bytes) else str(v)


def event_from(entry_id: str, kind: str, data_blob: bytes) -> StoredEvent:
    data = decode(data_blob, what="event")
    ts = int(entry_id.split("-", 1)[0])
    return StoredEvent(entry_id, kind, ts, data if isinstance(data, dict) else {"value": data})


# --- index members and cursors ----------------------------------------------

_TIME_BYTES = 6
"""a time in an index member: epoch ms, big-endian (6 bytes reach the year 10889)"""
_RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_CURSOR = re.compile(r"([0-9]{13}):([0-9]{13}):([A-Za-z0-9_-]{1,64})")


def entry_of(record: InterruptRecord) -> IndexEntry:
    return IndexEntry(record.created_at, record.expires_at, record.workflow, record.run_id, record.request_id)


def _time(ms: int) -> bytes:
    return int(ms).to_bytes(_TIME_BYTES, "big")


def member(entry: IndexEntry, order: str) -> bytes:
    """A pending interrupt in one index of its workflow (the key names the workflow): its two times,
    6 bytes each, big-endian, the order's first (``newest``: created, then expires; ``expiring``:
    the reverse), then its run id (a run waits on one interrupt at a time). Members sort bytewise by
    time, so a page is a ZRANGEBYLEX from the cursor: O(log N + page), no gaps, no repeats. 48 bytes
    for a run id of 36: Redis keeps it in a 64-byte allocation."""
    first, second = (entry.created_at, entry.expires_at) if order == "newest" else (entry.expires_at, entry.created_at)
    return _time(first) + _time(second) + entry.run_id.encode()


def parse_member(raw: bytes, order: str, workflow: str) -> IndexEntry:
    """The entry a member of ``workflow``'s index stands for (its request id is the run's to say: "")."""
    run_id = raw[2 * _TIME_BYTES :].decode("ascii", "replace")
    if len(raw) <= 2 * _TIME_BYTES or not _RUN_ID.fullmatch(run_id):
        raise CorruptRecord(f"interrupt index member {raw!r} is malformed")
    first, second = int.from_bytes(raw[:_TIME_BYTES], "big"), int.from_bytes(raw[_TIME_BYTES : 2 * _TIME_BYTES], "big")
    created, expires = (first, second) if order == "newest" else (second, first)
    return IndexEntry(created, expires, workflow, run_id)


def _cursor(cursor: object, letter: str, pattern: re.Pattern[str], what: str) -> re.Match[str]:
    """A cursor's parts after its ``letter`` (its order's or status's first) and a dot."""
    prefix = letter + "."
    m = pattern.fullmatch(cursor[2:]) if isinstance(cursor, str) and cursor.startswith(prefix) else None
    if m is None:
        raise ValidationError(f"invalid cursor for {what}")
    return m


def parse_cursor(cursor: str | None, order: str) -> bytes | None:
    """The member a cursor names (a page starts after it)."""
    if cursor is None:
        return None
    m = _cursor(cursor, order[0], _CURSOR, f"order={order!r}")
    return _time(int(m.group(1))) + _time(int(m.group(2))) + m.group(3).encode()


def make_cursor(raw: bytes, order: str) -> str:
    """A cursor after member ``raw``: its times in 13 digits and its run id, readable in a URL."""
    first, second = int.from_bytes(raw[:_TIME_BYTES], "big"), int.from_bytes(raw[_TIME_BYTES : 2 * _TIME_BYTES], "big")
    return f"{order[0]}.{first:013d}:{second:013d}:{raw[2 * _TIME_BYTES :].decode()}"


def time_floor(now: int) -> bytes:
    """Bytewise bound: members whose leading time is < ``now`` sort below it."""
    return _time(now)


# --- lifecycle records and the closed interrupts' index ------------------------

_CLOSED_CURSOR = re.compile(r"([0-9]{13}):([A-Za-z0-9_/-]{1,130})")


def closed_member(ended_at: int, run_id: str, request_id: str) -> bytes:
    """A closed interrupt in its workflow's index of that status (the key names both): its end time,
    6 bytes big-endian, then its request id, or ``<run id>/<request id>`` for one that does not carry
    its run id (see ``telemetry.mint_request_id``). Members sort bytewise by end time: a page is a
    ZREVRANGEBYLEX from the cursor, O(log N + page)."""
    tail = request_id if telemetry.run_of_request(request_id) == run_id else f"{run_id}/{request_id}"
    return _time(ended_at) + tail.encode()


def parse_closed_member(raw: bytes) -> tuple[int, str, str]:
    """(end time, run id, request id) of a closed index member."""
    tail = raw[_TIME_BYTES:].decode("ascii", "replace")
    run_id, _, request_id = tail.rpartition("/")
    if not run_id:
        run_id = telemetry.run_of_request(request_id) or ""
    if len(raw) <= _TIME_BYTES or not _RUN_ID.fullmatch(run_id) or not _RUN_ID.fullmatch(request_id):
        raise CorruptRecord(f"closed interrupt index member {raw!r} is malformed")
    return int.from_bytes(raw[:_TIME_BYTES], "big"), run_id, request_id


def make_closed_cursor(raw: bytes, status: str) -> str:
    """A cursor after closed member ``raw``: the status's letter, the end time in 13 digits, the rest."""
    return f"{status[0]}.{int.from_bytes(raw[:_TIME_BYTES], 'big'):013d}:{raw[_TIME_BYTES:].decode()}"


def parse_closed_cursor(cursor: str | None, status: str) -> bytes | None:
    """The member a closed listing's cursor names (a page starts after it)."""
    if cursor is None:
        return None
    m = _cursor(cursor, status[0], _CLOSED_CURSOR, f"status={status!r}")
    return _time(int(m.group(1))) + m.group(2).encode()


def lifecycle_blob(part: Mapping[str, Any], limit: int) -> bytes:
    return encode(dict(part), limit=limit, what="interrupt lifecycle record")


def lifecycle_from(
    run_id: str,
    request_id: str,
    summary: Mapping[bytes, bytes],
    status: str | None,
    opened: Mapping[str, Any] | None = None,
) -> Lifecycle | None:
    """An interrupt's lifecycle record from its run's summary fields, or None if it has none.
    ``status`` is its status as its run's records say (None once they are gone: then the record
    says it, and an interrupt that never ended there expired with its run). ``opened``: its first
    part as its run's record says it (``telemetry.created``), for an interrupt still open (the
    summary gets that part when it ends)."""
    created = lifecycle_part(summary, "i", request_id, run_id) or dict(opened or {})
    if not created:
        return None
    end = lifecycle_part(summary, "e", request_id, run_id)
    failed = lifecycle_part(summary, "x", request_id, run_id)
    last = lifecycle_part(summary, "fl", request_id, run_id)
    outcome = end.get("o")
    if failed:
        outcome = "resume_failed"
    if status is None:
        status = {"resumed": "resolved", "resume_failed": "resolved", "cancelled": "cancelled"}.get(
            str(outcome), "expired"
        )
    try:
        return Lifecycle(
            status=status,  # type: ignore[arg-type]
            presentation=str(created["k"]),
            option_count=int(created["o"]),
            created_at=int(created["c"]),
            capture=tuple(created.get("cap", ())),
            schema_id=created.get("sid"),
            schema_version=created.get("sv"),
            outcome=outcome,
            ended_at=failed.get("t", end.get("t")),
            wait_ms=end.get("w"),
            responder=end.get("r"),
            reason=failed.get("why", end.get("why")),
            answer=end.get("a"),
            request=created.get("q"),
            failures=int(summary.get(keys.lifecycle_field("f", request_id, run_id).encode(), 0)),
            last_failure=last.get("why"),
            last_failure_at=last.get("t"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptRecord(f"interrupt lifecycle record has the wrong shape: {exc}", what="interrupt") from exc


def lifecycle_part(summary: Mapping[bytes, bytes], kind: str, request_id: str, run_id: str) -> dict[str, Any]:
    """One part of a lifecycle record ({} if none), joined from its 64-byte pieces ``<field>:<i>``
    (``hset_parts`` in ``_common.lua``)."""
    pieces: list[bytes] = []
    base = keys.lifecycle_field(kind, request_id, run_id) + ":"
    while (piece := summary.get(f"{base}{len(pieces)}".encode())) is not None:
        pieces.append(piece)
    return _mapping(decode(b"".join(pieces), what="interrupt lifecycle")) if pieces else {}


def _mapping(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise CorruptRecord("interrupt lifecycle record has the wrong shape", what="interrupt")
    return value
