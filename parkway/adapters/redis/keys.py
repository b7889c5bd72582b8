"""Every Redis key parkway uses, built here and nowhere else.

Every key of one run carries its tree's hash tag ``{R}``: the run id up to its
first ``--``. A root run's tag is its own id; a child run (``use_workflow``) is
``<root run id>--<hash>`` and shares its root's tag, so a whole tree lives in
one slot and a script may touch a parent's keys and a child's together (the
spawn that parks a parent and creates its child; the end of a child that
records its outcome in the parent and queues it). ``T`` is the run's TTL
(refreshed by every write; while the run waits it is the interrupt's TTL).
A session's keys carry its id as hash tag ``{S}``, and its branch runs are
``<S>--<hex>``: a script may move a session and its runs together. ``S``
below is the session's TTL, refreshed by its transitions.
Below, ``pw:{R}:...`` stands for ``pw:{R}:<run id>:...`` for a child run.

An interrupt has no key of its own: it lives in its run's hash, every field name and value at most
64 bytes (the record split into parts), so the hash keeps Redis's compact listpack encoding
(``hash-max-listpack-value``) where one longer value would turn it into a hash table several times
its size. Its status field is the exactly-once point of a resume: the resume script answers only
an interrupt it finds ``pending`` before the run's ``expires``, and flips it in the same step.

An interrupt's lifecycle record (its telemetry) lives in its run's summary, so it lasts as long as
the summary does (the retention after the run's records), with no key of its own either; it is
found by request id without a lookup because a request id parkway mints carries its run id,
``i<fence, base 36>_<nonce>_<run id>`` (``parkway.runtime.telemetry.mint_request_id``; other ids are read
with their run id given). Its parts are split into values of at most 64 bytes, as the run hash's
record is, so the summary stays a listpack (for a run id of up to about 50 characters: longer ones
make field names over 64 bytes).

``pw`` is the key prefix: ``PARKWAY_KEY_PREFIX`` (default ``pw``), read from the environment once,
when this module is imported, so several applications can share one Redis (each process has one
prefix; the default RQ queue and the job ids carry it too, see ``parkway.config``).

==========================  ======  ========  ===============================================
key                         type    TTL       holds
==========================  ======  ========  ===============================================
``pw:{R}:run``              hash    T         wf, ref, status, node, step, fence, input, data
                                              (absent until a node completes: the input is it),
                                              output, error, created, updated, ttl, expires,
                                              waiting (request id, ``child:<run id>``, or
                                              ``children``: a fan-out's, see ``fo``), fl (how
                                              many children its fan-out has left to start),
                                              paused (``<step> <code version>`` of the last pause),
                                              tenant (``start(tenant=)``, a child's root's, a branch
                                              run's session's; absent for none), owner (a user's run,
                                              a branch run's session owner), origin (system |
                                              machine | frontend: who started it), session (a
                                              branch run's): whose it is, written at creation;
                                              ans (the interrupt last answered, for finish:
                                              ``<step> <its lifecycle x: field> <1 | 0:
                                              output captured>``);
                                              a child's also: parent, pstep, pfield (where its
                                              outcome goes), lineage (``run:step`` of
                                              each ancestor, parent first);
                                              rc, rs: the child run racing an
                                              interrupt (``use_first(child=)``)
                                              and that interrupt's status field;
                                              and of each interrupt of the run (see below):
                                              ``t:<token hash, 32 hex>`` -> req,
                                              ``s:<req>`` status (pending until ``expires``,
                                              resolved, cancelled, expired); of its latest:
                                              rq (its req), rn, r0..r<rn-1> (the record's
                                              parts of <= 64 bytes; the record leaves its
                                              req out: the field naming it has it); of an earlier one:
                                              ``r:<req>:<i>`` (its parts); ``kept``: the <req>
                                              whose answer the run's session keeps for its
                                              abandoned branch (session_answer); while it is parked,
                                              its events (``~0``...: see ``folded_event_field``)
                                              when they are few and small, its stream then
                                              absent until something appends to it. In the run hash <req>
                                              is the request id without its run id when it
                                              carries it (``held_id``); ``waiting`` has it whole
``pw:{R}:sum``              hash    retention wf, status, created, updated, and whose the run is
                                              (tenant, owner, origin, session, as the run): outlives T so an
                                              expired run reads ``expired``, not unknown; and each
                                              interrupt's lifecycle record (its telemetry, see
                                              ``parkway.runtime.telemetry``; <req> without its
                                              run id if minted: ``lifecycle_field``): ``i:<req>`` created
                                              (park), ``e:<req>`` how it ended (resume, cancel,
                                              expire), ``f:<req>`` refused answers and ``fl:<req>``
                                              the last one (refuse), ``x:<req>`` the replay after
                                              its answer failed the run (finish); each but f: as
                                              msgpack in parts of <= 64 bytes, ``<field>:0``, ``:1``...
``pw:{R}:j:<step>``         hash    T         journal of one activation: field -> entry
``pw:{R}:ws``               hash    T         workflow state: key -> value
``pw:{R}:snap``             hash    T         what ``fork`` re-opens a step from, written by advance:
                                              ``<step>`` -> the data step (>= 1) started with,
                                              ``<step>:node`` -> the node it ran (a completed step's);
                                              absent until the run's first node completes
``pw:{R}:fo``               set     T         the children a fan-out (``use_workflows``) has started and
                                              that have not ended yet (their run ids): what cancel
                                              and the root's listing follow down; a child's end removes it
``pw:{R}:ev``               stream  T         the run's events (``t`` type, ``d`` data); gone
                                              ``FOLD_WAKE_MS`` after a park that copied them into
                                              the run hash (``~<i>``), back at the next append; park's
                                              interrupt event is short here (its record in the
                                              run hash has the rest: ``codec.held_interrupt_event``)
``pw:ix:<order>:<wf>``      zset    none      a workflow's pending interrupts (order: newest |
                                              expiring), one member each: two times (6 bytes,
                                              big-endian) and the run id (see codec.member);
                                              pruned on expiry. No index spans workflows: a
                                              listing of all merges the workflows' (``pw:workflows``)
``pw:ix:aud:<audience>``    zset    none      pending interrupts asked of one audience (``use_interrupt(audience=)``,
                                              moved by an escalation), across workflows; members as
                                              the ``newest`` index's (created first); written only for an
                                              interrupt with an audience, removed by the scripts that
                                              remove its workflow's members (resume, expire, escalate)
``pw:ix:tenant:<tenant>``   zset    none      the same for the interrupts of runs started with a tenant
``pw:ix:session:<session>`` zset    none      the same for the interrupts of a session's branch runs
``pw:ic:<status>:<wf>``     zset    none      a workflow's closed interrupts by status (resolved |
                                              cancelled | expired), one member each: the end time (6
                                              bytes, big-endian) and the request id (``<run id>/<req>``
                                              for one that does not carry its run id); pruned past
                                              the retention by the scripts that add to it and by
                                              the reconciler (``Store.prune_idle``): gone once empty
``pw:pauses``               stream  none      one tiny entry per pause (``w`` workflow, ``r`` run id, no
                                              content), capped at about ``PAUSE_FEED_MAXLEN`` entries:
                                              what ``list_interrupts(wait_ms=)`` blocks on; deleted
                                              by the reconciler once ``pw:workflows`` is empty
``pw:reclaimed``            string  none      the pause feed's id up to which the reconciler has
                                              touched the parked runs' streams past their
                                              ``FOLD_WAKE_MS`` (``Store.reclaim_folded``); deleted
                                              with the pause feed
``pw:outbox``               zset    none      ``run:step:fence`` jobs enqueued (or to enqueue) but not
                                              begun, by time; the reconciler redispatches old ones
``pw:leases``               zset    none      run ids being executed, scored by lease expiry (ms)
``pw:claims``               zset    none      run ids whose interrupt past its expiry a reconciler is
                                              expiring now, scored by when its claim lapses (ms): the
                                              reconcilers share the due range (``Store.claim_due``);
                                              empty (gone) when none is behind
``pw:reconciler``           string  lock      which worker runs the reconciler now
``pw:metrics``              hash    none      deployment-wide counters, bumped by the scripts of the
                                              transitions they count: ``attempts`` (begin),
                                              ``runs:<status>`` (advance, finish, recover, expire),
                                              ``recovered`` (recover), ``deferred`` (release),
                                              ``resumes:accepted``, ``wait:<le seconds | +Inf>``
                                              and ``wait:sum_ms`` (resume); a few dozen fields
``pw:workflows``            set     none      names of workflows that parked (park): whose
                                              indexes a listing of all workflows merges, the
                                              reconciler scans and /metrics counts; a workflow
                                              none of whose indexes holds a member leaves it
                                              (the reconciler: ``Store.prune_idle``)
``pw:{S}:s``                 hash    S         a session: agent (workflow ref), wf, owner, tenant, head
                                              (active message id), ttl, created, updated, inc (its
                                              incarnation: a nonce of the open that made it)
``pw:{S}:m``                 hash    S         message id -> message (role, content, run, at)
``pw:{S}:up``                hash    S         message id -> parent message id ('' for a first message)
``pw:{S}:open``              hash    S         open session-level interrupt id -> anchor message ('' =
                                              global: parks every branch)
``pw:{S}:i``                 hash    S         interrupt id -> record (raised and cleared, with who and when)
``pw:{S}:dl``                hash    S         request id -> run id: a run's interrupt cleared while its
                                              branch was abandoned; the answer waits for a switch back
``pw:{S}:live``              hash    S         branch run id (``<S>--<hex>``) -> its leaf message; runs
                                              that ended leave it at the next session transition
``pw:{S}:sev``               stream  S         the session's events (messages, dispatches, interrupts,
                                              holds, switches): the session can be rebuilt from them
``pw:secret``               string  none      token key, only while PARKWAY_SECRET is unset
``pw:keyid``                string  none      fingerprint of the token key (an HMAC under it, never
                                              the key): a process with another key is refused
==========================  ======  ========  ===============================================
"""

