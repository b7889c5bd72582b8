"""What the client returns, made from what the store read: interrupts (with their tokens when
asked), runs and their summaries; the interrupts it read last (answered without a lookup); how a
stream reads."""

from __future__ import annotations

import threading
import time
from typing import Literal

from ..runtime import tokens
from ..runtime.errors import WaitTimeout
from ..runtime.protocol import Interrupt, InterruptLifecycle, Run, RunError, RunStatus, RunSummary
from ..runtime.store import InterruptRecord, Lifecycle, RunRecord

KNOWN_INTERRUPTS = 1024
"""how many pending interrupts a client keeps as it read them (listings, lookups), so that answering
one of them needs no lookup first"""


def interrupt_view(record: InterruptRecord, secret: bytes, *, include_token: bool) -> Interrupt:
    """An interrupt as a caller reads it (with its resume token, minted under ``secret``, if asked)."""
    token = tokens.mint(secret, record.run_id, record.request_id) if include_token else None
    life = record.lifecycle
    return Interrupt(
        request_id=record.request_id,
        run_id=record.run_id,
        workflow=record.workflow,
        node=record.node,
        step=record.step,
        request=record.request,
        lifecycle=lifecycle(life) if life is not None else None,
        created_at=record.created_at,
        expires_at=record.expires_at,
        resume_token=token,
        root_run_id=record.root_run_id,
        parent_run_id=record.parent_run_id,
        version=record.version,
        audience=record.audience,
        tenant=record.tenant,
    )



def read_window(run_id: str, deadline: float | None, timeout: float | None) -> int:
    """How long (ms) the next blocking read of a stream may wait: at most a second, never past the
    ``deadline`` (``time.monotonic()``), past which WaitTimeout is raised."""
    remaining = None if deadline is None else deadline - time.monotonic()
    if remaining is not None and remaining <= 0:
        raise WaitTimeout(f"no end of run {run_id}'s stream within {timeout}s", run_id=run_id)
    return 1000 if remaining is None else max(1, int(min(remaining, 1.0) * 1000))


def ends_stream(event_type: str, until: Literal["done", "settled"]) -> bool:
    """Whether a stream read ``until`` ends at an event of this type."""
    return event_type == "done" or (until == "settled" and event_type == "interrupt")


class ReadInterrupts:
    """The pending interrupts a client read last, at most ``size`` (the oldest read goes first), by
    run and request id (what a verified token names). Safe to share between threads."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._records: dict[tuple[str, str], InterruptRecord] = {}
        self._lock = threading.Lock()

    def put(self, record: InterruptRecord) -> None:
        key = (record.run_id, record.request_id)
        with self._lock:
            self._records.pop(key, None)
            self._records[key] = record
            if len(self._records) > self._size:
                del self._records[next(iter(self._records))]

    def get(self, run_id: str, request_id: str) -> InterruptRecord | None:
        with self._lock:
            return self._records.get((run_id, request_id))

    def forget(self, run_id: str, request_id: str) -> None:
        with self._lock:
            self._records.pop((run_id, request_id), None)



def lifecycle(life: Lifecycle) -> InterruptLifecycle:
    """The public form of a lifecycle record (its captured request is the interrupt's ``request``)."""
    return InterruptLifecycle.model_validate({k: v for k, v in vars(life).items() if k != "request"})



def run_summary(record: RunRecord) -> RunSummary:
    """A run as a listing shows it."""
    return RunSummary(
        run_id=record.run_id, workflow=record.workflow, status=record.status, node=record.node, step=record.step,
        created_at=record.created_at, updated_at=record.updated_at, tenant=record.tenant, owner=record.owner,
        session=record.session, parent_run_id=record.lineage[0][0] if record.lineage else None,
    )


def run_view(record: RunRecord, interrupt: Interrupt | None) -> Run:
    """The run as a caller reads it. Its status is the stored one, never derived from the clock: a
    run past its interrupt's deadline reads ``waiting`` (the interrupt's ``expires_at`` in the past)
    until the reconciler applies the expiry policy, since the policy may fail it, replay it or ask
    again. Only a run that really ends ``expired`` (or whose records are gone) reads so."""
    status = record.status
    return Run(
        run_id=record.run_id,
        workflow=record.workflow,
        status=status,
        node=record.node,
        step=record.step,
        input=record.input,
        data=record.data,
        output=record.output,
        error=RunError(**record.error) if record.error else None,
        created_at=record.created_at,
        updated_at=record.updated_at,
        expires_at=record.expires_at,
        interrupt=interrupt if status is RunStatus.WAITING else None,
        tenant=record.tenant,
        owner=record.owner,
        session=record.session,
    )
