"""What crosses the public API: interrupt requests, runs, events, outcomes.

Pydantic models for what users build and read (requests, interrupts, runs,
events); ``str`` enums for statuses and outcomes; ids validated here, before
any of them can reach a Redis key.
"""

from __future__ import annotations

import base64
import re
import secrets
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from . import kinds
from .errors import InvalidId, ValidationError
from .kinds.choice import infer_kind

_NAME = r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}"
NAME_PATTERN = re.compile(_NAME)
"""What a caller names: a tenant, an owner, and the name it gives a run or a session: 1-64
letters, digits, '_' and '-', starting with a letter or digit."""
TENANT_SEPARATOR = "~"
"""what separates a tenant's name from the name of its run or session in their id"""
ID_PATTERN = re.compile(rf"(?:{_NAME}{TENANT_SEPARATOR})?{_NAME}")
"""Run, session, request and workflow ids: a name, or a tenant's name and a name,
``<tenant>~<name>`` (a run or session of a tenant: :func:`scoped_id`; a request id parkway mints
for it carries it too). Each part 1-64 letters, digits, '_' and '-', starting with a letter or digit.

Always applied with ``fullmatch``: ``$`` would also match before a trailing newline. No ':',
'{', '}', '*', '.', whitespace, newline or glob character can reach a key."""
MAX_ID_LENGTH = 64 + 1 + 64
"""the longest id: a tenant's name, the separator, a name"""


def _shown(value: object) -> str:
    return repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."


RUN_ID_PREFIX = "run_"
"""what a run id parkway chooses starts with (:func:`minted_run_id`)"""


def minted_run_id() -> str:
    """A new run id, when its caller chose none: ``run_`` and 128 random bits as 26 lower-case base32
    characters. Its run's key names (``pw:{<run id>}:run``) are then 39 bytes and its index members
    42: each within the 44 bytes that take jemalloc's 48-byte allocation, where ``run_`` and 32 hex
    digits made them 45 and 48 bytes, each a 64-byte one (bench/weight.py's bytes by key)."""
    return RUN_ID_PREFIX + base64.b32encode(secrets.token_bytes(16)).decode("ascii")[:26].lower()


def check_id(value: object, what: str = "id") -> str:
    """Return ``value`` if it is a valid id, else raise :class:`InvalidId`."""
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        raise InvalidId(
            f"invalid {what} {_shown(value)}: use 1-64 letters, digits, '_' or '-', starting with a letter or digit "
            "(a tenant's run or session: <tenant>~<name>)",
            what=what,
        )
    return value


def check_name(value: object, what: str = "name") -> str:
    """Return ``value`` if it is a valid name (an id with no tenant part), else raise :class:`InvalidId`."""
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value):
        raise InvalidId(
            f"invalid {what} {_shown(value)}: use 1-64 letters, digits, '_' or '-', starting with a letter or digit",
            what=what,
        )
    return value


def scoped_id(given: str, tenant: str | None, what: str = "run id") -> str:
    """The id of a new run or session of ``tenant`` that its creator calls ``given``: a tenant's ids
    are ``<tenant>~<name>``, so two tenants that choose the same name get two runs (or sessions),
    and neither can take, block or learn of the other's; with no tenant, the name itself. ``given``
    may already be scoped, by ``tenant`` only (InvalidId otherwise, whether or not that id is taken)."""
    scope, sep, name = check_id(given, what).rpartition(TENANT_SEPARATOR)
    if sep and scope != tenant:
        raise InvalidId(f"{what} {given!r} is in tenant {scope!r}'s scope: only a run or session of that tenant "
                        "may have it", what=what)
    if tenant is None:
        return name
    return f"{check_name(tenant, 'tenant')}{TENANT_SEPARATOR}{name}"


def name_of(scoped: str) -> str:
    """The name part of an id (all of it for an id of no tenant): what its creator chose."""
    return scoped.rpartition(TENANT_SEPARATOR)[2]


