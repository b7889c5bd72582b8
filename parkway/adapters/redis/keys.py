"""Every Redis key parkway uses, built here and nowhere else.

Every key of one run carries its tree's hash tag ``{R}``: the run id up to its
first ``--``. A run or session of a tenant has the id ``<tenant>~<name>`` (``protocol.scoped_id``),
so two tenants' ``order-1`` are two runs with two tags, ``{acme~order-1}`` and ``{other~order-1}``.
A root run's tag is its own id; a child run (``use_workflow``) is
``<root run id>--<hash>`` and shares its root's tag, so a whole tree lives in
one slot and a script may touch a parent's keys and a child's together (the
spawn that parks a parent and creates its child; the end of a child that
records its outcome in the parent and queues it). ``T`` is the run's TTL
(while the run waits, the interrupt's plus the grace): every transition keeps
the records at least that long, renewing them, to it plus an eighth, only when
they are outside that window (``keep_records`` in _common.lua).
A session's keys carry its id as hash tag ``{S}``, and its branch runs are
``<S>--<hex>`` (``tagged_run_id``): a script may move a session and its runs together. ``S``
below is the session's TTL, refreshed by its transitions.
Below, ``pw:{R}:...`` stands for ``pw:{R}:<run id>:...`` for a child run.

An interrupt has no key of its own: it lives in its run's hash, and its lifecycle record (its
telemetry) in its run's summary, found by request id without a lookup because a request id
parkway mints carries its run id (``parkway.runtime.telemetry.mint_request_id``; other ids are
read with their run id given). The fields of the run hash and the summary, and how records are
kept in them, are :mod:`.layout`'s. The run hash's status field of an interrupt is the
exactly-once point of a resume: the resume script answers only an interrupt it finds ``pending``
before the run's ``expires``, and flips it in the same step.

``pw`` is the key prefix: ``PARKWAY_KEY_PREFIX`` (default ``pw``), read from the environment once,
when this module is imported, so several applications can share one Redis (each process has one
prefix; the default RQ queue and the job ids carry it too, see ``parkway.config``).

==========================  ======  ========  ===============================================
key                         type    TTL       holds
==========================  ======  ========  ===============================================
``pw:{R}:run``              hash    T         the run's record, its interrupts' records and
                                              statuses, the map from each token to its
                                              interrupt, and (while it is parked) its few small
                                              events: fields in ``layout``
``pw:{R}:sum``              hash    retention the run's status and whose it is: outlives T so an
                                              expired run reads ``expired``, not unknown; and each
                                              interrupt's lifecycle record (its telemetry, see
                                              ``parkway.runtime.telemetry``), and a root's steps a
                                              run below it paused in (its fork gates): fields in
                                              ``layout``
``pw:{R}:ended``            hash    S         the summaries of a session's ended branch runs, folded
                                              out of their own keys when the session sees them end
                                              (``trim_ended`` in ``sessions/lua/_session.lua``; it
                                              expires with the session): run id past ``<R>--`` -> the
                                              summary packed (``layout.folded_summary``)
``pw:{R}:slack:<request>``  hash    its wait  the Slack messages posted for one interrupt (``parkway.channels.slack``):
                                              Slack channel -> message ts (``-``: it ended before one
                                              was posted); kept until a day past its expiry
``pw:{R}:j:<step>``         hash    T         journal of one activation: field -> entry
``pw:{R}:ws``               hash    T         workflow state: key -> value
``pw:{R}:snap``             hash    T         what ``fork`` re-opens a step from, written by advance:
                                              ``<step>`` -> the data step (>= 1) started with,
                                              ``<step>:node`` -> the node it ran (a completed step's,
                                              but a completed run's last: the run hash's
                                              step and node say it); absent until the
                                              run's first node moves on to a second
``pw:{R}:fo``               set     T         the children a fan-out (``use_workflows``) has started and
                                              that have not ended yet (their run ids): what cancel
                                              and the root's listing follow down; a child's end removes it
``pw:{R}:ev``               stream  T         the run's events (``t`` type, ``d`` data); gone
                                              ``layout.FOLD_WAKE_MS`` after a park that copied them
                                              into the run hash, back at the next append; park's
                                              interrupt event is short here (``layout``)
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
                                              for one that does not carry its run id); read within
                                              the retention, pruned past it by the reconciler
                                              (``Store.prune_idle``): gone once empty
``pw:runs``                 zset    none      every run within its summary's life (roots, children, forks,
                                              branch runs), one member each: its creation time (6 bytes,
                                              big-endian) and its run id, all at score 0 (a listing is a
                                              ZREVRANGEBYLEX: ``Store.list_runs``); added by the scripts
                                              that create runs (``create_run``, ``start_child``); the
                                              reconciler walks the members older than the retention and
                                              drops those whose summary is gone (``Store.prune_runs``)
``pw:runs:at``              string  none      the member of ``pw:runs`` that walk has reached (it goes on
                                              after it); gone when a walk reaches the retention's bound
``pw:runs:due``             zset    none      written by parkway before the walk (a schedule of the same
                                              members): no longer written; the walk deletes it
``<ix>/d``                  zset    none      format 4: an index above (``pw:ix:<order>:<wf>``, ``pw:ix:aud|tenant|
                                              session:<v>``, ``pw:runs``) kept in buckets of at most
                                              ``BUCKET_MAX`` members (each a listpack): the directory,
                                              one member per bucket at score 0 (its lower bound, a NUL
                                              byte, its id); a bucket holds the members from its bound
                                              to the next bucket's. Written by the scripts (``ix_add``,
                                              ``ix_rem`` in ``_common.lua``), which derive these keys
                                              from the index's and run on its shard; read with the
                                              single zset beside it (old members drain) by ``page.lua``
``<ix>/d:<id>``             zset    none      one bucket: members as the index's; gone once empty (and
                                              out of the directory)
``<ix>/n``                  hash    none      the buckets' ``n`` members, ``i`` last bucket id; gone with
                                              the last bucket
``pw:pauses``               stream  none      one tiny entry per pause (``w`` workflow, ``r`` run id, ``c``
                                              its creation, ``t`` its tenant, '' for none: absent from
                                              entries written before it; no content), capped at
                                              about ``PAUSE_FEED_MAXLEN`` entries:
                                              what ``list_interrupts(wait_ms=)`` blocks on; deleted
                                              by the reconciler once ``pw:workflows`` is empty
``pw:readers``              hash    none      the stored formats each live process reads: process id ->
                                              ``<lapse ms> <formats> <role>``, refreshed every few
                                              seconds, lapsed ones pruned (``formats``: what the
                                              writers' format waits on)
``pw:reclaimed``            string  none      the pause feed's id up to which the reconciler has
                                              touched the parked runs' streams past their
                                              ``layout.FOLD_WAKE_MS`` (``Store.reclaim_folded``); deleted
                                              with the pause feed
``pw:outbox``               zset    none      ``run:step:fence`` jobs enqueued (or to enqueue) but not
                                              begun, by time; the reconciler redispatches old ones
``pw:notify``               string  minutes   present while a deployment has notification channels (set by
                                              a worker that has some, ``parkway.channels``, and renewed
                                              by its delivery's beat; it lapses ``Policy.owed_s`` after the
                                              last such worker is gone): the one key the pause scripts
                                              check before writing ``pw:notices``
``pw:notices``              stream  none      the notifications owed (``layout.NOTICE_FIELDS``), written in the
                                              step of the pause, escalation, expiry or answer they
                                              tell of; read by the workers' consumer group
                                              ``layout.NOTICE_GROUP``, each entry deleted once
                                              delivered or dead-lettered; capped at ``NOTICES_MAXLEN``
``pw:notices:dead``         stream  none      the notifications given up on (the entry's fields, ``ch``
                                              channel, ``err`` last error), capped at ``NOTICES_MAXLEN``
``pw:leases``               zset    none      run ids being executed, scored by lease expiry (ms)
``pw:claims``               zset    none      run ids whose interrupt past its expiry a reconciler is
                                              expiring now, scored by when its claim lapses (ms): the
                                              reconcilers share the due range (``Store.claim_due``);
                                              empty (gone) when none is behind
``pw:reconciler``           string  lock      which worker runs the reconciler now
``pw:metrics``              hash    none      deployment-wide counters, bumped by the scripts of the
                                              transitions they count, most by workflow:
                                              ``attempts`` (begin), ``runs:<status>:<wf>``,
                                              ``recovered`` (recover), ``deferred`` (release),
                                              ``wait:<wf>:<le s>`` (counts the accepted resumes),
                                              ``node:<wf>:<le s>``, ``retries:<wf>``,
                                              ``failures:<wf>``: ``layout.COUNTERS``; a few
                                              dozen fields per workflow
``pw:workflows``            set     none      names of workflows that parked (park): whose
                                              indexes a listing of all workflows merges, the
                                              reconciler scans and /metrics counts; a workflow
                                              none of whose indexes holds a member leaves it
                                              (the reconciler: ``Store.prune_idle``)
``pw:{S}:s``                 hash    S         a session: agent (workflow ref), wf, owner, tenant, head
                                              (active message id), pd (its depth), ttl, created,
                                              updated, inc (its incarnation: a nonce of the open
                                              that made it)
``pw:{S}:m``                 hash    S         message id -> message (role, content, runId, at)
``pw:{S}:up``                hash    S         message id -> parent message id ('' for a first message)
``pw:{S}:open``              hash    S         open session-level interrupt id -> anchor message ('' =
                                              global: parks every branch)
``pw:{S}:i``                 hash    S         interrupt id -> record (raised and cleared, with who and when)
``pw:{S}:dl``                hash    S         request id -> run id: a run's interrupt cleared while its
                                              branch was abandoned; the answer waits for a switch back
``pw:{S}:live``              hash    S         branch run id (``<S>--<hex>``) -> its leaf message; runs
                                              that ended leave it at the next session transition
``pw:{S}:pl``                list    S         the active path: the messages from the first to the head
                                              (the session hash's ``pd`` its length), kept by the
                                              scripts that move the head
``pw:{S}:ended``             hash    S         its ended branch runs' summaries (``pw:{R}:ended`` above)
``pw:{S}:sev``               stream  S         the session's events (messages, dispatches, interrupts,
                                              holds, switches): the session can be rebuilt from them;
                                              each entry ``t`` type, ``d`` data, ``i`` the incarnation
                                              of the session that wrote it; a ``message.added`` keeps
                                              its message's id only (``layout.read_session_events``
                                              joins the rest from ``m`` and ``up``)
``pw:secret``               string  none      token key, only while PARKWAY_SECRET is unset
``pw:shards``               string  none      with ``PARKWAY_SHARDS``: this server's place in the bucket ->
                                              shard table (``<index> <shards> <table digest>``), checked
                                              by every process (``shard_table.check_table``)
``pw:keyid``                string  none      fingerprint of the token key (an HMAC under it, never
                                              the key): a process with another key is refused
``pw:functions``            hash    none      each of parkway's function libraries (``pw_<script>_<digest>``:
                                              one per script and version) a process had Redis load ->
                                              the ms it last did; the reconciler deletes the libraries
                                              no process of its version calls that none loaded for a
                                              day (``Store.prune_idle``)
==========================  ======  ========  ===============================================
"""

