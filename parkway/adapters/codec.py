"""msgpack encoding of checkpoints, and the shapes of index members and cursors.

Everything a store keeps is msgpack of plain types (no pickle, no classes).
Encoding enforces the payload bound; decoding turns garbage into
:class:`CorruptRecord`. Index members and listing cursors are built here, in
one place, so that the order and paging of interrupts has one definition. How
records are laid out in a run's hash and summary is :mod:`.redis.layout`'s.
"""

from __future__ import annotations

import re
from typing import Any

import msgpack

from ..runtime import telemetry
from ..runtime.errors import CorruptRecord, PayloadTooLarge, ValidationError
from ..runtime.protocol import ID_PATTERN
from ..runtime.store import IndexEntry, InterruptRecord, NewRun

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


def authority_arg(run: NewRun) -> str:
    """Whose a new run is, as ``create.lua`` takes it: ``tenant=<id> owner=<id> origin=<rank>``
    (each only when set; ids and ranks hold no space or ``=``)."""
    given = (("tenant", run.tenant), ("owner", run.owner), ("origin", run.origin))
    return " ".join(f"{name}={value}" for name, value in given if value)


# --- index members and cursors ----------------------------------------------

_TIME_BYTES = 6
"""a time in an index member: epoch ms, big-endian (6 bytes reach the year 10889)"""
_RUN_ID = ID_PATTERN
_CURSOR = re.compile(rf"([0-9]{{13}}):([0-9]{{13}}):({ID_PATTERN.pattern})")


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


def created_range(
    after: bytes | None, created_before: int | None, created_after: int | None
) -> tuple[bytes | str, bytes | str]:
    """The (high, low) lex range of a newest-first page of members that lead with their creation
    time: below the cursor's member ``after`` and ``created_before``, from ``created_after`` on."""
    high: bytes | str = b"(" + after if after else "+"
    if created_before is not None:
        before = time_floor(created_before)
        if after is None or before <= after:
            high = b"(" + before
    low: bytes | str = b"[" + time_floor(created_after) if created_after is not None else "-"
    return high, low


# --- lifecycle records and the closed interrupts' index ------------------------

_CLOSED_CURSOR = re.compile(rf"([0-9]{{13}}):((?:{ID_PATTERN.pattern}/)?{ID_PATTERN.pattern})")


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


# --- the run index ------------------------------------------------------------------

_RUN_CURSOR = re.compile(rf"([0-9]{{13}}):({ID_PATTERN.pattern})")


def run_member(created_at: int, run_id: str) -> bytes:
    """A run in the store-wide run index: its creation time, 6 bytes big-endian, then its id (the
    scripts that create runs write it: ``list_run`` in ``_common.lua``)."""
    return _time(created_at) + run_id.encode()


def parse_run_member(raw: bytes) -> tuple[int, str]:
    """(creation time, run id) of a run index member."""
    run_id = raw[_TIME_BYTES:].decode("ascii", "replace")
    if len(raw) <= _TIME_BYTES or not _RUN_ID.fullmatch(run_id):
        raise CorruptRecord(f"run index member {raw!r} is malformed")
    return int.from_bytes(raw[:_TIME_BYTES], "big"), run_id


def make_run_cursor(raw: bytes) -> str:
    """A cursor after run index member ``raw``: ``r.``, the creation time in 13 digits, the run id."""
    created, run_id = parse_run_member(raw)
    return f"r.{created:013d}:{run_id}"


def parse_run_cursor(cursor: str | None) -> bytes | None:
    """The member a run listing's cursor names (a page starts after it)."""
    if cursor is None:
        return None
    m = _cursor(cursor, "r", _RUN_CURSOR, "a run listing")
    return _time(int(m.group(1))) + m.group(2).encode()