EVENT_ID_PATTERN = re.compile(r"[0-9]{1,20}(-[0-9]{1,20})?")
MAX_TTL_MS = 366 * 24 * 3600 * 1000
"""a year (and a day): the longest a run's records or a pause may live (far larger values overflow
the times computed from them)"""
MAX_ID_PART = 2**64 - 1
"""each part of a Redis stream id is an unsigned 64-bit integer: Redis refuses a larger one"""


def _in_range(event_id: str) -> bool:
    """Both parts fit 64 bits, and the id has a next one (a read after it starts there; after the
    very last id Redis has none)."""
    ms, _, seq = event_id.partition("-")
    return int(ms) < MAX_ID_PART and int(seq or 0) <= MAX_ID_PART
"""A position in an event stream: a Redis stream id (``<ms>-<seq>``, or ``<ms>``); ``0`` = the start."""


def check_event_id(value: object, what: str = "after") -> str:
    """Return ``value`` if it is an event id (a stream position), else raise :class:`ValidationError`."""
    if not isinstance(value, str) or not EVENT_ID_PATTERN.fullmatch(value) or not _in_range(value):
        raise ValidationError(
            f"{what} must be an event id such as 1700000000000-0 (or 0 for the start), not {_shown(value)}"
        )
    return value


AUDIENCE_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}(:[A-Za-z0-9][A-Za-z0-9_.@-]{0,63})?")
"""Who an interrupt asks: one string, a tag and an assignee alike, conventionally ``<kind>:<name>``
(``team:ops``, ``user:ann``, ``role:approver``) or a bare name; letters, digits, '_', '.', '@' and
'-', at most one ':'. It names a listing index key, so nothing else may reach it."""


def check_audience(value: object, what: str = "audience") -> str:
    """Return ``value`` if it is a valid audience, else raise :class:`ValidationError`."""
    if not isinstance(value, str) or not AUDIENCE_PATTERN.fullmatch(value):
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        raise ValidationError(
            f"invalid {what} {shown}: use '<kind>:<name>' such as 'team:ops' or 'user:ann' (each part 1-64 "
            "letters, digits, '_', '.', '@' or '-', starting with a letter or digit)"
        )
    return value


MAX_DEPTH = 32
"""How deeply lists and dicts may nest in what crosses the public API (run input, answers, metadata)."""


