"""The arguments of each session script (``lua/session_*.lua``), one frozen dataclass per script and
per block of ``lua/_session.lua``, checked against their headers when this module is imported (see
:mod:`parkway.adapters.redis.scripts.scripts`). Importing it adds this package's ``lua/`` folder to the
loader's folders, so the store loads these scripts like its own (``RedisStore.add_scripts``).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

from ..adapters.redis.scripts import scripts
from ..adapters.redis.scripts.calls import NewRun, Resume
from ..adapters.redis.scripts.scripts import Args, schema

scripts.add_folder(resources.files(__package__).joinpath("lua"))


@schema("session")
@dataclass(frozen=True)
class Session(Args):
    hash: str
    messages: str
    up: str
    open: str
    interrupts: str
    deliveries: str
    live: str
    events: str
    path: str
    ended: str


@schema("live")
@dataclass(frozen=True)
class Live(Args):
    run: str
    events: str
    snapshots: str
    summary: str
    run_id: str


@schema("live_at")
@dataclass(frozen=True)
class LiveAt(Args):
    run: str
    events: str
    snapshots: str
    summary: str
    journal: str
    run_id: str
    step: int
    job: list[Any]


@schema("kept")
@dataclass(frozen=True)
class Kept(Args):
    seq: str
    entry: bytes
    event: bytes


@schema("delivery")
@dataclass(frozen=True)
class Delivery(Args):
    resume: Resume | None
    request_id: str
    run_id: str
    delivered: bytes
    undelivered: bytes


@schema("session_open")
@dataclass(frozen=True)
class SessionOpen(Args):
    session: Session
    agent: str
    workflow: str
    owner: str
    tenant: str
    ttl: int
    now: int
    maxlen: int
    event: bytes
    incarnation: str


@schema("session_raise")
@dataclass(frozen=True)
class SessionRaise(Args):
    session: Session
    interrupt_id: str
    anchor: str
    record: bytes
    event: bytes
    now: int
    maxlen: int


@schema("session_send")
@dataclass(frozen=True)
class SessionSend(Args):
    session: Session
    new: NewRun
    queues: list[str]
    live: list[Live]
    mode: str
    edited: str
    parent: str
    message_id: str
    message: bytes
    now: int
    maxlen: int
    added: bytes
    dispatched: bytes
    run_id: str
    session_id: str
    job: list[Any]


@schema("session_settle")
@dataclass(frozen=True)
class SessionSettle(Args):
    session: Session
    run: str
    journal: str
    events: str
    leases: str
    fence: int
    step: int
    run_id: str
    mode: str
    field: str
    entry: bytes
    message_id: str
    message: bytes
    now: int
    maxlen: int
    added: bytes
    held: bytes
    path_to: str = ""


@schema("session_clear")
@dataclass(frozen=True)
class SessionClear(Args):
    session: Session
    new: NewRun
    queues: list[str]
    live: list[LiveAt]
    interrupt_id: str
    record: bytes
    now: int
    maxlen: int
    cleared: bytes
    resumed: bytes
    head: str
    run_id: str
    dispatched: bytes
    entry: bytes
    session_id: str
    kept: list[Kept]
    job: list[Any]


@schema("session_answer")
@dataclass(frozen=True)
class SessionAnswer(Args):
    session: Session
    resume: Resume
    request_id: str
    run_id: str
    record: bytes
    now: int
    maxlen: int
    delivered: bytes
    kept: bytes


@schema("session_switch")
@dataclass(frozen=True)
class SessionSwitch(Args):
    session: Session
    deliveries: list[Delivery]
    head: str
    now: int
    maxlen: int
    switched: bytes
