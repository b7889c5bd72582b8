"""The lifecycle records of a run's interrupts, kept in its summary (``<kind>:<req>`` fields in
parts, see the package), and the gates a fork asks again."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ....runtime import telemetry
from ....runtime.errors import CorruptRecord
from ....runtime.store import InterruptRecord, Lifecycle
from ... import codec
from .records import (
    CHILD_WAIT,
    GATE_PREFIX,
    _request,
    _s,
    full_id,
    interrupt_in,
    lifecycle_field,
    status_field,
    waiting,
)

# --- lifecycle records (in the summary) ----------------------------------------------


def lifecycle_blob(part: Mapping[str, Any], limit: int) -> bytes:
    return codec.encode(dict(part), limit=limit, what="interrupt lifecycle record")


def lifecycle_part(summary: Mapping[bytes, bytes], kind: str, request_id: str, run_id: str) -> dict[str, Any]:
    """One part of a lifecycle record ({} if none), joined from its 64-byte pieces ``<field>:<i>``
    (``hset_parts`` in ``_common.lua``)."""
    pieces: list[bytes] = []
    base = lifecycle_field(kind, request_id, run_id) + ":"
    while (piece := summary.get(f"{base}{len(pieces)}".encode())) is not None:
        pieces.append(piece)
    return _mapping(codec.decode(b"".join(pieces), what="interrupt lifecycle")) if pieces else {}


def lifecycle_ids(summary: Mapping[bytes, bytes], kind: str, run_id: str) -> list[str]:
    """The request ids of the interrupts whose lifecycle part ``kind`` the summary holds."""
    head = f"{kind}:".encode()
    return [full_id(_s(k)[len(head) : -2], run_id) for k in summary if k.startswith(head) and k.endswith(b":0")]


def _mapping(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise CorruptRecord("interrupt lifecycle record has the wrong shape", what="interrupt")
    return value


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
            failures=int(summary.get(lifecycle_field("f", request_id, run_id).encode(), 0)),
            last_failure=last.get("why"),
            last_failure_at=last.get("t"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptRecord(f"interrupt lifecycle record has the wrong shape: {exc}", what="interrupt") from exc


def with_lifecycle(
    run_id: str, request_id: str, fields: Mapping[bytes, bytes], summary: Mapping[bytes, bytes], now: int
) -> InterruptRecord | None:
    """The interrupt ``request_id`` with its lifecycle record: from its run's hash while the run's
    records last (its status there: pending until the run's ``expires``), else from the lifecycle
    record alone (its request only if captured). None if neither knows it."""
    record = interrupt_in(run_id, request_id, fields) if fields else None
    status: str | None = None
    if record is not None:
        status = _s(fields.get(status_field(request_id, run_id).encode(), b"")) or None
        if status == "pending" and int(fields.get(b"expires") or 0) <= now:
            status = "expired"
    # while its run's records last, its first part is its record's (the summary has it once it ended)
    opened = telemetry.created(record, with_request=False) if record is not None else None
    lifecycle = lifecycle_from(run_id, request_id, summary, status, opened)
    if record is not None:
        if lifecycle is not None and lifecycle.status != "pending" and "input" not in record.capture:
            record = replace(record, request=None)  # ended: only what its lifecycle record captured shows
        return replace(record, lifecycle=lifecycle)
    if lifecycle is None:
        return None
    made = lifecycle_part(summary, "i", request_id, run_id)
    return InterruptRecord(
        request_id=request_id,
        run_id=run_id,
        workflow=_s(summary.get(b"wf", b"")),
        node=str(made.get("n", "")),
        step=int(made.get("s", 0)),
        journal_field="",
        request=_request(lifecycle.request),
        created_at=lifecycle.created_at,
        expires_at=int(made.get("x", 0)),
        token_hash="",
        root_run_id=made.get("rr"),
        parent_run_id=made.get("pr"),
        version=made.get("v"),
        capture=lifecycle.capture,
        lifecycle=lifecycle,
    )


def pending_in(
    run_id: str, expires_at: int, fields: Mapping[bytes, bytes], summary: Mapping[bytes, bytes], now: int
) -> InterruptRecord | None:
    """The interrupt an index entry (of ``run_id``, expiring at ``expires_at``) stands for, from its
    run's hash (with its lifecycle record, from the run's summary): the one the run waits on, if
    its expiry is the entry's (else the entry is stale: the run moved on)."""
    wait = waiting(fields, run_id)
    if not wait or wait.startswith(CHILD_WAIT) or fields.get(b"expires") != str(expires_at).encode():
        return None
    return with_lifecycle(run_id, wait, fields, summary, now)



def gate_steps(summary: Mapping[bytes, bytes], run_id: str) -> set[int]:
    """The run's gates, as its summary says: the steps of its interrupts that ended (their lifecycle
    records), and the steps a run below it paused in (``GATE_PREFIX``)."""
    ended = {int(lifecycle_part(summary, "i", r, run_id).get("s", 0)) for r in lifecycle_ids(summary, "e", run_id)}
    head = GATE_PREFIX.encode()
    return ended | {int(k[len(head):]) for k in summary if k.startswith(head)}


