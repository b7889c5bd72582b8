"""The embedded Store: one process, no server, the same contract as Redis.

Each method below is the counterpart of one Lua script of the Redis store
and runs under one lock, so transitions are atomic here too. Values are
stored msgpack-encoded, so the same payloads are refused and the same
copies are returned. Nothing survives the process.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..runtime.errors import StaleFence, ValidationError
from ..runtime.protocol import ResumeOutcome
from ..runtime.store import (
    Advance,
    Answer,
    Attempt,
    Due,
    EventSpec,
    Handoff,
    IndexEntry,
    InterruptListing,
    InterruptQuery,
    InterruptRecord,
    Lookup,
    NewRun,
    Park,
    Requeue,
    ResumeCommit,
    RunRecord,
    StoredEvent,
)
from . import codec
from .limits import Limits

_ACTIVE = ("queued", "running")


def _clock() -> int:
    return int(time.time() * 1000)


@dataclass
class _Run:
    fields: dict[str, Any]
    expires_at: int
    journals: dict[int, dict[str, bytes]] = field(default_factory=dict)
    workflow_state: dict[str, bytes] = field(default_factory=dict)
    events: list[tuple[str, str, bytes]] = field(default_factory=list)
    interrupts: dict[str, Any] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)
    """token hash -> expiry (ms) of the pending-request entry"""


class MemoryStore:
    """In-process Store for the embedded default and for tests without Redis."""

    def __init__(self, limits: Limits | None = None, clock: Any = _clock) -> None:
        self.limits = limits or Limits()
        self._clock = clock
        self._cond = threading.Condition()
        self._runs: dict[str, _Run] = {}
        self._summaries: dict[str, tuple[dict[str, Any], int]] = {}
        self._indexes: dict[str, list[str]] = {}
        self.outbox: dict[str, int] = {}
        self.leases: dict[str, int] = {}
        self._lock: tuple[str, int] | None = None
        self._seq = 0

    # --- helpers (each mirrors a Redis command or a shared part of the scripts) ---

    def _live(self, run_id: str) -> _Run | None:
        run = self._runs.get(run_id)
        if run is not None and run.expires_at <= self._clock():
            del self._runs[run_id]
            return None
        return run

    def _summary(self, run_id: str) -> dict[str, Any] | None:
        item = self._summaries.get(run_id)
        if item is None:
            return None
        if item[1] <= self._clock():
            del self._summaries[run_id]
            return None
        return item[0]

    def _current(self, run_id: str, fence: int | None, statuses: tuple[str, ...] = _ACTIVE) -> _Run:
        run = self._live(run_id)
        if run is None:
            raise StaleFence(f"run {run_id} is gone", run_id=run_id)
        if (fence is not None and int(run.fields["fence"]) != fence) or run.fields["status"] not in statuses:
            raise StaleFence(
                f"run {run_id} is at fence {run.fields['fence']} ({run.fields['status']}), the job has {fence}",
                run_id=run_id,
            )
        return run

    def _bump(self, run: _Run) -> int:
        run.fields["fence"] = int(run.fields["fence"]) + 1
        return int(run.fields["fence"])

    def _event(self, run: _Run, kind: str, data: Mapping[str, Any]) -> None:
        now = self._clock()
        self._seq += 1
        run.events.append((f"{now}-{self._seq}", kind, codec.encode(dict(data), what="event")))
        del run.events[: -self.limits.max_events]
        self._cond.notify_all()

    def _refresh(self, run: _Run, ttl_ms: int | None = None) -> None:
        run.expires_at = self._clock() + (int(run.fields["ttl"]) if ttl_ms is None else ttl_ms)

    def _set_summary(self, run_id: str, status: str, now: int) -> None:
        fields, _ = self._summaries[run_id]
        fields.update(status=status, updated=now)
        self._summaries[run_id] = (fields, now + self.limits.retention_ms)

    def _index(self, entry: IndexEntry, add: bool) -> None:
        for order, workflow, member in codec.placements(entry):
            members = self._indexes.setdefault(f"{order}:{workflow or ''}", [])
            i = bisect.bisect_left(members, member)
            present = i < len(members) and members[i] == member
            if add and not present:
                members.insert(i, member)
            elif not add and present:
                members.pop(i)

    def _pending_live(self, run: _Run, token_hash: str) -> bool:
        expiry = run.pending.get(token_hash)
        if expiry is not None and expiry <= self._clock():
            del run.pending[token_hash]
            expiry = None
        return expiry is not None

    def _record(self, run_id: str, request_id: str) -> InterruptRecord | None:
        run = self._live(run_id)
        blob = run.interrupts.get(f"r:{request_id}") if run else None
        return codec.interrupt_from_blob(blob) if blob else None

    # --- transitions ----------------------------------------------------

    def create_run(self, run: NewRun, handoff: Handoff | None = None) -> bool:
        """As the Redis store's, except that a handoff is never taken (the caller enqueues)."""
        blob = codec.encode(run.input, limit=self.limits.max_payload_bytes, what="run input")
        with self._cond:
            if self._live(run.run_id) is not None or self._summary(run.run_id) is not None:
                raise ValidationError(f"run {run.run_id} already exists", run_id=run.run_id)
            fields = dict(
                wf=run.workflow,
                ref=run.ref,
                status="queued",
                node=run.start_node,
                step=0,
                fence=0,
                input=blob,
                data=blob,
                created=run.now,
                updated=run.now,
                ttl=run.ttl_ms,
            )
            state = _Run(fields, self._clock() + run.ttl_ms)
            self._runs[run.run_id] = state
            self._summaries[run.run_id] = (
                {"wf": run.workflow, "status": "queued", "created": run.now, "updated": run.now},
                run.now + self.limits.retention_ms,
            )
            self._event(state, "run.started", {"workflow": run.workflow, "input": run.input})
            self._event(state, "node.started", {"node": run.start_node, "step": 0})
            self.outbox[f"{run.run_id}:0:0"] = run.now
            return False

    def begin(self, run_id: str, step: int, fence: int, now: int, lease_until: int) -> Attempt:
        with self._cond:
            run = self._current(run_id, fence)
            if int(run.fields["step"]) != step:
                raise StaleFence(f"run {run_id} is at step {run.fields['step']}, the job has {step}", run_id=run_id)
            if run.fields["status"] == "running" and self.leases.get(run_id, 0) > now:
                raise StaleFence(f"run {run_id}: another attempt holds the lease of this activation", run_id=run_id)
            run.fields.update(status="running", updated=now)
            self.leases[run_id] = lease_until
            self.outbox.pop(f"{run_id}:{step}:{fence}", None)
            journal = {k: codec.entry_from_blob(v) for k, v in run.journals.get(step, {}).items()}
            ws = {k: codec.decode(v, what="workflow state") for k, v in run.workflow_state.items()}
            return Attempt(codec.run_from_fields(run_id, run.fields), journal, ws)

    def heartbeat(self, run_ids: Sequence[str], lease_until: int) -> None:
        with self._cond:
            for run_id in run_ids:
                if run_id in self.leases:
                    self.leases[run_id] = lease_until

    def record(
        self,
        run_id: str,
        fence: int,
        step: int,
        scope: Literal["journal", "workflow"],
        name: str,
        value: Any,
        event: EventSpec | None,
        now: int,
    ) -> None:
        if scope == "journal":
            blob = codec.entry_to_blob(value, self.limits.max_payload_bytes)
        else:
            blob = codec.encode(value, limit=self.limits.max_payload_bytes, what="workflow state value")
        with self._cond:
            run = self._current(run_id, fence, ("running",))
            target = run.journals.setdefault(step, {}) if scope == "journal" else run.workflow_state
            target[name] = blob
            if event is not None:
                self._event(run, event[0], event[1])
            self._refresh(run)

    def advance(self, run_id: str, fence: int, step: int, commit: Advance) -> int:
        data = codec.encode(commit.data, limit=self.limits.max_payload_bytes, what="run data")
        output = codec.encode(commit.output, what="run output")
        with self._cond:
            run = self._current(run_id, fence, ("running",))
            if int(run.fields["step"]) != step:
                raise StaleFence(f"run {run_id} is at step {run.fields['step']}", run_id=run_id)
            fence = self._bump(run)
            run.journals.pop(step, None)
            run.fields.update(data=data, updated=commit.now, crashes=0)
            if commit.next_node is None:
                run.fields.update(status="completed", output=output)
                self._set_summary(run_id, "completed", commit.now)
                self.leases.pop(run_id, None)
            else:
                run.fields.update(node=commit.next_node, step=step + 1)
            for kind, payload in commit.events:
                self._event(run, kind, payload)
            self._refresh(run)
            return fence

    def park(self, run_id: str, fence: int, step: int, commit: Park) -> int:
        rec = commit.interrupt
        blob = codec.interrupt_to_blob(rec)
        with self._cond:
            run = self._current(run_id, fence, ("running",))
            if int(run.fields["step"]) != step:
                raise StaleFence(f"run {run_id} is at step {run.fields['step']}", run_id=run_id)
            run.interrupts.update(
                {f"r:{rec.request_id}": blob, f"s:{rec.request_id}": "pending", f"t:{rec.token_hash}": rec.request_id}
            )
            run.pending[rec.token_hash] = self._clock() + commit.ttl_ms
            self._index(codec.entry_of(rec), add=True)
            self.leases.pop(run_id, None)
            fence = self._bump(run)
            run.fields.update(
                status="waiting", waiting=rec.request_id, expires=rec.expires_at, updated=commit.now, crashes=0
            )
            self._event(run, "interrupt", commit.event)
            self._refresh(run, commit.ttl_ms + self.limits.expiry_grace_ms)
            return fence

    def finish(
        self,
        run_id: str,
        fence: int | None,
        status: Literal["failed", "cancelled"],
        error: Mapping[str, Any] | None,
        event: EventSpec,
        now: int,
    ) -> None:
        blob = codec.encode(dict(error), what="run error") if error else None
        with self._cond:
            run = self._current(run_id, fence)
            self._bump(run)
            run.fields.update(status=status, updated=now)
            if blob is not None:
                run.fields["error"] = blob
            self._set_summary(run_id, status, now)
            self.leases.pop(run_id, None)
            self._event(run, event[0], event[1])
            self._event(run, "done", {"status": status})
            self._refresh(run)

    def release(self, run_id: str, fence: int, step: int, event: Mapping[str, Any], now: int) -> int:
        with self._cond:
            run = self._current(run_id, fence, ("running",))
            if int(run.fields["step"]) != step:
                raise StaleFence(f"run {run_id} is at step {run.fields['step']}", run_id=run_id)
            fence = self._bump(run)
            run.fields.update(status="queued", updated=now)
            self.leases.pop(run_id, None)
            self.outbox[f"{run_id}:{step}:{fence}"] = now
            self._event(run, "node.deferred", event)
            self._refresh(run)
            return fence

    def lookup(self, run_id: str, token_hash: str, now: int) -> Lookup:
        with self._cond:
            run = self._live(run_id)
            request_id = run.interrupts.get(f"t:{token_hash}") if run else None
            if run is None or request_id is None:
                return Lookup("expired" if run is None and self._summary(run_id) else "unknown")
            record = codec.interrupt_from_blob(run.interrupts[f"r:{request_id}"])
            status = run.interrupts[f"s:{request_id}"]
            if status == "pending" and not self._pending_live(run, token_hash):
                status = "expired"
            return Lookup(status, record, int(run.fields["fence"]))

    def resume(self, run_id: str, answer: Answer, handoff: Handoff | None = None) -> ResumeCommit:
        entry = codec.entry_to_blob(answer.entry, self.limits.max_answer_bytes)
        with self._cond:
            run = self._live(run_id)
            request_id = run.interrupts.get(f"t:{answer.token_hash}") if run else None
            if run is None or request_id is None:
                gone = run is None and self._summary(run_id) is not None
                return ResumeCommit(ResumeOutcome.EXPIRED if gone else ResumeOutcome.UNKNOWN)
            if answer.request_id is not None and answer.request_id != request_id:
                raise ValidationError(
                    f"requestId {answer.request_id!r} does not match the token's interrupt", request_id=request_id
                )
            if not self._pending_live(run, answer.token_hash):
                pending = run.interrupts[f"s:{request_id}"] == "pending"
                outcome = ResumeOutcome.EXPIRED if pending else ResumeOutcome.ALREADY_RESOLVED
                return ResumeCommit(outcome, request_id=request_id)
            del run.pending[answer.token_hash]
            record = answer.interrupt
            run.interrupts[f"s:{request_id}"] = "cancelled" if answer.cancelled else "resolved"
            run.journals.setdefault(record.step, {})[record.journal_field] = entry
            fence = self._bump(run)
            step = int(run.fields["step"])
            run.fields.update(status="queued", waiting="", expires="", updated=answer.now)
            self.outbox[f"{run_id}:{step}:{fence}"] = answer.now
            self._index(codec.entry_of(record), add=False)
            self._event(run, "interrupt.cancelled" if answer.cancelled else "interrupt.resumed", answer.event)
            self._refresh(run)
            return ResumeCommit(ResumeOutcome.ACCEPTED, step, fence, request_id)

    def recover(self, run_id: str, now: int, max_lost: int, error: Mapping[str, Any]) -> Requeue:
        with self._cond:
            if self.leases.get(run_id, 0) > now:
                return Requeue("alive")
            self.leases.pop(run_id, None)
            run = self._live(run_id)
            if run is None or run.fields["status"] != "running":
                return Requeue("gone")
            crashes = int(run.fields.get("crashes", 0)) + 1
            fence, step = self._bump(run), int(run.fields["step"])
            run.fields.update(crashes=crashes, updated=now)
            if crashes >= max_lost:
                run.fields.update(status="failed", error=codec.encode(dict(error), what="run error"))
                self._set_summary(run_id, "failed", now)
                self._event(run, "run.failed", {"error": dict(error)})
                self._event(run, "done", {"status": "failed"})
                return Requeue("failed", step, fence)
            run.fields["status"] = "queued"
            self.outbox[f"{run_id}:{step}:{fence}"] = now
            self._event(run, "node.recovered", {"reason": "worker lost"})
            return Requeue("requeued", step, fence)

    def redispatch(self, run_id: str, step: int, fence: int, now: int) -> Requeue:
        with self._cond:
            self.outbox.pop(f"{run_id}:{step}:{fence}", None)
            run = self._live(run_id)
            if (
                run is None
                or run.fields["status"] != "queued"
                or (int(run.fields["step"]), int(run.fields["fence"])) != (step, fence)
            ):
                return Requeue("gone")
            fence = self._bump(run)
            self.outbox[f"{run_id}:{step}:{fence}"] = now
            return Requeue("requeued", step, fence)

    def expire(self, entry: IndexEntry, now: int) -> str:
        with self._cond:
            run = self._live(entry.run_id)
            record = self._record(entry.run_id, entry.request_id)
            if run is not None and record is not None and self._pending_live(run, record.token_hash):
                return "pending"
            self._index(entry, add=False)
            if run is None or run.interrupts.get(f"s:{entry.request_id}") != "pending":
                return "gone"
            run.interrupts[f"s:{entry.request_id}"] = "expired"
            if run.fields["status"] == "waiting" and run.fields.get("waiting") == entry.request_id:
                self._bump(run)
                run.fields.update(status="expired", waiting="", updated=now)
                self._set_summary(entry.run_id, "expired", now)
                self._event(run, "interrupt.expired", {"requestId": entry.request_id, "expiresAt": entry.expires_at})
                self._event(run, "done", {"status": "expired"})
            return "expired"

    def due(self, now: int, outbox_age_ms: int, limit: int) -> Due:
        with self._cond:
            leases = [r for r, until in sorted(self.leases.items(), key=lambda kv: kv[1]) if until <= now][:limit]
            old = sorted((score, m) for m, score in self.outbox.items() if score <= now - outbox_age_ms)[:limit]
            members = self._indexes.get("expiring:", [])
            expired = members[: bisect.bisect_left(members, codec.time_floor(now))][:limit]
        stale = []
        for _, m in old:
            run_id, step, fence = m.rsplit(":", 2)
            stale.append((run_id, int(step), int(fence)))
        return Due(leases, stale, [codec.parse_member(m, "expiring") for m in expired])

    def try_lock(self, owner: str, ttl_ms: int) -> bool:
        with self._cond:
            now = self._clock()
            if self._lock is None or self._lock[1] <= now or self._lock[0] == owner:
                self._lock = (owner, now + ttl_ms)
                return True
            return False

    # --- reads ----------------------------------------------------------

    def get_run(self, run_id: str, now: int) -> RunRecord | None:
        with self._cond:
            run = self._live(run_id)
            if run is not None:
                return codec.run_from_fields(run_id, dict(run.fields))
            summary = self._summary(run_id)
        if summary is None:
            return None
        return codec.summary_record(run_id, summary)

    def get_interrupt(self, run_id: str, request_id: str) -> InterruptRecord | None:
        with self._cond:
            return self._record(run_id, request_id)

    def list_interrupts(self, query: InterruptQuery) -> InterruptListing:
        after = codec.parse_cursor(query.cursor, query.order)
        with self._cond:
            if query.run_id is not None:
                return InterruptListing(self._waiting_interrupt(query), None)
            members = self._indexes.get(f"{query.order}:{query.workflow or ''}", [])
            if query.order == "expiring":
                floor = codec.time_floor(query.now + 1)
                start = (
                    bisect.bisect_right(members, after)
                    if after and after > floor
                    else bisect.bisect_left(members, floor)
                )
                page = members[start : start + query.limit + 1]
            else:
                hi = bisect.bisect_left(members, after) if after else len(members)
                page = [m for m in reversed(members[:hi]) if codec.parse_member(m, "newest").expires_at > query.now]
                page = page[: query.limit + 1]
            items = []
            for member in page[: query.limit]:
                entry = codec.parse_member(member, query.order)
                record = self._record(entry.run_id, entry.request_id)
                if record is not None:
                    items.append(record)
        more = len(page) > query.limit
        return InterruptListing(items, codec.make_cursor(page[query.limit - 1], query.order) if more else None)

    def _waiting_interrupt(self, query: InterruptQuery) -> list[InterruptRecord]:
        run = self._live(query.run_id or "")
        waiting = run.fields.get("waiting") if run else None
        record = self._record(query.run_id or "", waiting) if waiting else None
        if record is None or record.expires_at <= query.now or query.workflow not in (None, record.workflow):
            return []
        return [record]

    def read_events(self, run_id: str, after: str, block_ms: int | None, count: int) -> list[StoredEvent]:
        deadline = time.monotonic() + (block_ms or 0) / 1000
        with self._cond:
            while True:
                run = self._live(run_id)
                events = [] if run is None else [e for e in run.events if _after(e[0], after)][:count]
                remaining = deadline - time.monotonic()
                if events or block_ms is None or remaining <= 0:
                    return [codec.event_from(i, k, b) for i, k, b in events]
                self._cond.wait(remaining)


def _after(entry_id: str, after: str) -> bool:
    a = tuple(int(x) for x in entry_id.split("-"))
    b = tuple(int(x) for x in (after if "-" in after else f"{after}-0").split("-"))
    return a > b
