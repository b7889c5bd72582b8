"""The physical layout of a run's records: the fields of its hash and summary, how an interrupt's
record and a parked run's events are kept in them, and how each is read back.

This package (``layout``) alone knows those fields; the store's transitions write through it and every reader,
sync (``RedisStore``) or asyncio (the HTTP server's event streams), reads through it. Its
functions are sans-IO: they take Redis's raw replies (an ``HGETALL`` as ``{bytes: bytes}``, an
``XREAD`` as redis-py returns it) and return parkway's records, or, for a read of several round
trips, are a plan (``read_events``) that a sync or an asyncio driver runs. The keys themselves
are :mod:`.keys`'; the names of journal fields are the runtime's (:mod:`parkway.runtime.journal`).
The Lua scripts write the same fields, named from here: ``HASH_FIELDS``, ``HASH_PREFIXES`` and
``STORED_VALUES`` are generated into every script (``F.status``, ``P.status .. req``, ``V.waiting``:
``scripts.fields_lua``), and a script reads a hash by those names (``hmget``), never spelling one.

Sizes. Every field name and value of a run's hash is at most ``PART_BYTES`` (64) bytes, so the
hash keeps Redis's compact listpack encoding (``hash-max-listpack-value``) where one longer
value would turn it into a hash table several times its size: an interrupt's record is split
into parts, a minted request id is named without its run id (the key has it: ``short_id``), a
parked run's few small events are folded into its hash (``FOLD_MAX``).

Formats. Every record says the stored format it was written in (invariant 15): the run hash in its
``fmt`` field, absent for ``1`` (every record written before formats were counted). A record keeps
the format it was created in for life; a process creates records in the format every live process
reads (:mod:`.formats`), and refuses a record of a format newer than ``READS_FORMATS`` as it found it
(``FormatTooNew``; ``begin.lua`` too: ``FORMAT_NEWEST`` in every script). Format 2 names the run hash's
creation time ``cr`` instead of ``created`` (``created_of``: 5 bytes less per run, the cost issue's
shorter names; a format-1 reader would find the run incomplete). The summary (with the interrupts'
lifecycle records it holds) and a session's hash are the same in both formats: they say it the same way
(``fmt``, absent: 1, refused when newer: ``summary_record``, the sessions' store), and a later format
that changes them writes it. A job carries no stored form of its own (RQ's job hash names the run, the
step and the fence; parkway's worker reads its run), so its run's format is its format; except the
queue element of an attempt a resume began (format 3, written only while every live process reads
format 3: ``begin_at_resume`` in _resume.lua, read by ``begun_attempt``): ``<job id> <lease end ms>
<the begin's reply>``, the reply as ``<n> `` then length-prefixed strings (``<len>:<bytes>``: the run's
n field/value items, then its journal's), each byte from 128 up written as its Latin-1 character in
UTF-8 (RQ decodes a popped element as UTF-8). Format 3 records are otherwise format 2's. Format 4
(``TRIMMED_FORMAT``, ``BUCKETS_FORMAT``) is format 3 with a parked run's hash in jemalloc's 640-byte
class instead of 768 (a bench.flows:cycle run: listpack ~620-624 bytes, 763 in format 3): its park
writes no ``paused`` (the latest record has that step and version; a begin's reply carries the record
then: ``attempt_fields`` in _common.lua, ``_paused_version``), ``updated`` in ms after ``cr``
(``updated_of``), ``~0``'s id in ms after ``cr`` and node.started's and the interrupt event's data
without the head the hash makes again (``folded_head``); any time or id under ``RELATIVE_MS`` is
relative, so readers read both forms without asking the format. Its interrupt records are written
trimmed (``interrupt_to_blob``), which a reader of formats 1-3 reads as well. In every format the spent
``fresh`` is deleted (absent reads as spent). Format 4's writers also index members in buckets of at
most ``keys.BUCKET_MAX`` (``ix_add`` in _common.lua), and every reader of format 4 reads both an index's
buckets and its single zset (``page.lua``), so a run indexed the old way stays listed until it ends.

The run hash ``pw:{R}:run`` (``run_record`` reads its own fields):

==============================  ================================================================
field                           holds
==============================  ================================================================
wf, ref, status, node, step,    the run's record; ``data`` is absent until a node completes (the
fence, input, data, output,     input is it); ``waiting``: a request id (as ``short_id``), ``child:<run
error, created, updated, ttl,   id>``, ``children`` (a fan-out's, ``fl``: how many children it has
expires, waiting, fl, paused    left to start) or ``session``; ``paused``: ``<step> <code version>``
                                of the last pause (formats 1-3); ``updated``: ms, or in format 4 as a
                                park writes it ms after ``cr``
fmt                             its stored format (absent: 1); ``created`` is ``cr`` in format 2
tenant, owner, origin, session  whose it is, written at creation (session: a branch run's, and
                                its children's)
leaf                            a session's branch run's: the message it answers (where the path
                                its node reads ends), written by the session's script at creation
parent, pstep, pfield, lineage  a child's: where its outcome goes (``PARENT_FIELDS``), its
                                ancestors (``run:step`` words, parent first)
rc, rs                          the child racing an interrupt (``use_first(child=)``) and that
                                interrupt's status field
ans                             the interrupt last answered, for finish: ``<step> <its lifecycle
                                x: field> <1 | 0: output captured>``
tg                              a session's branch run's: it was handed a cleared interrupt's
                                trigger (its records are kept whole when it ends; see
                                ``trim_ended`` in ``sessions/lua/_session.lua``)
until                           ms (by the callers' clocks) the run's records' TTL reaches, as the
                                transition that last read (``PTTL``) or set it wrote it (a late
                                one: never past the real one, within ``CLOCK_TRUST_MS``); absent:
                                not known (a transition then reads the TTL)
fresh                           1 from its creation until its first attempt begins (deleted then;
                                ``''`` in records written before):
                                nothing is in its journal yet, so that begin reads none; a script
                                that writes the journal of a run before that drops it
rb                              the fence whose attempt a resume began (format 3: its lease taken by
                                the resume, its queue element carrying the begun attempt:
                                ``begin_at_resume`` in _resume.lua); a lapse of that lease is
                                requeued without counting a lost attempt (recover.lua), and the
                                element's worker may take it over the old way (begin.lua)
kept                            the <req> whose answer the run's session keeps for its abandoned
                                branch
tc                              the trace context (W3C ``traceparent``) its spans descend from,
                                written at creation when traced (``runtime.tracing``)
tp                              ``<step> <trace context>`` of the span that made its last pause,
                                when traced (park: with the record's parts); its replay links to it
``t:<token hash>``              -> the <req> the token answers (``token_field``: its first 128 bits,
                                base64url)
``s:<req>``                     its status: pending until ``expires``, resolved, cancelled,
                                expired (``status_field``)
rq, rn, r0 .. r<rn-1>           the latest interrupt's <req>, its record's part count and parts
                                (``record_parts``; the record leaves its request id out: ``rq``
                                has it)
``r:<req>:<i>``                 the parts of an earlier interrupt's record (park moves them there)
``~0`` .. ``~7``                while it is parked: its events, when few and small (``fold_fields`` in
                                ``_common.lua``): ``<entry id> <type length, one byte><type><data>``
                                (a type in ``FOLDED_TYPES``: ``\\0<its index from 1>``); ids after
                                ``~0``'s relative to it (``relative_id``); format 4: ``~0``'s in ms
                                after ``cr``, and a type index plus 128: the data after its head
                                (``folded_head``)
==============================  ================================================================

In the run hash <req> is ``short_id``: a minted request id without its run id (``waiting`` too:
``full_id`` reads it whole, ``full_request_id`` in _common.lua). The run's stream ``pw:{R}:ev``
holds entries ``t`` (type) and ``d`` (msgpack data); park's
interrupt event is short there (``short_interrupt_event``: its record in the run hash has the
rest, and readers rebuild it: ``with_interrupts``).

The summary ``pw:{R}:sum``: wf, status, created, updated, tenant, owner, origin, session (as the
run's; ``summary_record``), and each interrupt's lifecycle record (``parkway.runtime.telemetry``),
``<kind>:<req>`` (``lifecycle_field``): ``i`` created, ``e`` how it ended, ``f`` refused answers
(a count) and ``fl`` the last refusal, ``x`` the replay after its answer failed the run; each but
``f`` as msgpack in parts ``<field>:0``, ``:1``... of at most 64 bytes (``hset_parts`` in
``_common.lua``; ``lifecycle_part``). A root run's summary also holds ``gate:<step>`` (1) for each
of its steps a run below it (a child, a grandchild...) paused in (``GATE_PREFIX``, written by park):
with the steps of its own ended interrupts, the gates a fork past them asks again (``gate_steps``).

The same letters name other things in other hashes: ``t:`` a token here and a tool call in a
journal, ``i:`` a created lifecycle part here and an interrupt's answer there, ``x:``, ``s:`` and
``c:`` likewise; each hash is its own namespace.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import ValidationError as PydanticError

from ....runtime import telemetry
from ....runtime.errors import CorruptRecord, FormatTooNew
from ....runtime.protocol import InterruptRequest, RunStatus
from ....runtime.store import InterruptRecord, JournalEntry, RunRecord
from ... import codec
from .. import keys

T = TypeVar("T")

FIRST_FORMAT = 1
"""the stored format of a record that names none (written before records said their format)"""
NEWEST_FORMAT = 4
"""the newest stored format this code writes (once every live process reads it: :mod:`.formats`)"""
READS_FORMATS = (1, 2, 3, 4)
"""the stored formats this code reads (and announces: :mod:`.formats`)"""
CREATED_FIELD = {1: "created", 2: "cr", 3: "cr", 4: "cr"}
"""the run hash's creation-time field by format"""
BUCKETS_FORMAT = 4
"""the format whose writers index members in buckets of listpack size (``ix_add`` in _common.lua); a
reader of it reads both forms of every index (``page.lua``)"""


