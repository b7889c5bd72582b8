"""The arguments of each Lua script, one frozen dataclass per script (see :mod:`.scripts`).

Each class is checked against its script's header when this module is imported: the fields are
the header's names in its order (KEYS, then ARGV); ``keys()`` and ``args()`` render the call.
The store imports it with its first transition (``parkway._lazy``): a process that only reads
does not define these classes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .reads import Page as Page  # its home is reads.py (a listing defines it alone)
from .scripts import Args, schema
from .scripts import ScriptCall as ScriptCall  # its home is scripts.py (a call of any script)


@schema("lookup")
@dataclass(frozen=True)
class Lookup(Args):
    run: str
    summary: str
    token_field: str
    now: int
    status_prefix: str


@schema("refuse")
@dataclass(frozen=True)
class Refuse(Args):
    run: str
    summary: str
    token_field: str
    now: int
    status_field: str
    request_id: str
    count_field: str
    last_field: str
    refusal: bytes


@schema("redispatch")
@dataclass(frozen=True)
class Redispatch(Args):
    run: str
    outbox: str
    run_id: str
    step: int
    fence: int
    now: int
    member: str


@schema("write_entry")
@dataclass(frozen=True)
class WriteEntry(Args):
    run: str
    target: str
    journal: str
    state: str
    events: str
    summary: str
    metrics: str
    fence: int
    field: str
    blob: bytes
    event_type: str
    event: bytes
    maxlen: int
    retention: int
    again: int
    counts: list[Any]


@schema("prune")
@dataclass(frozen=True)
class Prune(Args):
    workflows: str
    newest: str
    expiring: str
    resolved: str
    cancelled: str
    expired: str
    pauses: str
    reclaimed: str
    workflow: str
    floor: Any


@schema("unlist")
@dataclass(frozen=True)
class Unlist(Args):
    index: str
    members: list[bytes]


@schema("release")
@dataclass(frozen=True)
class Release(Args):
    run: str
    events: str
    outbox: str
    leases: str
    summary: str
    metrics: str
    fence: int
    step: int
    now: int
    maxlen: int
    event: bytes
    run_id: str
    retention: int


# --- blocks: parts several scripts share (declared in _common.lua) --------------------------


@schema("ancestor")
@dataclass(frozen=True)
class Ancestor(Args):
    events: str
    run: str
    journal: str
    state: str
    summary: str
    fanout: str


@schema("closing")
@dataclass(frozen=True)
class Closing(Args):
    index: str
    end_field: str
    ended: bytes
    member: bytes
    created_field: str
    created: bytes | str


@schema("notice")
@dataclass(frozen=True)
class Notice(Args):
    on: str
    stream: str


@schema("parent")
@dataclass(frozen=True)
class Parent(Args):
    run: str
    journal: str
    state: str
    events: str
    summary: str
    outbox: str
    fanout: str
    child_run: str
    child_events: str
    child_state: str
    child_snapshots: str
    child_journal: str
    queues: list[str]
    run_id: str
    child_id: str
    field: str
    entry: bytes
    event_type: str
    event: bytes
    now: int
    maxlen: int
    retention: int
    job: list[Any]


@schema("below")
@dataclass(frozen=True)
class Below(Args):
    run: str
    state: str
    events: str
    summary: str
    fanout: str
    run_id: str
    parent: str


@schema("new_run")
@dataclass(frozen=True)
class NewRun(Args):
    run: str
    summary: str
    events: str
    outbox: str
    runs: str
    run_id: str
    workflow: str
    ref: str
    node: str
    input: bytes
    ttl: int
    now: int
    retention: int
    maxlen: int
    started: bytes
    member: str
    trace: str
    format: int


@schema("child")
@dataclass(frozen=True)
class Child(Args):
    run: str
    summary: str
    events: str
    run_id: str
    workflow: str
    ref: str
    node: str
    input: bytes
    ttl: int
    started: bytes
    field: str
    lineage: str
    check_field: str
    check_entry: bytes
    parent_event: bytes
    trace: str
    format: int
    job: list[Any]


# --- the scripts -----------------------------------------------------------------------------


@schema("create")
@dataclass(frozen=True)
class Create(Args):
    new: NewRun
    queues: list[str]
    authority: str
    job: list[Any]


@schema("fork")
@dataclass(frozen=True)
class Fork(Args):
    old_run: str
    old_summary: str
    old_snapshots: str
    new: NewRun
    queues: list[str]
    step: int
    job: list[Any]


@schema("begin")
@dataclass(frozen=True)
class Begin(Args):
    run: str
    journal: str
    leases: str
    outbox: str
    metrics: str
    events: str
    step: int | str
    fence: int
    now: int
    lease_until: int
    run_id: str
    member: str
    maxlen: int
    taking: str


@schema("advance")
@dataclass(frozen=True)
class Advance(Args):
    run: str
    journal: str
    state: str
    events: str
    summary: str
    leases: str
    metrics: str
    snapshots: str
    parent: Parent | None
    fence: int
    step: int
    data: bytes
    next_node: str
    output: bytes
    now: int
    retention: int
    maxlen: int
    run_id: str
    emitted: list[Any]
    counts: list[Any]


@schema("park")
@dataclass(frozen=True)
class Park(Args):
    run: str
    journal: str
    state: str
    events: str
    newest: str
    expiring: str
    leases: str
    summary: str
    workflows: str
    pauses: str
    snapshots: str
    notice: Notice
    filters: list[str]
    ancestors: list[Ancestor]
    fence: int
    step: int
    request_id: str
    short_id: str
    token_field: str
    status_field: str
    ttl: int
    now: int
    expires: int
    member_newest: bytes
    member_expiring: bytes
    buckets: str
    event: bytes
    maxlen: int
    grace: int
    run_id: str
    retention: int
    workflow: str
    pauses_maxlen: int
    paused: str
    ancestor_event: bytes | str
    gate: int | str
    record: list[Any]


@schema("first")
@dataclass(frozen=True)
class First(Args):
    park: Park
    child: NewRun
    queues: list[str]
    child_id: str
    check_field: str
    check_entry: bytes
    started: bytes
    lineage: str
    field: str
    job: list[Any]


@schema("finish")
@dataclass(frozen=True)
class Finish(Args):
    run: str
    state: str
    events: str
    summary: str
    leases: str
    metrics: str
    fanout: str
    parent: Parent | None
    below: list[Below]
    fence: int | str
    status: str
    error: bytes | str
    now: int
    retention: int
    maxlen: int
    event_type: str
    event: bytes
    done: bytes
    run_id: str
    failed_replay: bytes | str
    failed_type: bytes | str


@schema("spawn")
@dataclass(frozen=True)
class Spawn(Args):
    run: str
    journal: str
    state: str
    events: str
    summary: str
    leases: str
    outbox: str
    runs: str
    snapshots: str
    child: Child
    queues: list[str]
    fence: int
    step: int
    now: int
    run_id: str
    maxlen: int
    retention: int
    grace: int


@schema("fanout")
@dataclass(frozen=True)
class FanOut(Args):
    run: str
    journal: str
    state: str
    events: str
    summary: str
    leases: str
    outbox: str
    runs: str
    snapshots: str
    fanout: str
    queues: list[str]
    children: list[Child]
    fence: int
    step: int
    now: int
    run_id: str
    maxlen: int
    retention: int
    grace: int
    live: int
    left: int
    job: list[Any]


@schema("resume")
@dataclass(frozen=True)
class Resume(Args):
    run: str
    journal: str
    state: str
    events: str
    summary: str
    snapshots: str
    outbox: str
    newest: str
    expiring: str
    metrics: str
    leases: str
    closing: Closing
    notice: Notice
    filters: list[str]
    queues: list[str]
    token_field: str
    request_id: str
    field: str
    entry: bytes
    digest: str
    event: bytes
    now: int
    member_newest: bytes
    member_expiring: bytes
    run_id: str
    maxlen: int
    status: str
    event_type: str
    retention: int
    buckets: str
    status_prefix: str
    read_status: str
    created: int
    expires: int
    answered: str
    begin_until: int | str
    job: list[Any]


@schema("recover")
@dataclass(frozen=True)
class Recover(Args):
    run: str
    events: str
    outbox: str
    summary: str
    leases: str
    metrics: str
    parent: Parent | None
    run_id: str
    now: int
    max_lost: int
    retention: int
    maxlen: int
    recovered: bytes
    error: bytes
    failed_event: bytes
    done: bytes


@schema("expire")
@dataclass(frozen=True)
class Expire(Args):
    run: str
    events: str
    summary: str
    newest: str
    expiring: str
    journal: str
    state: str
    outbox: str
    metrics: str
    closing: Closing
    notice: Notice
    filters: list[str]
    parent: Parent | None
    request_id: str
    now: int
    member_newest: bytes
    member_expiring: bytes
    retention: int
    maxlen: int
    expired_event: bytes
    done: bytes
    action: str
    field: str
    entry: bytes
    error: bytes
    failed_event: bytes
    run_id: str
    status_field: str
    expires: int


@schema("escalate")
@dataclass(frozen=True)
class Escalate(Args):
    run: str
    events: str
    summary: str
    newest: str
    expiring: str
    journal: str
    state: str
    pauses: str
    snapshots: str
    notice: Notice
    left: list[str]
    joined: list[str]
    ancestors: list[Ancestor]
    request_id: str
    short_id: str
    now: int
    member_newest: bytes
    member_expiring: bytes
    new_member_newest: bytes
    new_member_expiring: bytes
    buckets: str
    status_field: str
    expires: int
    new_expires: int
    maxlen: int
    expired_event: bytes
    event: bytes
    ttl: int
    grace: int
    retention: int
    workflow: str
    pauses_maxlen: int
    run_id: str
    record: list[Any]


@schema("close_raced")
@dataclass(frozen=True)
class CloseRaced(Args):
    run: str
    summary: str
    newest: str
    expiring: str
    closing: Closing
    filters: list[str]
    status_field: str
    member_newest: bytes
    member_expiring: bytes