from __future__ import annotations

import os
import re

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
"""what separates the id whose hash tag a run's keys share from the rest of the run's id"""


def tagged_run_id(root: str, suffix: str) -> str:
    """A run id whose keys share ``root``'s hash tag (a session's branch run: its session's)."""
    return f"{root}{CHILD_SEPARATOR}{suffix}"


def hash_tag(run_id: str) -> str:
    """The hash tag a run's keys share (its id up to the first ``--``): a run, its child tree, and a
    session with its branch runs have one; shards place runs by it (``shards.bucket_of``)."""
    return run_id.partition(CHILD_SEPARATOR)[0]


def _tag(run_id: str) -> str:
    root = hash_tag(run_id)
    if root == run_id:
        return f"{PREFIX}:{{{run_id}}}"
    return f"{PREFIX}:{{{root}}}:{run_id}"


def run(run_id: str) -> str:
    return f"{_tag(run_id)}:run"


def summary(run_id: str) -> str:
    return f"{_tag(run_id)}:sum"


def ended_summaries(run_id: str) -> str:
    """Where the summaries of ``run_id``'s tree's ended runs are folded (its tag's hash)."""
    return f"{PREFIX}:{{{hash_tag(run_id)}}}:ended"


def ended_field(run_id: str) -> str | None:
    """``run_id``'s field in :func:`ended_summaries` (its id past its tag's ``--``); None for a root."""
    root, sep, rest = run_id.partition(CHILD_SEPARATOR)
    return rest if sep else None