def record_format(value: Any, record: str, run_id: str | None = None) -> int:
    """The stored format a record's ``fmt`` field (None or b'' when absent: 1) says; ``FormatTooNew``
    naming ``record`` when this code does not read it (a later version wrote it), ``CorruptRecord``
    when it is not a format at all."""
    text = _s(value)
    try:
        found = int(text) if text else FIRST_FORMAT
    except ValueError as exc:
        raise CorruptRecord(f"{record} has no readable format ({text!r})", run_id=run_id) from exc
    if found not in READS_FORMATS:
        raise FormatTooNew(
            f"{record} is in stored format {found}, and this version of parkway reads formats up to "
            f"{max(READS_FORMATS)}: a later version wrote it (upgrade this process; the record is left as it is)",
            record=record, found=found, reads=max(READS_FORMATS), run_id=run_id,
        )
    return found


def created_of(fields: Mapping[str, Any]) -> int:
    """A run hash's creation time (ms), in either format (``created``, or ``cr`` in format 2)."""
    value = fields.get("created") or fields.get("cr")
    if value is None:
        raise KeyError("created")
    return int(value)


RELATIVE_MS = 10**12
"""a time a format-4 run hash keeps under this many ms is in ms after the run's creation (``updated``, as
park writes it; a folded ``~0`` id): any time written whole is far past it"""


