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

from ..runtime.errors import CorruptRecord, PayloadTooLarge, ValidationError
from ..runtime.protocol import RunStatus
from ..runtime.store import IndexEntry, InterruptRecord, JournalEntry, RunRecord, StoredEvent

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
    "workflow",
    "node",
    "step",
    "journal_field",
    "request",
    "created_at",
    "expires_at",
    "token_hash",
    "on_expire",
    "root_run_id",
    "parent_run_id",
)
"""an interrupt record's fields in the order its stored array holds them (the run id is the key's)"""


def interrupt_to_blob(record: InterruptRecord) -> bytes:
    """The record as a msgpack array in ``_INTERRUPT_FIELDS`` order: no field names, no run id."""
    return encode([getattr(record, name) for name in _INTERRUPT_FIELDS], what="interrupt")


def interrupt_from_blob(run_id: str, blob: bytes) -> InterruptRecord:
    raw = decode(blob, what="interrupt")
    if not isinstance(raw, list) or len(raw) != len(_INTERRUPT_FIELDS):
        raise CorruptRecord("interrupt record has the wrong shape", what="interrupt")
    try:
        return InterruptRecord(run_id=run_id, **dict(zip(_INTERRUPT_FIELDS, raw, strict=True)))
    except TypeError as exc:
        raise CorruptRecord(f"interrupt record has the wrong shape: {exc}", what="interrupt") from exc


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
            data=decode(f.get("data"), what="run data") or {},
            output=decode(f.get("output"), what="run output"),
            error=decode(f.get("error"), what="run error"),
            created_at=int(f["created"]),
            updated_at=int(f["updated"]),
            ttl_ms=int(f["ttl"]),
            expires_at=int(f["expires"]) if f.get("expires") else None,
            waiting_on=_s(f.get("waiting")) or None,
            lineage=_lineage(_s(f.get("lineage"))),
        )
    except (KeyError, ValueError) as exc:
        raise CorruptRecord(f"run {run_id} record is incomplete or invalid: {exc!r}", run_id=run_id) from exc


def lineage_field(lineage: Sequence[tuple[str, int]]) -> str:
    """A child run's ancestors as its record keeps them: ``run:step`` words, parent first."""
    return " ".join(f"{run_id}:{step}" for run_id, step in lineage)


def _lineage(text: str) -> tuple[tuple[str, int], ...]:
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
        )
    except (KeyError, ValueError) as exc:
        raise CorruptRecord(f"run {run_id} summary is incomplete or invalid: {exc!r}", run_id=run_id) from exc


def _s(v: Any) -> str:
    if v is None:
        return ""
    return v.decode() if isinstance(v, bytes) else str(v)


def event_from(entry_id: str, kind: str, data_blob: bytes) -> StoredEvent:
    data = decode(data_blob, what="event")
    ts = int(entry_id.split("-", 1)[0])
    return StoredEvent(entry_id, kind, ts, data if isinstance(data, dict) else {"value": data})


# --- index members and cursors ----------------------------------------------

_MEMBER = re.compile(r"([0-9]{13}):([0-9]{13}):([A-Za-z0-9_-]{1,64}):([A-Za-z0-9_-]{1,64}):([A-Za-z0-9_-]{1,64})")


def entry_of(record: InterruptRecord) -> IndexEntry:
    return IndexEntry(record.created_at, record.expires_at, record.workflow, record.run_id, record.request_id)


def parse_member(member: str, order: str) -> IndexEntry:
    m = _MEMBER.fullmatch(member)
    if m is None:
        raise CorruptRecord(f"interrupt index member {member!r} is malformed")
    first, second = int(m.group(1)), int(m.group(2))
    created, expires = (first, second) if order == "newest" else (second, first)
    return IndexEntry(created, expires, m.group(3), m.group(4), m.group(5))


def member(entry: IndexEntry, order: str) -> str:
    """Members sort lexicographically by time (13-digit epoch ms), so a page is a
    ZRANGEBYLEX from the cursor: O(log N + page), no gaps, no repeats."""
    first, second = (entry.created_at, entry.expires_at) if order == "newest" else (entry.expires_at, entry.created_at)
    return f"{first:013d}:{second:013d}:{entry.workflow}:{entry.run_id}:{entry.request_id}"


def placements(entry: IndexEntry) -> list[tuple[str, str | None, str]]:
    """(order, workflow or None, member) for each index an entry lives in."""
    return [(o, wf, member(entry, o)) for o in ("newest", "expiring") for wf in (None, entry.workflow)]


def parse_cursor(cursor: str | None, order: str) -> str | None:
    if cursor is None:
        return None
    prefix = order[0] + "."
    if not isinstance(cursor, str) or not cursor.startswith(prefix) or not _MEMBER.fullmatch(cursor[2:]):
        raise ValidationError(f"invalid cursor for order={order!r}")
    return cursor[2:]


def make_cursor(member: str, order: str) -> str:
    return order[0] + "." + member


def time_floor(now: int) -> str:
    """Lexicographic bound: members whose leading time is < ``now`` sort below it."""
    return f"{now:013d}"