def check_depth(
    value: object, what: str, limit: int = MAX_DEPTH, error: type[ValidationError] = ValidationError
) -> None:
    """Raise ``error`` if ``value`` nests lists or dicts deeper than ``limit``.

    Iterative, so a hostile value cannot exhaust the interpreter's stack while being checked."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Iterable[object] = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > limit:
            raise error(f"{what} nests lists and objects more than {limit} levels deep")
        stack.extend((child, depth + 1) for child in children)


class RunStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"

    @property
    def finished(self) -> bool:
        return self in _FINISHED


_FINISHED = {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.EXPIRED}


class ResumeOutcome(StrEnum):
    ACCEPTED = "accepted"
    ALREADY_RESOLVED = "already_resolved"
    EXPIRED = "expired"
    UNKNOWN = "unknown"


class CancelOutcome(StrEnum):
    """A run's cancel: ``cancelled``, or ``already_resolved`` for a run that had finished (a no-op,
    with its status), the word a second answer of an interrupt gets. Until 0.x this read
    ``already_finished``: ``ALREADY_FINISHED`` stays as another name of the same member."""

    CANCELLED = "cancelled"
    ALREADY_RESOLVED = "already_resolved"
    ALREADY_FINISHED = "already_resolved"  # the old name (its word was already_finished)


class _Model(BaseModel):
    # camelCase on the wire (``model_dump(by_alias=True)``), as the events are; snake_case in Python
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, alias_generator=to_camel)


class Option(_Model):
    """One choice a person can pick.

    Other fields (say an option's ``value``) are kept with the request but never shown to
    clients: the node maps the picked id back to them."""

    model_config = ConfigDict(frozen=True, extra="allow", populate_by_name=True)

    id: str = Field(min_length=1, max_length=200)
    label: str = Field(min_length=1, max_length=1000)
    description: str | None = Field(default=None, max_length=4000)

    def public(self) -> dict[str, Any]:
        return {"id": self.id, "label": self.label, **({"description": self.description} if self.description else {})}


if TYPE_CHECKING:
    RequestKind = str
else:
    RequestKind = Literal[kinds.names()]
"""the name of a registered interrupt kind (:mod:`parkway.runtime.kinds`)"""



class InterruptRequest(_Model):
    """What a node asks a person.

    ``text`` takes free text; ``choice`` one option id; ``multi-choice`` one
    or more option ids. A *dynamic picker* is a choice or multi-choice with a
    ``schema_id`` and no options: the client resolves the options from its
    own data and parkway accepts any non-empty id. A ``contract`` request is
    built by ``use_interrupt(contract=...)``: its ``payload`` fits the
    contract's request model, and an answer must fit its response model
    (see :mod:`parkway.runtime.contracts`).
    """

    kind: RequestKind
    question: str = Field(default="", max_length=4000)
    options: tuple[Option, ...] = ()
    schema_id: str | None = Field(default=None, min_length=1, max_length=200, alias="schemaId")
    max_length: int = Field(default=10_000, ge=1, le=1_000_000, alias="maxLength")
    meta: dict[str, Any] = Field(default_factory=dict)
    schema_version: int | None = Field(default=None, ge=1, alias="schemaVersion")
    payload: dict[str, Any] | None = None
    """a contract request's data (validated against the contract's request model)"""
    spec: dict[str, Any] | None = Field(default=None, description=(
        "the settings of its kind, checked and normalised by the kind (see parkway.runtime.kinds)"))
    contract_ref: str | None = Field(default=None, max_length=300, alias="contractRef", exclude=True)
    """where the contract is defined (``module:attribute``): kept for the resuming client (``stored``),
    never shown (a dump leaves it out: the HTTP API, the CLI, a webhook's body, a session's view).
    ``use_interrupt`` always sets it; it is None on an ended interrupt's request read from its
    lifecycle record, which keeps the request as clients saw it (it cannot be answered any more)"""

    @model_validator(mode="before")
    @classmethod
    def _inferred(cls, raw: Any) -> Any:
        raw = infer_kind(raw)
        found = kinds.find(raw.get("kind")) if isinstance(raw, Mapping) else None
        lifted = found.spec_keys & set(raw) if found is not None else set()
        spec = raw.get("spec") if isinstance(raw, Mapping) else None
        if lifted and (spec is None or isinstance(spec, Mapping)):  # its settings at the top level: in its spec
            spec = {**(spec or {}), **{k: raw[k] for k in lifted}}
            raw = {**{k: v for k, v in raw.items() if k not in lifted}, "spec": spec}
        return raw

    @classmethod
    def kind_of(cls, raw: Mapping[str, Any]) -> RequestKind | None:
        """The kind validation reads ``raw`` as (its other shapes inferred as ``infer_kind``),
        without validating the rest; None if it would read none (validating it raises)."""
        try:
            kind = infer_kind(raw).get("kind")
        except ValueError:
            return None
        return kind if kinds.find(kind) is not None else None

    @property
    def multiple(self) -> bool:
        return kinds.get(self.kind).multiple

    @property
    def is_picker(self) -> bool:
        return kinds.get(self.kind).is_picker(self)

    @model_validator(mode="after")
    def _shape(self) -> InterruptRequest:
        spec = kinds.get(self.kind).check_request(self)  # its kind's shape, and its settings normalised
        if spec != self.spec:
            object.__setattr__(self, "spec", spec)  # (frozen: set once, while it is built)
        return self

    def public(self) -> dict[str, Any]:
        """The request as clients see it (camelCase, with ``multiple``)."""
        if not self.meta and self.payload is None and type(self) is InterruptRequest:
            # what the dump below gives such a request, key for key and in its order, written out: a
            # resume's lifecycle record asks it of every answer, and the dump took 4 us of its 5
            out: dict[str, Any] = {"kind": self.kind, "question": self.question,
                                   "options": [option.public() for option in self.options]}
            if self.schema_id is not None:
                out["schemaId"] = self.schema_id
            if self.schema_version is not None:
                out["schemaVersion"] = self.schema_version
            if self.spec is not None:
                out["spec"] = self.spec
            out["multiple"] = self.multiple
            return out
        out = self.model_dump(by_alias=True, exclude_none=True, exclude={"max_length", "contract_ref"})
        out["options"] = [option.public() for option in self.options]  # a list, empty too (JSON's shape)
        out["multiple"] = self.multiple
        if not self.meta:
            out.pop("meta", None)
        return out

    def stored(self) -> dict[str, Any]:
        """The request as the store keeps it: every field, ``contractRef`` too (which a dump leaves out)."""
        out = self.model_dump(by_alias=True, exclude_none=True)
        if self.contract_ref is not None:
            out["contractRef"] = self.contract_ref
        return out


class InterruptLifecycle(_Model):
    """An interrupt's lifecycle record (``parkway.runtime.telemetry``): kept with its run's summary,
    so it reads for the retention of run summaries after the run's records are gone."""

    status: Literal["pending", "resolved", "cancelled", "expired"]
    presentation: Literal["static-options", "dynamic-picker", "freeform", "contract"]
    option_count: int = Field(description="options the server embedded (0 for a picker, text or contract)")
    created_at: int = Field(description="epoch milliseconds")
    capture: tuple[str, ...] = Field(description="what the record may hold: input (the request), output (the answer)")
    schema_id: str | None = None
    schema_version: int | None = None
    outcome: Literal["resumed", "resume_failed", "cancelled", "expired"] | None = Field(
        default=None, description="how it ended; resume_failed: its answer was accepted and the node's replay "
        "with it failed the run. None while it is open")
    ended_at: int | None = Field(default=None, description="epoch milliseconds")
    wait_ms: int | None = Field(default=None, description="from its creation to its end")
    responder: str | None = None
    reason: str | None = Field(default=None, description="a cancellation's reason, the expiry policy applied, "
                               "or the failed replay's error (its type only when output is not captured)")
    answer: Any = Field(default=None, description="the answer, when output is captured")
    failures: int = Field(default=0, description="answers refused while it was open (it stayed open)")
    last_failure: str | None = Field(default=None, description="why the last one was refused (its error's type "
                                     "only when output is not captured)")
    last_failure_at: int | None = None