def updated_of(fields: Mapping[str, Any]) -> int:
    """A run hash's last-change time (ms): ``updated`` whole, or (format 4's park) in ms after its creation."""
    value = int(fields["updated"])
    return value + created_of(fields) if value < RELATIVE_MS else value


PART_BYTES = 64
"""the longest field name or value of a run's hash or summary (``hash-max-listpack-value``'s
default): longer records are split into parts of this size"""
FOLD_MAX = 8
"""the most events a parked run keeps in its hash instead of its stream (``FOLD_MAX`` in _common.lua)"""
FOLD_WAKE_MS = 1000
"""how long a parked run's stream outlives the park that copied its events into its hash, so the
readers blocked on it are served the interrupt event (``FOLD_WAKE_MS`` in _common.lua); the
reconciler then has Redis drop it (``Store.reclaim_folded``)"""
RENEW_SLACK = 8
"""a run's records are renewed to the TTL a transition needs plus 1/RENEW_SLACK of it, and only by a
transition that finds them outside that window (less left than it needs, or more than it plus the
slack: a shorter pause): most transitions of a run renew nothing (``keep_records`` in _common.lua).
An eighth covers the default grace (60 s) from a 8-minute TTL on (the default is 15): a pause as
long as the run's TTL finds the records the run's start gave them in its window, and so does the
resume after it"""
CLOCK_TRUST_MS = 5000
"""how far apart the clocks of the processes that call parkway's scripts may be, together with the
time from a caller's ``now`` to its script's run (a lease already assumes as much: a worker's clock a
lease ahead would take over a live lease, ``lease_ms``' default). A transition that finds in the run
hash's ``until`` (the ms its records' TTL reaches, by the clock of the transition that last read or
set it) that the records have at least the TTL it needs plus this much left, and no more than the
renewal slack past it, trusts that instead of asking Redis (``PTTL``); ``until`` is never later than
the TTL it stands for (it is written from a ``now`` taken before the script ran, and every script
that sets the run hash's TTL writes it), so only clocks further apart than this could make a
transition skip a renewal it needed (``keep_records`` in _common.lua)"""
TOKEN_FIELD_HEX = 32
"""hex digits of a token's SHA-256 its field stands for (128 bits, within one run's hash; the field
keeps them as base64url, 22 characters: ``token_field``)"""
RECORD_PART_BYTES = PART_BYTES - 1
"""the size of an interrupt record's parts (``r0``...): a listpack keeps a value under 64 bytes with
one byte of length, one of 64 with two"""
STATUS_PREFIX = "s:"
"""an interrupt's status field in the run hash: ``s:<req>``"""
TOKEN_PREFIX = "t:"
ANSWERED_PREFIX = "d:"
"""an answered interrupt's field in the run hash: ``d:<req>``, the digest of its journal entry and
responder (:func:`answer_digest`), so that the same answer sent again by the same responder reads
``accepted`` (``answered_again`` in _resume.lua; the journal is gone once the run ends)"""
GATE_PREFIX = "gate:"
"""a root run's summary field ``gate:<step>``: a run below it paused in that step (``mark_gate`` in
``_park.lua``)"""
RECORD_PREFIX = "r"
"""the latest interrupt's record parts in the run hash: ``r0``, ``r1``... (``record_field``)"""
EARLIER_RECORD_PREFIX = "r:"
"""an earlier interrupt's record parts: ``r:<req>:<i>`` (``earlier_record_field``)"""
FOLDED_PREFIX = "~"
"""a parked run's folded events: ``~0``... (``folded_event_field``)"""
TRACE = "tc"
"""the run-hash field holding the trace context the run's spans descend from (``runtime.tracing``)"""
PAUSED_TRACE = "tp"
"""the run-hash field holding ``<step> <trace context>`` of the span that made the run's last pause"""
RECORD_LATEST = "rq"
"""the run-hash field naming the run's latest interrupt, whose record is in parts r0, r1, ..."""
RECORD_PARTS = "rn"
"""the run-hash field counting the parts of that record"""
INPUT = "input"
"""the run-hash field holding the run's input (what ``fork`` re-opens step 0 with)"""
PARENT_FIELDS = ("parent", "pstep", "pfield", "step")
"""a child run's fields naming where its outcome goes (its parent, the parent's step and journal
field) and its own step"""
EXTEND_FIELDS = ("step", "lineage")
"""what the reconciler reads of a run to keep its records past its expiry"""
CHILD_WAIT = "child:"
"""``waiting``'s prefix for a run waiting on its child"""
NODE_BUCKETS_S = (0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120, 600)
"""the node-duration histogram's bounds in seconds (``node:<wf>:<bound>``, see ``COUNTERS``)"""
COUNTERS = """the fields of the counters hash (``keys.metrics``), by the workflow ``<wf>`` of the run counted:
``runs:<status>:<wf>`` (advance, finish, recover, expire), ``wait:<wf>:<le s | +Inf>`` and
``wait:<wf>:sum_ms`` (resume: its buckets' sum is the count of accepted resumes; ``resumes:accepted:<wf>``,
which counted them too until the wait histogram alone did, is still read: ``http.metrics``),
``node:<wf>:<le s | +Inf>`` and
``node:<wf>:sum_ms`` (advance: a node's completed attempt), ``retries:<wf>`` (write_entry: a failed
attempt retried), ``failures:<wf>`` (a failed attempt: retried, write_entry; or ending its run, finish);
and with no workflow: ``attempts``, ``recovered``, ``deferred``. Fields written before counters had
a workflow (``runs:<status>``, ``resumes:accepted``, ``wait:<le>``, ``wait:sum_ms``) read as
workflow \"\"."""