from __future__ import annotations

import os
import re

from ...runtime import telemetry
from ...runtime.errors import ConfigError

_PREFIX_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")


def _prefix(value: str | None) -> str:
    if not value:
        return "pw"
    if not _PREFIX_PATTERN.fullmatch(value):
        raise ConfigError(
            f"PARKWAY_KEY_PREFIX {value!r} must be 1-32 letters, digits, '_' or '-', starting with a letter or digit"
        )
    return value


PREFIX = _prefix(os.environ.get("PARKWAY_KEY_PREFIX"))
"""every key's first part (``PARKWAY_KEY_PREFIX``, default ``pw``)"""
PAUSE_FEED_MAXLEN = 2000
"""the pause feed's cap (``XADD MAXLEN ~``: Redis trims whole nodes, so it may hold ~100 more)"""


CHILD_SEPARATOR = "--"


def _tag(run_id: str) -> str:
    root, sep, _ = run_id.partition(CHILD_SEPARATOR)
    if not sep:
        return f"{PREFIX}:{{{run_id}}}"
    return f"{PREFIX}:{{{root}}}:{run_id}"


def run(run_id: str) -> str:
    return f"{_tag(run_id)}:run"


def summary(run_id: str) -> str:
    return f"{_tag(run_id)}:sum"