class Interrupt(_Model):
    """An interrupt, as ``list_interrupts``, ``get_interrupt`` and ``get_run`` show it. ``request`` is
    None for an interrupt that ended whose lifecycle record does not capture its input."""

    request_id: str
    run_id: str
    workflow: str
    node: str
    step: int
    request: InterruptRequest | None
    created_at: int = Field(description="epoch milliseconds")
    expires_at: int = Field(description="epoch milliseconds")
    resume_token: str | None = None
    root_run_id: str | None = Field(default=None, description="for a child run's interrupt: the root of its tree")
    parent_run_id: str | None = Field(default=None, description="for a child run's interrupt: the run waiting on it")
    version: str | None = Field(default=None, description="the workflow's version when it paused (declared, "
                                "or code-<digest of the node's code>)")
    audience: str | None = Field(default=None, description="who is asked (e.g. team:ops, user:ann); an "
                                 "escalation changes it")
    tenant: str | None = Field(default=None, description="the tenant of the run (start(tenant=))")
    lifecycle: InterruptLifecycle | None = Field(default=None, description="its lifecycle record (None for an "
                                                 "interrupt made before parkway kept them)")

    def asked(self) -> InterruptRequest:
        """Its request; ValidationError for an ended interrupt whose record does not capture it."""
        if self.request is None:
            raise ValidationError(f"interrupt {self.request_id} ended and its request was not captured")
        return self.request


class RunError(_Model):
    message: str
    type: str
    traceback: str = ""
    node: str | None = None


class Run(_Model):
    """A run as read from the store."""

    run_id: str
    workflow: str
    status: RunStatus
    node: str | None = None
    step: int = 0
    input: Any = None
    data: dict[str, Any] = Field(default_factory=dict)
    output: Any = None
    error: RunError | None = None
    created_at: int = 0
    updated_at: int = 0
    expires_at: int | None = None
    interrupt: Interrupt | None = None
    tenant: str | None = Field(default=None, description="the tenant it belongs to (start(tenant=))")
    owner: str | None = Field(default=None, description="the user it belongs to (None: its tenant's)")
    session: str | None = Field(default=None, description="the session whose branch run it is (or whose branch "
                                "run's child)")