def _bucket(seconds: float, bounds: Sequence[float]) -> str:
    return next((str(b) for b in bounds if seconds <= b), "+Inf")


def advance_counts(workflow: str, duration_ms: float | None, ended: bool) -> list[Any]:
    """What an advance counts (``COUNTERS``): the node's duration, and the run's completion."""
    out: list[Any] = []
    if duration_ms is not None:
        ms = max(0, round(duration_ms))
        out += [f"node:{workflow}:{_bucket(ms / 1000, NODE_BUCKETS_S)}", 1, f"node:{workflow}:sum_ms", ms]
    if ended:
        out += [f"runs:completed:{workflow}", 1]
    return out


def retry_counts(workflow: str) -> list[Any]:
    """What a retried attempt counts (``COUNTERS``)."""
    return [f"retries:{workflow}", 1, f"failures:{workflow}", 1]


WAIT_BUCKETS_S = (1, 10, 60, 300, 900, 3600, 4 * 3600, 24 * 3600, 7 * 24 * 3600)
"""upper bounds (seconds) of the resume-wait histogram's buckets, which resume.lua fills"""


# --- field names ---------------------------------------------------------------


def pause_wakes(fields: Mapping[Any, Any], tenant: str | None, workflow: str | None) -> bool:
    """Whether a pause feed entry (its fields as XREAD reads them: ``w`` workflow, ``r`` run id,
    ``c`` creation, ``t`` tenant) may be of an interrupt a listing of ``tenant`` and ``workflow``
    (None: any) lists, so a waiting listing wakes for it. An entry written before entries named
    their tenant (no ``t``) may be any tenant's: it wakes every listing of its workflow."""
    named = {_s(k): v for k, v in fields.items()}
    if workflow is not None and _s(named.get("w")) != workflow:
        return False
    return tenant is None or "t" not in named or _s(named["t"]) == tenant


def short_id(request_id: str, run_id: str) -> str:
    """How the run's own records name the interrupt (the run hash's <req>, the summary's lifecycle
    fields): a minted id without its run id (``i<n>_<nonce>``, unique within the run, 37 bytes less
    for a run id of 36), any other id as it is (``telemetry.mint_request_id``)."""
    return request_id.removesuffix("_" + run_id) if telemetry.run_of_request(request_id) == run_id else request_id


def full_id(short: str, run_id: str) -> str:
    """The request id ``short_id`` shortened."""
    return f"{short}_{run_id}" if telemetry.is_minted_head(short) else short


def token_field(token_hash: str) -> str:
    """The run-hash field that maps a token (by its hash) to its interrupt's <req>."""
    raw = bytes.fromhex(token_hash[:TOKEN_FIELD_HEX])
    return TOKEN_PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def token_hex(field: bytes) -> str:
    """The token hash's hex prefix a token field (``token_field``) stands for (one of a run parked
    before token fields were base64url has it as hex: ``hex_token_field`` in _common.lua)."""
    text = field[len(TOKEN_PREFIX) :]
    if len(text) == TOKEN_FIELD_HEX:
        return text.decode()
    return base64.urlsafe_b64decode(text + b"==").hex()


def status_field(request_id: str, run_id: str) -> str:
    """The run-hash field holding an interrupt's status."""
    return STATUS_PREFIX + short_id(request_id, run_id)


def record_field(part: int) -> str:
    """The run-hash field holding part ``part`` (from 0) of the record of the run's latest interrupt."""
    return f"{RECORD_PREFIX}{part}"


def earlier_record_field(request_id: str, run_id: str, part: int) -> str:
    """The run-hash field holding part ``part`` of the record of an earlier interrupt of the run
    (park moves the record it held there when the run pauses again)."""
    return f"{EARLIER_RECORD_PREFIX}{short_id(request_id, run_id)}:{part}"


def folded_event_field(index: int) -> str:
    """The run-hash field holding a parked run's event ``index`` (from 0, in order) while its stream
    is folded into its hash."""
    return f"{FOLDED_PREFIX}{index}"


FOLDED_FIELDS = [folded_event_field(i).encode() for i in range(FOLD_MAX)]
"""the run-hash fields a parked run's events may be folded into"""
FOLDED_TYPES = ("run.started", "node.started", "interrupt", "node.completed", "interrupt.resumed", "node.retry")
"""the event types a folded event names by one byte (its index from 1) after a type length of 0, instead
of whole (``FOLDED_TYPES`` in the scripts, generated from here)"""


def lifecycle_field(kind: str, request_id: str, run_id: str) -> str:
    """The summary field (or, for those written in parts, the stem ``<field>:<i>`` extends) of one
    part of an interrupt's lifecycle record: ``i`` (created), ``e`` (ended), ``f`` (refused
    answers), ``fl`` (the last refusal), ``x`` (its replay failed the run): ``i:i3_k2j9x0ab:0``."""
    return f"{kind}:{short_id(request_id, run_id)}"


def split(blob: bytes, size: int = PART_BYTES) -> list[bytes]:
    """``blob`` in parts of at most ``size`` bytes (at least one part)."""
    return [blob[i : i + size] for i in range(0, len(blob), size)] or [b""]


def _s(v: Any) -> str:
    if v is None:
        return ""
    return v.decode() if isinstance(v, bytes) else str(v)


# --- the run's record ------------------------------------------------------------


RUN_FIELDS = (
    "wf", "ref", "status", "node", "step", "fence", "input", "data", "output", "error", "created", "updated",
    "ttl", "expires", "waiting", "lineage", "paused", "tenant", "rs", "rc", "owner", "origin", "session", "leaf",
    "tc", "tp", "fmt", "cr",
)
"""the run hash's fields ``run_record`` reads (and, by its name in ``rs``, the racing interrupt's status
field): what ``begin.lua`` returns of the run (as ``RUN_FIELDS``, generated into the scripts), not its
interrupts' records or tokens"""