def journal(run_id: str, step: int) -> str:
    return f"{_tag(run_id)}:j:{int(step)}"


def snapshots(run_id: str) -> str:
    """The data each activation after the first started with, and the node each ran (``fork``)."""
    return f"{_tag(run_id)}:snap"


def workflow_state(run_id: str) -> str:
    return f"{_tag(run_id)}:ws"


def fanout(run_id: str) -> str:
    """The live children of the run's fan-out (``use_workflows``): started, not yet ended."""
    return f"{_tag(run_id)}:fo"


def events(run_id: str) -> str:
    return f"{_tag(run_id)}:ev"


TOKEN_FIELD_HEX = 32
"""hex digits of a token's SHA-256 its field keeps (128 bits, within one run's hash)"""
STATUS_PREFIX = "s:"
RECORD_HELD = "rq"
"""the run-hash field naming the interrupt whose record the run holds (its latest)"""
PART_BYTES = 64
"""the longest part of an interrupt record in the run hash (``hash-max-listpack-value``'s default)"""


FOLD_MAX = 8
"""the most events a parked run keeps in its hash instead of its stream (``FOLD_MAX`` in _common.lua)"""
FOLD_WAKE_MS = 1000
"""how long a parked run's stream outlives the park that copied its events into its hash, so the
readers blocked on it are served the interrupt event (``FOLD_WAKE_MS`` in _common.lua); the
reconciler then has Redis drop it (``Store.reclaim_folded``)"""
RECLAIM_MARGIN_MS = 1000
"""how much longer the reconciler waits before it touches a parked run's stream: the pause feed's
ids are Redis's clock, ``now`` the worker's"""


def folded_event_field(index: int) -> str:
    """The run-hash field holding a parked run's event ``index`` (from 0, in order) while its stream
    is folded into its hash: ``<entry id> <type length, one byte><type><data>`` (fold in _common.lua)."""
    return f"~{index}"


def token_field(token_hash: str) -> str:
    """The run-hash field that maps a token (by its hash) to its interrupt's request id (``held_id``)."""
    return "t:" + token_hash[:TOKEN_FIELD_HEX]