class Event(_Model):
    """One entry of a run's event stream."""

    id: str = Field(description="stream position; pass it as `after` to continue")
    type: str
    run_id: str
    ts: int = Field(description="epoch milliseconds")
    data: dict[str, Any] = Field(default_factory=dict)


class ResumeResult(_Model):
    outcome: ResumeOutcome
    run_id: str | None = None
    request_id: str | None = None

    @property
    def accepted(self) -> bool:
        return self.outcome is ResumeOutcome.ACCEPTED


class ResumeOrStartResult(_Model):
    """What ``resume_or_start`` did: ``resumed`` (the answer was accepted), ``started`` (the
    interrupt had expired: a new run ``run_id`` started, ``restarted_from`` the old one), or the
    resume's own outcome when it did neither (``already_resolved``, ``unknown``; ``expired`` for a
    child run's interrupt, which is never started again as a root)."""

    outcome: Literal["resumed", "started", "already_resolved", "expired", "unknown"]
    run_id: str | None = None
    request_id: str | None = None
    restarted_from: str | None = None

    @property
    def started(self) -> bool:
        return self.outcome == "started"


class CancelResult(_Model):
    outcome: CancelOutcome
    run_id: str
    status: RunStatus


class InterruptPage(_Model):
    items: tuple[Interrupt, ...]
    next_cursor: str | None = None
    budget_reached: bool = Field(default=False, description=(
        "the listing read as many interrupts as one request may and stopped before its page was full: "
        "next_cursor reads on"))
    missing_shards: tuple[int, ...] = Field(default=(), description=(
        "shards (by their place in PARKWAY_SHARDS, from 0) that did not answer within a second: the page "
        "holds what the other shards hold"))


class RunSummary(_Model):
    """A run as a listing of runs shows it (``Parkway.list_runs``; ``get_run`` reads the whole run)."""

    run_id: str
    workflow: str
    status: RunStatus
    node: str | None = None
    step: int = 0
    created_at: int = Field(description="epoch milliseconds")
    updated_at: int = Field(description="epoch milliseconds")
    tenant: str | None = None
    owner: str | None = None
    session: str | None = Field(default=None, description="the session whose branch run it is")
    parent_run_id: str | None = Field(default=None, description="the run that started it, for a child run")


class RunPage(_Model):
    items: tuple[RunSummary, ...]
    next_cursor: str | None = None
    missing_shards: tuple[int, ...] = Field(default=(), description=(
        "shards (by their place in PARKWAY_SHARDS, from 0) that did not answer within a second: the page "
        "holds what the other shards hold"))


class WorkerSeen(_Model):
    """A worker as RQ's worker registry shows it (parkway's workers register there like any RQ worker)."""

    name: str
    host: str | None = None
    pid: int | None = None
    started_at: int | None = Field(default=None, description="epoch milliseconds")
    heartbeat_at: int | None = Field(default=None, description="epoch milliseconds of its last heartbeat")


class DeploymentStatus(_Model):
    """What ``Parkway.status()`` and ``parkway status`` report of a deployment at one moment."""

    queue: str
    workers: tuple[WorkerSeen, ...]
    running: int = Field(description="activations executing now (runs holding a lease)")
    queued: int = Field(description="jobs waiting on the RQ queue")
    outstanding: int = Field(description="jobs enqueued (or to enqueue) and not yet begun (the outbox)")
    oldest_outstanding_ms: int | None = Field(default=None, description="how long the oldest of those has waited")
    runs_finished: dict[str, int] = Field(description="runs that ended, by final status, since the deployment began")
    attempts: int = Field(description="activations begun (first attempts, replays and retries)")
    recovered: int = Field(description="activations taken back from a worker that stopped mid-job")
    pending: dict[str, int] = Field(description="pending, unexpired interrupts by workflow")
    notices: int = Field(0, description="notifications written and not yet delivered (parkway.channels)")
    notices_dead: int = Field(0, description="notifications given up on (dead letters: parkway.channels)")