BEGUN_FIELD = "rb"
"""the run hash's field naming the fence whose attempt a resume began (format 3; see the table above)"""

BEGUN_MAX_BYTES = 32 << 10
"""the longest begin's reply (the run's fields and its step's journal) a resume's queue element may
carry for it to begin the attempt (format 3: ``begin_at_resume`` in _resume.lua): a run with a bigger
input or journal is queued plainly, and its worker reads them by its begin"""

HASH_FIELDS = (
    *RUN_FIELDS, "parent", "pstep", "pfield", "ans", "tg", "until", "fresh", "kept", RECORD_LATEST, RECORD_PARTS,
    "fl", "crashes", "attempts", f"{FOLDED_PREFIX}0", BEGUN_FIELD,
    # a session's hash (the sessions package's store: its basis fields)
    "agent", "head", "pd", "hd", "inc", "tseq",
)
"""every hash field a script names by itself (the run hash, its summary, the counters, a session's hash):
generated into the scripts as ``F.<name>`` (the stored name), and read back from a reply by that name
(``hmget``); a script body spells none of them (tests/test_script_fields.py)"""
HASH_PREFIXES = {
    "status": STATUS_PREFIX, "token": TOKEN_PREFIX, "answered": ANSWERED_PREFIX, "record": RECORD_PREFIX,
    "earlier": EARLIER_RECORD_PREFIX, "gate": GATE_PREFIX, "runs": "runs:", "wait": "wait:", "failures": "failures:",
    "folded": FOLDED_PREFIX, "trigger": "t:", "trigger_entry": "g:",
}
"""the fields a script builds from a prefix and a value (``P.status .. req``), by the scripts' name for
the prefix: an interrupt's status, token and answer, the record's parts (``r0``...) and an earlier
record's, a root's gates, the counters by workflow, a parked run's folded events, a session's
triggers (its hash's ``t:<seq>``, the branch journal's ``g:<seq>``)"""
STORED_VALUES = {**{s.value: s.value for s in RunStatus}, "children": "children", "session": "session",
                 "child": CHILD_WAIT}
"""the stored values spelled like a field (``waiting``, ``session``): a run's statuses and what it
waits on, generated into the scripts as ``V.<name>``"""


def run_record(run_id: str, fields: Mapping[bytes, Any]) -> RunRecord:
    """The run's record from its hash (``HGETALL``; or the pairs a script returns, keys as bytes)."""
    f = {k.decode() if type(k) is bytes else _s(k): v for k, v in fields.items()}  # (keys are bytes: inline)
    record_format(f.get("fmt"), f"run {run_id}", run_id)
    try:
        return RunRecord(
            run_id=run_id,
            workflow=_s(f["wf"]),
            ref=_s(f["ref"]),
            status=RunStatus(_s(f["status"])),
            node=_s(f.get("node")) or None,
            step=int(f["step"]),
            fence=int(f["fence"]),
            input=codec.decode(f.get("input"), what="run input"),
            data=codec.decode(f.get("data", f.get("input")), what="run data") or {},  # no data yet: the input
            output=codec.decode(f.get("output"), what="run output"),
            error=codec.decode(f.get("error"), what="run error"),
            created_at=created_of(f),
            updated_at=updated_of(f),
            ttl_ms=int(f["ttl"]),
            expires_at=int(f["expires"]) if f.get("expires") else None,
            waiting_on=full_id(_s(f.get("waiting")), run_id) or None,
            lineage=lineage_from(_s(f.get("lineage"))),
            paused_version=_paused_version(f, run_id),
            tenant=_s(f.get("tenant")) or None,
            racing=_racing(f),
            owner=_s(f.get("owner")) or None,
            origin=_s(f.get("origin")) or None,
            session=_s(f.get("session")) or None,
            leaf=_s(f.get("leaf")) or None,
            trace=_s(f.get(TRACE)) or None,
            paused_trace=_paused(_s(f.get(PAUSED_TRACE)), int(f["step"])),
        )
    except (KeyError, ValueError) as exc:
        raise CorruptRecord(f"run {run_id} record is incomplete or invalid: {exc!r}", run_id=run_id) from exc


def _racing(f: Mapping[str, Any]) -> str | None:
    """The child run racing the run's interrupt (``rc``), while that interrupt (status field ``rs``) is pending."""
    status_field_ = _s(f.get("rs"))
    return (_s(f.get("rc")) or None) if status_field_ and _s(f.get(status_field_)) == "pending" else None


def _paused_version(f: Mapping[str, Any], run_id: str) -> str | None:
    """The code version of the current activation's last pause: ``paused`` says it (formats 1-3), else
    (format 4 keeps no ``paused``) the latest interrupt's record does, when it is of this step (a
    begin's reply carries that record for it: ``attempt_fields`` in _common.lua)."""
    step = int(f["step"])
    if f.get("paused") is not None or not f.get(RECORD_LATEST):
        return _paused(_s(f.get("paused")), step)
    blob = b"".join(f.get(record_field(i)) or b"" for i in range(int(f.get(RECORD_PARTS) or 0)))
    raw = codec.decode(blob, what="interrupt")
    if not isinstance(raw, list) or len(raw) <= _VERSION_AT:
        return None
    return (_s(raw[_VERSION_AT]) or None) if raw[_STEP_AT] == step else None


def _paused(text: str, step: int) -> str | None:
    """What ``<step> <value>`` (``paused``: the code version; ``tp``: the trace context) says of the
    current activation's last pause (None: of an earlier one, or none)."""
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