def slack_messages(run_id: str, request_id: str) -> str:
    """The Slack messages of one interrupt, by Slack channel (updated in place when it ends)."""
    return f"{_tag(run_id)}:slack:{request_id}"


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


BUCKET_MAX = 128
"""the most members one bucket of a bucketed index holds: Redis's default ``zset-max-listpack-entries``,
so every bucket stays a listpack (about 45-50 bytes a member, not a skiplist's ~140)"""
BUCKET_DIRECTORY = "/d"
"""what a bucketed index's directory adds to the index's name (a workflow name, an id or an audience
never holds ``/``: no other key ends so)"""
BUCKET_SEPARATOR = ":"
"""what separates a bucket's id from its directory's name in the bucket's key"""
BUCKET_COUNT = "/n"
"""what a bucketed index's companion hash adds to the index's name"""


def bucket_directory(index: str) -> str:
    """The directory of ``index``'s buckets (format 4): a zset at score 0 whose members are each
    bucket's lower bound, a NUL byte and the bucket's id (``bucket``)."""
    return f"{index}{BUCKET_DIRECTORY}"


def bucket(index: str, bucket_id: int | str) -> str:
    """One bucket of ``index`` (format 4): a zset of at most ``BUCKET_MAX`` of its members."""
    return f"{bucket_directory(index)}{BUCKET_SEPARATOR}{bucket_id}"