def held_id(request_id: str, run_id: str) -> str:
    """How the run hash names an interrupt of its run (in its token field's value, its status
    field, ``rq`` and an earlier record's parts): a minted request id without its run id, the key
    has it (``telemetry.short_id``; ``telemetry.full_id`` reads it back), 37 bytes less each time."""
    return telemetry.short_id(request_id, run_id)


def status_field(request_id: str, run_id: str) -> str:
    """The run-hash field holding an interrupt's status."""
    return STATUS_PREFIX + held_id(request_id, run_id)


def record_field(part: int) -> str:
    """The run-hash field holding part ``part`` (from 0) of the record of the run's latest interrupt."""
    return f"r{part}"


def earlier_record_field(request_id: str, run_id: str, part: int) -> str:
    """The run-hash field holding part ``part`` of the record of an earlier interrupt of the run
    (park moves the record it held there when the run pauses again)."""
    return f"r:{held_id(request_id, run_id)}:{part}"


def index(order: str, workflow: str) -> str:
    """A workflow's index of pending interrupts in ``order`` (newest | expiring)."""
    return f"{PREFIX}:ix:{order}:{workflow}"


FILTERS = ("aud", "tenant", "session")
"""the attributes a pending interrupt is indexed by besides its workflow (``filter_index``)"""


def filter_index(kind: str, value: str) -> str:
    """The pending interrupts whose attribute ``kind`` (one of ``FILTERS``) is ``value``, newest order.
    ``value`` is an audience (``protocol.check_audience``) or an id (``check_id``), never free text."""
    if kind not in FILTERS:
        raise ValueError(f"no filter index {kind!r}")
    return f"{PREFIX}:ix:{kind}:{value}"


def closed_index(status: str, workflow: str) -> str:
    """A workflow's index of interrupts that ended ``status`` (resolved | cancelled | expired)."""
    return f"{PREFIX}:ic:{status}:{workflow}"


def lifecycle_field(kind: str, request_id: str, run_id: str) -> str:
    """The summary field (or, for those written in 64-byte pieces, the stem ``<field>:<i>`` extends)
    of one part of an interrupt's lifecycle record: ``i`` (created), ``e`` (ended), ``f`` (refused
    answers), ``fl`` (the last refusal), ``x`` (its replay failed the run). A minted request id is
    named without its run id (the key has it): ``i:i3_k2j9x0ab:0``, not 50 bytes more per field."""
    return f"{kind}:{telemetry.short_id(request_id, run_id)}"


def pauses() -> str:
    """The pause feed: a capped stream the park script appends to, for listings that wait."""
    return f"{PREFIX}:pauses"


def reclaimed() -> str:
    """The pause feed's id up to which the reconciler has had Redis drop folded runs' streams."""
    return f"{PREFIX}:reclaimed"


def outbox() -> str:
    return f"{PREFIX}:outbox"


def secret() -> str:
    """The token key, only when PARKWAY_SECRET is unset (a development fallback)."""
    return f"{PREFIX}:secret"


def key_fingerprint() -> str:
    """A fingerprint of the token key every client and worker must share (never the key)."""
    return f"{PREFIX}:keyid"


def leases() -> str:
    return f"{PREFIX}:leases"


def expiry_claims() -> str:
    """The run ids whose due interrupt a reconciler has claimed, by when the claim lapses."""
    return f"{PREFIX}:claims"


def reconciler_lock() -> str:
    return f"{PREFIX}:reconciler"


def metrics() -> str:
    return f"{PREFIX}:metrics"


def workflows() -> str:
    """The workflows that ever parked an interrupt (whose pending interrupts /metrics counts)."""
    return f"{PREFIX}:workflows"


def _session(session_id: str, part: str) -> str:
    return f"{PREFIX}:{{{session_id}}}:{part}"


def session(session_id: str) -> str:
    return _session(session_id, "s")


def session_messages(session_id: str) -> str:
    return _session(session_id, "m")


def session_up(session_id: str) -> str:
    return _session(session_id, "up")


def session_open(session_id: str) -> str:
    return _session(session_id, "open")


def session_interrupts(session_id: str) -> str:
    return _session(session_id, "i")


def session_deliveries(session_id: str) -> str:
    return _session(session_id, "dl")


def session_live(session_id: str) -> str:
    return _session(session_id, "live")


def session_events(session_id: str) -> str:
    return _session(session_id, "sev")