def summary_record(run_id: str, summary: Mapping[bytes, Any]) -> RunRecord:
    """What a run reads as once its records are past their TTL: its summary's own fields (not the
    interrupts' lifecycle records, ``<kind>:<req>``)."""
    f = {_s(k): _s(v) for k, v in summary.items() if b":" not in k}
    record_format(f.get("fmt"), f"summary of run {run_id}", run_id)  # (its lifecycle records' format too)
    try:
        status = f["status"]
        final = status in ("completed", "failed", "cancelled")
        return RunRecord(
            run_id=run_id,
            workflow=f["wf"],
            status=RunStatus(status) if final else RunStatus.EXPIRED,
            created_at=int(f["created"]),
            updated_at=int(f["updated"]),
            tenant=f.get("tenant") or None,
            owner=f.get("owner") or None,
            origin=f.get("origin") or None,
            session=f.get("session") or None,
        )
    except (KeyError, ValueError) as exc:
        raise CorruptRecord(f"run {run_id} summary is incomplete or invalid: {exc!r}", run_id=run_id) from exc


ENDED_SUMMARY_WORDS = ("status", "created", "updated", "tenant", "owner", "origin", "wf")
"""a folded summary's words (``keys.ended_summaries``; ``fold_summary`` in ``sessions/lua/_session.lua``
writes them): single spaces between, ``updated`` as ms after ``created``, the workflow last (it may
hold spaces); its session is its tree's (the tag), and it has no lifecycle record (a summary with
one is not folded)"""


def folded_summary(run_id: str, value: bytes | None) -> dict[bytes, bytes]:
    """The summary fields a folded summary (``ENDED_SUMMARY_WORDS``) stands for, as ``HGETALL`` of the
    summary would return them; {} for None."""
    if value is None:
        return {}
    words = _s(value).split(" ", len(ENDED_SUMMARY_WORDS) - 1)
    if len(words) != len(ENDED_SUMMARY_WORDS):
        raise CorruptRecord(f"run {run_id} folded summary is invalid", run_id=run_id)
    f = dict(zip(ENDED_SUMMARY_WORDS, words, strict=True))
    try:
        f["updated"] = str(int(f["created"]) + int(f["updated"]))
    except ValueError as exc:
        raise CorruptRecord(f"run {run_id} folded summary is invalid: {exc!r}", run_id=run_id) from exc
    f["session"] = keys.hash_tag(run_id)
    return {k.encode(): v.encode() for k, v in f.items() if v}


def summary_or_folded(run_id: str, summary: Mapping[bytes, Any], folded: bytes | None) -> Mapping[bytes, Any]:
    """A run's summary: its own key's fields, else the folded one's (``folded_summary``)."""
    return summary if summary else folded_summary(run_id, folded)


def summary_values(run_id: str, values: Sequence[Any], folded: bytes | None, names: Sequence[str]) -> list[Any]:
    """An ``HMGET`` of ``names`` on a run's summary, answered from its folded summary when its own
    key is gone (the first value None)."""
    if values[0] is not None or folded is None:
        return list(values)
    f = folded_summary(run_id, folded)
    return [f.get(n.encode()) for n in names]


def run_or_summary(run_id: str, run: Mapping[bytes, Any], summary: Mapping[bytes, Any]) -> RunRecord | None:
    """The run from its hash, else from its summary (its records past their TTL), else None."""
    if run:
        return run_record(run_id, run)
    if summary:
        return summary_record(run_id, summary)
    return None


LISTED_RUN_FIELDS = ("wf", "status", "created", "updated", "tenant", "owner", "origin", "session", "node", "step",
                     "lineage", "fmt", "cr")
"""what a run listing reads of each run's hash (and of its summary, the first eight: the summary
holds those while the run's records last and after)"""
_FINAL = ("completed", "failed", "cancelled")


def listed_run(run_id: str, run: Sequence[Any], summary: Sequence[Any]) -> RunRecord | None:
    """A run as a listing shows it, from its hash's ``LISTED_RUN_FIELDS`` (while its records last)
    or its summary's (after: a run not finished then reads ``expired``, as ``summary_record``);
    None when both are gone (a run index member the reconciler has not dropped yet)."""
    f = dict(zip(LISTED_RUN_FIELDS, (_s(v) for v in run), strict=True)) if run[0] is not None else None
    if f is None:
        if summary[0] is None:
            return None
        f = dict(zip(LISTED_RUN_FIELDS, (_s(v) for v in summary), strict=False))
        if f["status"] not in _FINAL:
            f["status"] = RunStatus.EXPIRED.value
    else:
        record_format(f["fmt"], f"run {run_id}", run_id)
    try:
        return RunRecord(
            run_id=run_id,
            workflow=f["wf"],
            status=RunStatus(f["status"]),
            node=f.get("node") or None,
            step=int(f.get("step") or 0),
            created_at=created_of({k: v for k, v in f.items() if v}),
            updated_at=updated_of({k: v for k, v in f.items() if v}),
            tenant=f["tenant"] or None,
            owner=f["owner"] or None,
            origin=f["origin"] or None,
            session=f["session"] or None,
            lineage=lineage_from(f.get("lineage") or ""),
        )
    except ValueError as exc:
        raise CorruptRecord(f"run {run_id} record is incomplete or invalid: {exc!r}", run_id=run_id) from exc


AUTHORITY_FIELDS = ("wf", "tenant", "owner")
"""what a summary says of whose its run is (``authority``)"""


def authority(values: Sequence[Any]) -> tuple[str | None, str | None] | None:
    """(tenant, owner) from a summary's ``AUTHORITY_FIELDS``; None for a run without a summary."""
    wf, tenant, owner = values
    return None if wf is None else (_s(tenant) or None, _s(owner) or None)