def bucket_count(index: str) -> str:
    """The companion hash of ``index``'s buckets: ``n`` its members in buckets, ``i`` the last
    bucket id given; gone with the last bucket."""
    return f"{index}{BUCKET_COUNT}"


def closed_index(status: str, workflow: str) -> str:
    """A workflow's index of interrupts that ended ``status`` (resolved | cancelled | expired)."""
    return f"{PREFIX}:ic:{status}:{workflow}"


def runs() -> str:
    """Every run, by creation time (a lex index: ``codec.run_member``)."""
    return f"{PREFIX}:runs"


def runs_walked() -> str:
    """The run index member the reconciler's walk over it has reached (``prune_runs``)."""
    return f"{PREFIX}:runs:at"


def runs_due() -> str:
    """The run index's schedule of looks, written before the walk replaced it: what the walk deletes."""
    return f"{PREFIX}:runs:due"


def pauses() -> str:
    """The pause feed: a capped stream the park script appends to, for listings that wait."""
    return f"{PREFIX}:pauses"


NOTICES_MAXLEN = 100_000
"""about how many notifications ``pw:notices`` (and its dead letters) keep: a bound for a deployment
whose workers have stopped delivering, far above what a live one holds"""


def notify_on() -> str:
    """Whose existence says notifications are owed (the pause scripts' one check)."""
    return f"{PREFIX}:notify"


def notices() -> str:
    """The notification stream: one entry per interrupt raised, escalated, expired or answered."""
    return f"{PREFIX}:notices"


def dead_notices() -> str:
    """The notifications whose delivery was given up on (dead letters)."""
    return f"{PREFIX}:notices:dead"


def readers() -> str:
    """The processes' announcements of the stored formats they read (``formats``)."""
    return f"{PREFIX}:readers"


def reclaimed() -> str:
    """The pause feed's id up to which the reconciler has had Redis drop folded runs' streams."""
    return f"{PREFIX}:reclaimed"


def outbox() -> str:
    return f"{PREFIX}:outbox"


OUTBOX_SEPARATOR = ":"
OUTBOX_MEMBER = OUTBOX_SEPARATOR.join(("{run}", "{step}", "{fence}"))
"""an outbox member: the job of a run's activation (its step, at its fence); the scripts' own
``outbox_member`` is generated from this (scripts.lua_template)"""


def outbox_member(run_id: str, step: int | str, fence: int | str) -> str:
    return OUTBOX_MEMBER.format(run=run_id, step=step, fence=fence)


def outbox_job(member: str) -> tuple[str, int, int]:
    """The run, step and fence an outbox member names (a run id may hold the separator)."""
    run_id, step, fence = member.rsplit(OUTBOX_SEPARATOR, 2)
    return run_id, int(step), int(fence)


def secret() -> str:
    """The token key, only when PARKWAY_SECRET is unset (a development fallback)."""
    return f"{PREFIX}:secret"


def shard_table() -> str:
    """Which shard of which bucket -> shard table this Redis is (``shard_table.check_table``)."""
    return f"{PREFIX}:shards"


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


def functions() -> str:
    """parkway's function libraries a process had Redis load, each with the ms it last did."""
    return f"{PREFIX}:functions"


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


def session_path(session_id: str) -> str:
    """The session's active path: a list of the messages from the first to the head (``pl``: the
    hash ``path`` kept it before, message -> depth, and is left to expire)."""
    return _session(session_id, "pl")