def parent_of(values: Sequence[Any]) -> tuple[str, int, str, int] | None:
    """(parent, its step, its journal field, the child's own step) from ``PARENT_FIELDS``' values;
    None for a root run (or a run whose records are gone)."""
    parent, pstep, pfield, own = values
    if not parent:
        return None
    return _s(parent), int(pstep), _s(pfield), int(own or 0)


def extend_step(values: Sequence[Any]) -> tuple[int, tuple[tuple[str, int], ...]] | None:
    """(step, lineage) from ``EXTEND_FIELDS``' values; None when the run's records are gone."""
    step, lineage = values
    return None if step is None else (int(step), lineage_from(_s(lineage)))


def run_lineage(fields: Mapping[bytes, Any]) -> tuple[tuple[str, int], ...]:
    """A child run's ancestors from its hash (``lineage``); () for a root run."""
    return lineage_from(_s(fields.get(b"lineage")))


def waiting(fields: Mapping[bytes, Any], run_id: str) -> str:
    """What the run waits on (``waiting``): a request id (the hash has it as ``short_id``), ``child:<id>``,
    ``children``, ``session`` or ''."""
    return full_id(_s(fields.get(b"waiting")), run_id)


def children_below(fields: Mapping[bytes, Any], run_id: str) -> list[str]:
    """The runs below a run that its listing by run id follows, besides its fan-out's: the child it
    waits on (``use_workflow``), the child racing its interrupt while it is pending (``use_first``)."""
    wait = waiting(fields, run_id)
    if wait.startswith(CHILD_WAIT):
        return [wait.removeprefix(CHILD_WAIT)]
    raced = fields.get(fields.get(b"rs") or b"")
    return [_s(fields[b"rc"])] if interrupt_waited(fields, run_id) and fields.get(b"rc") and raced == b"pending" else []


BELOW_FIELDS = ("waiting", "rc")
"""the run hash's fields ``runs_below`` reads: what the run waits on, the child that raced its interrupt"""


def runs_below(run_id: str, fields: Sequence[Any], fanned: Sequence[str]) -> list[str]:
    """The runs below a run that may still run (``Store.runs_below``), from its ``BELOW_FIELDS``
    and its fan-out set's members (``fanned``): the child it waits on, the child that raced its
    interrupt (whether or not that interrupt is still pending), its fan-out's children."""
    wait, racing = (_s(f) for f in fields)
    out = [wait.removeprefix(CHILD_WAIT)] if wait.startswith(CHILD_WAIT) else []
    if racing and racing not in out:
        out.append(racing)
    return out + [c for c in fanned if c not in out]


def interrupt_waited(fields: Mapping[bytes, Any], run_id: str) -> str | None:
    """The request id of the interrupt the run waits on, if it waits on one."""
    wait = waiting(fields, run_id)
    return wait if wait and not wait.startswith(CHILD_WAIT) and wait not in ("children", "session") else None


# --- journal entries -------------------------------------------------------------


def entry_to_blob(entry: JournalEntry, limit: int) -> bytes:
    """A journal entry as its field's value: msgpack ``[kind, name, value, detail, status]``."""
    return codec.encode([entry.kind, entry.name, entry.value, entry.detail, entry.status], limit=limit,
                        what="journal value")


def answer_digest(blob: bytes, responder: str | None) -> str:
    """An answer's digest as ``d:<req>`` keeps it: 128 bits of the SHA-256 of its journal entry and
    who gave it (hex), so the same answer sent again by the same responder (or again by no named
    one) reads ``accepted``, and the same choice sent by someone else does not."""
    who = b"" if responder is None else b"\x00" + responder.encode()
    return hashlib.sha256(blob + who).hexdigest()[:32]


def entry_from_blob(blob: bytes) -> JournalEntry:
    raw = codec.decode(blob, what="journal entry")
    if not isinstance(raw, list) or len(raw) != 5:
        raise CorruptRecord("journal entry has the wrong shape", what="journal entry")
    return JournalEntry(*raw)


# --- an interrupt's record ----------------------------------------------------------

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
    "trace",
)
"""an interrupt record's fields in the order its stored array holds them; the run id, the workflow
and the token hash are its run's (the key, the run's ``wf``, the field that maps the token to it),
and so is the request id: the array holds nil in its place (the field naming the record has it)"""
_OPTIONAL_TAIL = 4
"""the last fields (audience, tenant, capture, trace), which records written before them lack (they
read as None, and a record without ``capture`` captures both); ``trace`` is written only when the
pause was traced, so an untraced record is as it was"""


_STEP_AT = _INTERRUPT_FIELDS.index("step")
_EXPIRES_AT = _INTERRUPT_FIELDS.index("expires_at")
_VERSION_AT = _INTERRUPT_FIELDS.index("version")
_DEFAULT_CAPTURE = ("input", "output")
TRIMMED_FORMAT = 4
"""the format from which an interrupt's record is written trimmed (``interrupt_to_blob``) and a parked
run's hash keeps no ``paused`` and folds its usual events shorter (``folded_head`` in _common.lua)"""


def interrupt_to_blob(record: InterruptRecord, trimmed: bool = False) -> bytes:
    """The record as a msgpack array in ``_INTERRUPT_FIELDS`` order: no field names, nothing its run
    holds (its request id is nil: the run hash names the record by it, ``rq``). ``trimmed`` (format 4):
    its tail ends at its last field not as a reader fills it in (None; ``capture`` both), and its
    request leaves out ``maxLength`` and ``meta`` at their defaults (a reader's validation fills them)."""
    values = [_stored(record.request, trimmed) if name == "request" else getattr(record, name)
              for name in _INTERRUPT_FIELDS[1:]]
    if trimmed and 0 <= record.expires_at - record.created_at < record.created_at:
        values[_EXPIRES_AT - 1] = record.expires_at - record.created_at  # ms after its creation
    if record.trace is None:
        values.pop()
    if trimmed:
        tail = len(_INTERRUPT_FIELDS) - _OPTIONAL_TAIL - 1  # (values start at the record's second field)
        while len(values) > tail and values[-1] in (None, _DEFAULT_CAPTURE):
            values.pop()
    return codec.encode([None, *values], what="interrupt")


_REQUEST_DEFAULTS = {"maxLength": 10_000, "meta": {}}


def _stored(request: InterruptRequest | None, trimmed: bool = False) -> dict[str, Any]:
    if request is None:
        return {}
    out = request.stored()
    if trimmed:
        for name, default in _REQUEST_DEFAULTS.items():
            if name in out and out[name] == default:
                del out[name]
    return out


def _request(raw: Any) -> InterruptRequest | None:
    """A stored request read back, validated here (the one place: a client answering it, listing it
    or escalating it trusts what this returns); {} or None reads as None (none kept). One that does
    not validate is a CorruptRecord."""
    if not raw:
        return None
    try:
        return InterruptRequest.model_validate(raw)
    except PydanticError as exc:
        raise CorruptRecord(f"interrupt record's request does not validate: {exc}", what="interrupt") from exc


def interrupt_from_blob(
    run_id: str, workflow: str, token_hash: str, blob: bytes, request_id: str, ref: str = ""
) -> InterruptRecord:
    """The record ``interrupt_to_blob`` wrote, for the interrupt ``request_id`` (a record written
    before the id was left out holds it too: that one wins), of a run of ``workflow`` (by ``ref``)."""
    raw = codec.decode(blob, what="interrupt")
    if not isinstance(raw, list) or not len(_INTERRUPT_FIELDS) - _OPTIONAL_TAIL <= len(raw) <= len(_INTERRUPT_FIELDS):
        raise CorruptRecord("interrupt record has the wrong shape", what="interrupt")
    try:
        fields = dict(zip(_INTERRUPT_FIELDS, raw, strict=False))
        fields["request_id"] = fields["request_id"] or request_id
        fields["capture"] = tuple(fields.get("capture", ("input", "output")))
        fields["request"] = _request(fields["request"])
        expires, created = fields["expires_at"], fields["created_at"]
        if isinstance(expires, int) and isinstance(created, int) and expires < created:
            fields["expires_at"] = created + expires  # trimmed (format 4): ms after its creation
        return InterruptRecord(run_id=run_id, workflow=workflow, token_hash=token_hash, ref=ref, **fields)
    except TypeError as exc:
        raise CorruptRecord(f"interrupt record has the wrong shape: {exc}", what="interrupt") from exc


def record_parts(record: InterruptRecord, trimmed: bool = False) -> list[Any]:
    """An interrupt record as the run hash keeps it, as (field, value) pairs flat: ``rq`` and its
    <req> first, ``rn`` and the part count, then each part (``r0``, ``r1``...) of at most
    ``RECORD_PART_BYTES`` (``trimmed``: see ``interrupt_to_blob``)."""
    parts = split(interrupt_to_blob(record, trimmed), RECORD_PART_BYTES)
    out: list[Any] = [RECORD_LATEST, short_id(record.request_id, record.run_id), RECORD_PARTS, len(parts)]
    for i, part in enumerate(parts):
        out += [record_field(i), part]
    if record.trace is not None:  # the span that paused, for the replay after the answer (begin reads it)
        out += [PAUSED_TRACE, f"{record.step} {record.trace}"]
    return out


def interrupt_in(run_id: str, request_id: str, fields: Mapping[bytes, bytes]) -> InterruptRecord | None:
    """The interrupt ``request_id`` from its run's hash (its parts joined), or None if it has none:
    the latest interrupt's parts are r0, r1, ...; an earlier one's r:<req>:0, r:<req>:1, ..."""
    short = short_id(request_id, run_id).encode()
    if fields.get(RECORD_LATEST.encode(), b"") == short:
        parts = [fields.get(record_field(i).encode(), b"") for i in range(int(fields.get(RECORD_PARTS.encode(), 0)))]
    else:
        parts = []
        while (part := fields.get(earlier_record_field(request_id, run_id, len(parts)).encode())) is not None:
            parts.append(part)
        if not parts:
            return None
    prefix = TOKEN_PREFIX.encode()
    token = next((token_hex(f) for f, v in fields.items() if f.startswith(prefix) and v == short), "")
    return interrupt_from_blob(run_id, _s(fields.get(b"wf", b"")), token, b"".join(parts), request_id,
                               _s(fields.get(b"ref", b"")))


def latest_record(run_id: str, fields: Mapping[bytes, bytes]) -> InterruptRecord | None:
    """The run's latest interrupt's record, or None."""
    latest = fields.get(RECORD_LATEST.encode())
    return interrupt_in(run_id, full_id(_s(latest), run_id), fields) if latest else None


def looked_up(run_id: str, token_hash: str, reply: Sequence[Any]) -> tuple[str, InterruptRecord | None]:
    """``lookup.lua``'s reply: the token's interrupt's status, and its record when it has one
    (the reply's <req>, the run's wf and ref, then the record's parts)."""
    status = _s(reply[0])
    if len(reply) < 3:
        return status, None
    request_id = full_id(_s(reply[1]), run_id)
    blob = b"".join(reply[4:])
    return status, interrupt_from_blob(run_id, _s(reply[2]), token_hash, blob, request_id, _s(reply[3]))


