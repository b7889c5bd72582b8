"""Runs: ``parkway run``, ``runs``, ``show``, ``events``, ``cancel``, ``fork``; each command's arguments
(``add_*``) beside its function (``cmd_*``)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..adapters.limits import DEFAULT_TTL_MS
from ..runtime.errors import ConfigError, InvalidAnswer, ParkwayError, WaitTimeout
from .ask import ask, contract_of
from .common import (
    NEEDS_REDIS,
    ago,
    as_json,
    dump,
    interactive,
    now_ms,
    open_client,
    parse_json,
    settings_of,
    show_run,
    span,
    warn_missing,
    when,
)
from .interrupts import RESUME_EXIT, RESUME_STATUSES
from .parsing import Subcommands, age, integer, subcommand

if TYPE_CHECKING:
    from ..client import Parkway
    from ..runtime.protocol import Event, InterruptRequest, Run
    from ..runtime.store import StoredEvent


def add_run(sub: Subcommands) -> None:
    r = subcommand(
        sub,
        "run",
        "start a run and print its events; in a terminal, answer its interrupts",
        cmd_run,
        "Prints one line per event until the run pauses or ends: readable at a terminal, JSON lines (type,\n"
        "eventId, ts and the event's data) with --json or when its output is not a terminal.\n"
        "In a terminal it asks each question and goes on; without one it stops at the first interrupt and\n"
        "says how to answer it. Ctrl-C stops following, not the run (on Redis): it prints how to pick it up.\n"
        "exit status: 0 completed, or waiting for an answer (no terminal), or --detach; 1 the run failed,\n"
        "was cancelled or expired, or an error (--timeout passed, bad input...); 130 Ctrl-C",
        redis="the Redis to start the run on (default $PARKWAY_REDIS_URL; unset: embedded, on an in-process "
        "Redis, and the run ends with this process)",
        imports=True,
    )
    r.add_argument("workflow", help="the workflow to run, as MODULE:ATTRIBUTE (e.g. myapp.flows:approval)")
    r.add_argument("--input", default="{}", metavar="JSON", help="the run's input, a JSON object (default {})")
    r.add_argument("--run-id", default=None, metavar="ID",
                   help="the run's id: 1-64 letters, digits, '_' or '-' (default: run_ and 26 base32 characters)")
    r.add_argument("--ttl-ms", type=integer(1000), default=None, metavar="MS",
                   help="how long the run's records and each of its pauses live, in milliseconds, at least 1000 "
                   f"(default $PARKWAY_TTL_MS or {DEFAULT_TTL_MS}, {DEFAULT_TTL_MS // 60_000} minutes)")
    r.add_argument("--tenant", default=None, metavar="ID",
                   help="the tenant the run belongs to (its interrupts list under it: interrupts --tenant)")
    r.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="stop following after this many seconds, exit 1 (the run goes on); "
                   "default: follow until it pauses or ends")
    r.add_argument("--detach", action="store_true",
                   help="print the run id and exit 0 at once, without following (needs a Redis)")
    r.add_argument("--json", action="store_true",
                   help="print JSON lines even at a terminal (the default when output is not a terminal)")


def cmd_run(args: argparse.Namespace) -> int:
    if args.detach and settings_of(args).embedded:
        raise ConfigError(f"--detach {NEEDS_REDIS}")
    with open_client(args, redis_only=False) as pw:
        data = parse_json(args.input, "--input")
        run_id = pw.start(args.workflow, data, run_id=args.run_id, ttl_ms=args.ttl_ms, tenant=args.tenant)
        if args.detach:
            print(run_id)
            return 0
        try:
            return _follow(pw, args, run_id)
        except KeyboardInterrupt:
            print(_left_behind(pw, run_id), file=sys.stderr, flush=True)
            return 130


def _left_behind(pw: Parkway, run_id: str) -> str:
    """What Ctrl-C leaves: the run's state and how to find it again."""
    try:
        status = pw.get_run(run_id).status
    except ParkwayError as exc:
        return f"run {run_id}: its state could not be read ({exc}); see `parkway show {run_id}`"
    if pw.settings.embedded:
        return f"run {run_id} is {status.value}, but it runs embedded and ends with this process"
    if status.finished:
        return f"run {run_id} is {status.value}; see `parkway show {run_id}`"
    return (
        f"run {run_id} is still {status.value}: pick it up with `parkway show {run_id}` and "
        f"`parkway interrupts --run-id {run_id} --tokens`"
    )


def _follow(pw: Parkway, args: argparse.Namespace, run_id: str) -> int:
    """Print the run's events; answer its interrupts at a terminal; return the exit status."""
    as_json = args.json or not sys.stdout.isatty()
    from ..runtime.protocol import RunStatus

    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    after, hinted = "0", False
    while True:
        remaining = None if deadline is None else deadline - time.monotonic()
        try:
            for event in pw.stream(run_id, after=after, until="settled", timeout=min(remaining or 5.0, 5.0)):
                after = event.id
                print(_event_json(event) if as_json else _event_human(event), flush=True)
        except WaitTimeout:
            if remaining is not None and remaining <= 5.0:
                raise ParkwayError(f"run {run_id} did not pause or finish within {args.timeout}s") from None
            if not hinted and pw.get_run(run_id).status is RunStatus.QUEUED:
                print(f"run {run_id} is queued and no worker has begun it: is `parkway worker` running?",
                      file=sys.stderr)
                hinted = True
            continue
        run = pw.get_run(run_id)
        if run.status.finished:
            if not as_json:
                _say_how_it_ended(run)
            return 0 if run.status is RunStatus.COMPLETED else 1
        if run.interrupt is None:
            continue  # answered meanwhile by someone else: keep following
        if not interactive():
            print(_waiting_hint(run, pw.settings.embedded), file=sys.stderr)
            return 0
        _answer_at_terminal(pw, run_id, run.interrupt.asked())


def _say_how_it_ended(run: Run) -> None:
    """At a terminal: the run's end in words, then its output in full, as one JSON line."""
    seconds = (run.updated_at - run.created_at) / 1000
    print(f"run {run.run_id} {run.status.value} after {seconds:.1f}s at node {run.node}")
    if run.output is not None:
        print(f"output: {as_json(run.output)}")


def _waiting_hint(run: Run, embedded: bool) -> str:
    run_id = run.run_id
    if embedded:
        return (f"run {run_id} is waiting, but it runs embedded and ends with this process; set PARKWAY_REDIS_URL "
                "and start `parkway worker` to keep runs across processes")
    expiry = f" (it expires in {span(run.interrupt.expires_at - now_ms())})" if run.interrupt else ""
    return (f"run {run_id} is waiting{expiry}; answer it with `parkway resume TOKEN ...` "
            f"(see `parkway interrupts --run-id {run_id} --tokens`)")


def _answer_at_terminal(pw: Parkway, run_id: str, request: InterruptRequest) -> None:
    """Ask until the answer fits the request, then resume with the open interrupt's token."""
    page = pw.list_interrupts(run_id=run_id, include_tokens=True)
    if not page.items or page.items[0].resume_token is None:
        return
    token = page.items[0].resume_token
    contract = contract_of(pw, request)
    while True:
        try:
            result = pw.resume(token, responder="cli", **ask(request, contract=contract))
        except InvalidAnswer as exc:
            print(f"{exc.message}; try again", file=sys.stderr)
            continue
        print(f"resume: {result.outcome.value}", file=sys.stderr)
        return


def _event_json(event: Event) -> str:
    """An event as `run` and `events --json` print it: type, eventId (its stream position), ts, then
    its data (camelCase; an interrupt's own ``id`` is its hook id)."""
    head = {"type": event.type, "eventId": event.id, "ts": event.ts}
    return as_json({**head, **{k: v for k, v in event.data.items() if k not in head}})


_HIDDEN = {"resumeToken", "eventId"}  # a token is a capability: `parkway interrupts --tokens` shows it on purpose


def _short(value: Any, width: int = 80) -> str:
    text = value if isinstance(value, str) else as_json(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _event_human(event: Event) -> str:
    """One readable line per event: when (UTC), what, and its gist, each value cut at 80 characters."""
    data = event.data
    if event.type == "interrupt":
        asked = data.get("input")
        request: dict[str, Any] = asked if isinstance(asked, dict) else {}
        options = " | ".join(f"[{o.get('id')}] {o.get('label', o.get('id'))}" for o in request.get("options") or [])
        gist = f"{data.get('node')}: {_short(request.get('question', ''))}" + (f"  {options}" if options else "")
        gist += f"  (request {data.get('requestId')})"
    else:
        gist = "  ".join(f"{key} {_short(value)}" for key, value in data.items() if key not in _HIDDEN)
    return f"{when(event.ts)}  {event.type:<17} {gist}".rstrip()


def add_runs(sub: Subcommands) -> None:
    r = subcommand(
        sub,
        "runs",
        "list runs, newest first, with filters (status, workflow, tenant, age)",
        cmd_runs,
        "Each run shows its id, workflow, status, creation and last update (UTC); runs are listed while\n"
        "their summary lasts (their TTL, then the retention). --json prints {items, nextCursor} instead.\n"
        "exit status: 0 (also when none match), 1 error",
    )
    # RunStatus's values, spelt out: the parser is built without importing pydantic (a fast --help)
    r.add_argument("--status", choices=("queued", "running", "waiting", "completed", "failed", "cancelled", "expired"),
                   help="only runs in this status")
    r.add_argument("--workflow", metavar="NAME", help="only this workflow's runs (its name)")
    r.add_argument("--workflow-prefix", metavar="TEXT", help="only runs of workflows whose name starts with TEXT")
    r.add_argument("--tenant", metavar="ID", help="only the runs started with this tenant")
    r.add_argument("--older-than", type=age, metavar="AGE",
                   help="only runs created at least AGE ago: 90s, 15m, 2h, 7d")
    r.add_argument("--newer-than", type=age, metavar="AGE", help="only runs created at most AGE ago")
    r.add_argument("--limit", type=integer(1, 1000), default=50, metavar="N",
                   help="at most N per page, 1-1000 (default 50)")
    r.add_argument("--cursor", metavar="CURSOR",
                   help="the next page: the cursor a previous page printed ('more: --cursor ...' or nextCursor)")
    r.add_argument("--json", action="store_true",
                   help="print the page as one JSON object: items (camelCase, times in epoch ms) and nextCursor "
                   "(null on the last page)")


def cmd_runs(args: argparse.Namespace) -> int:
    with open_client(args) as pw:
        page = pw.list_runs(
            status=args.status,
            workflow=args.workflow,
            workflow_prefix=args.workflow_prefix,
            tenant=args.tenant,
            created_before=ago(args.older_than),
            created_after=ago(args.newer_than),
            limit=args.limit,
            cursor=args.cursor,
        )
        warn_missing(page.missing_shards, "runs")
        if args.json:
            print(as_json(dump(page)))
            return 0
        if not page.items:
            print("no runs")
        for run in page.items:
            live = run.node and run.status.value in ("running", "waiting")
            where = f" at {run.node} (step {run.step})" if live else ""
            parent = f" child of {run.parent_run_id}" if run.parent_run_id else ""
            tenant = f" tenant {run.tenant}" if run.tenant else ""
            print(f"{run.run_id}  {run.workflow}  {run.status.value}{where}  created {when(run.created_at)}"
                  f"  updated {when(run.updated_at)}{tenant}{parent}")
        if page.next_cursor:
            print(f"more: --cursor {page.next_cursor}")
        return 0


def add_show(sub: Subcommands) -> None:
    sh = subcommand(
        sub,
        "show",
        "print a run as JSON",
        cmd_show,
        "Prints the run: runId, workflow, status (queued, running, waiting, completed, failed, cancelled,\n"
        "expired), node, data, output, error, its pending interrupt, times in epoch ms; a cancelled run\n"
        "also shows its cancellation (reason, responder) while its events are kept. On stderr, one line in\n"
        "words: its status and node, UTC times, how soon its pending interrupt expires.\n"
        "exit status: 0, 1 error (no such run, Redis unreachable)",
    )
    sh.add_argument("run_id", metavar="RUN", help="the run's id (as `parkway run` printed it)")


def cmd_show(args: argparse.Namespace) -> int:
    from ..runtime.protocol import RunStatus

    with open_client(args) as pw:
        run = pw.get_run(args.run_id)
        extra = {}
        if run.status is RunStatus.CANCELLED:
            cancellation = _cancellation(_stored_events(pw, run.run_id))
            if cancellation:
                extra["cancellation"] = cancellation
        show_run(run, sys.stdout, extra)
        print(_run_in_words(run, now_ms()), file=sys.stderr)
        return 0


def _run_in_words(run: Run, now: int) -> str:
    """One line for people beside show's JSON: status, node, readable times, when its interrupt expires."""
    at = f" at node {run.node} (step {run.step})" if run.node else ""
    started = f"started {span(now - run.created_at)} ago ({when(run.created_at)})"
    line = f"run {run.run_id} is {run.status.value}{at}, {started}"
    if run.status.finished:
        line += f", ended {span(now - run.updated_at)} ago ({when(run.updated_at)})"
    elif run.interrupt is not None:
        left = run.interrupt.expires_at - now
        line += (
            f"; its interrupt {run.interrupt.request_id} has waited {span(now - run.interrupt.created_at)} and "
            + (f"expires in {span(left)}" if left > 0 else f"expired {span(-left)} ago")
            + f" ({when(run.interrupt.expires_at)})"
        )
    return line


def _stored_events(pw: Parkway, run_id: str, after: str = "0") -> Iterator[StoredEvent]:
    """The run's stored events after ``after``, up to now (no waiting for more)."""
    while batch := pw.store.read_events(run_id, after, None, 1000):
        yield from batch
        after = batch[-1].id


def _cancellation(events: Iterator[StoredEvent]) -> dict[str, Any]:
    """Who cancelled the run and why, from its ``run.cancelled`` and ``interrupt.cancelled`` events.

    A run cancelled while it waited ends with a ``run.cancelled`` that carries the node's exception
    message; the person's reason and name are on the ``interrupt.cancelled`` before it."""
    by_run: StoredEvent | None = None
    by_interrupt: StoredEvent | None = None
    for event in events:
        if event.type == "run.cancelled":
            by_run = event
        elif event.type == "interrupt.cancelled":
            by_interrupt = event
    chosen = by_run if by_interrupt is None or (by_run and by_run.data.get("responder")) else by_interrupt
    if chosen is None:
        return {}
    out = {"reason": chosen.data.get("reason"), "responder": chosen.data.get("responder"), "at": chosen.ts}
    if chosen is by_interrupt:
        out["requestId"] = chosen.data.get("requestId")
    return out


def add_events(sub: Subcommands) -> None:
    e = subcommand(
        sub,
        "events",
        "print a run's events",
        cmd_events,
        "Prints the events stored so far and exits, or with --follow goes on until the run ends.\n"
        "exit status: 0, 1 error (no such run, Redis unreachable), 130 Ctrl-C",
    )
    e.add_argument("run_id", metavar="RUN", help="the run's id")
    e.add_argument("--follow", action="store_true",
                   help="keep printing new events until the run ends (default: print what is there and exit)")
    e.add_argument("--after", default="0", metavar="EVENT_ID",
                   help="start after this event id (each event prints it; eventId with --json; default: the first)")
    e.add_argument("--json", action="store_true",
                   help="one JSON object per line (type, eventId, ts in epoch ms, the data), as `parkway run` prints")


def cmd_events(args: argparse.Namespace) -> int:
    from ..runtime.protocol import check_event_id

    check_event_id(args.after, "--after")
    with open_client(args) as pw:
        pw.get_run(args.run_id)  # an unknown run is an error, not an empty list
        events = _events_to_the_end if args.follow else _events_so_far
        for event in events(pw, args.run_id, args.after):
            print(_event_json(event) if args.json else _event_human(event), flush=True)
        return 0


def _events_to_the_end(pw: Parkway, run_id: str, after: str) -> Iterator[Event]:
    """The run's events from ``after`` until its final ``done`` (past a ``done`` that only says a
    response was delivered while the run goes on)."""
    while True:
        last = None
        for last in pw.stream(run_id, after=after):
            yield last
        if last is None or last.data.get("status") != "delivered":
            return
        after = last.id


def _events_so_far(pw: Parkway, run_id: str, after: str) -> Iterator[Event]:
    """The run's events from ``after`` to the last one stored now, as ``stream`` yields them (with tokens)."""
    last = None
    for stored in _stored_events(pw, run_id, after):
        last = stored.id
    while last is not None:
        for event in pw.stream(run_id, after=after, timeout=15):  # it ends at each `done`: go on to `last`
            yield event
            after = event.id
            if event.id == last:
                return


CANCEL_EXIT = {"cancelled": 0, "already_resolved": 3}
"""a run's cancel outcome as its exit status (a token's is a resume's: ``RESUME_EXIT``)"""


def add_cancel(sub: Subcommands) -> None:
    c = subcommand(
        sub,
        "cancel",
        "cancel a run, or (given a resume token) just that interrupt",
        cmd_cancel,
        "A run ends cancelled at once, waiting or not (a waiting run's interrupt is cancelled with it, and its\n"
        "node does not replay); a token cancels just that interrupt: the node replays and may catch\n"
        "InterruptCancelled. Prints the outcome as JSON: {outcome, runId, status} for a run.\n"
        "exit status for a run: 0 cancelled, 3 already resolved (it had finished), 1 error (no such run)\n"
        "for a token, as resume's: " + RESUME_STATUSES.removeprefix("exit status: ").replace(
            "1 error (an answer that does not fit: the interrupt stays open, the token still works)", "1 error"),
    )
    c.add_argument("target", metavar="RUN_OR_TOKEN",
                   help="a run id, or a resume token (RUN.REQUEST.SIGNATURE, recognised by its shape)")
    c.add_argument("--token", action="store_true",
                   help="RUN_OR_TOKEN is a resume token (not needed: a token is recognised by its shape)")
    c.add_argument("--reason", metavar="TEXT",
                   help="why (recorded in the run's events; `parkway show` prints it; at most 1000 characters)")
    c.add_argument("--responder", metavar="WHO", help="who cancels (recorded with the reason; at most 200 characters)")


def cmd_cancel(args: argparse.Namespace) -> int:
    with open_client(args) as pw:
        if args.token or "." in args.target:  # a run id has no '.'; a token is RUN.REQUEST.SIGNATURE
            result = pw.cancel_interrupt(args.target, reason=args.reason, responder=args.responder)
            print(as_json(dump(result)))
            return RESUME_EXIT[result.outcome]
        cancelled = pw.cancel(args.target, reason=args.reason, responder=args.responder)
        print(as_json(dump(cancelled)))
        return CANCEL_EXIT[cancelled.outcome]


def add_fork(sub: Subcommands) -> None:
    f = subcommand(
        sub,
        "fork",
        "re-open a run at an earlier step as a new run (the old run is left as it is)",
        cmd_fork,
        "The new run starts at the node step N ran (0 is the first), with the data that step started with,\n"
        "and runs on from there on the workers; its pauses get tokens of their own, while the old run's\n"
        "tokens keep answering the old run. Its run.started event records forkedFrom {runId, step}.\n"
        "Prints {runId, forkedFrom} as JSON. A child run cannot be forked (fork its root), nor a run whose\n"
        "records expired (only its summary is kept), nor a step the run has not reached.\n"
        "exit status: 0 forked, 1 error (no such run, step out of range, expired, bad input)",
    )
    f.add_argument("run_id", metavar="RUN_ID", help="the run to fork")
    f.add_argument("--step", type=integer(0), required=True, metavar="N",
                   help="the activation to re-open: 0 is the run's first node, each node entered after is one more")
    f.add_argument("--run-id", dest="new_run_id", metavar="ID", help="the new run's id (default: a random one)")
    f.add_argument("--input", metavar="JSON",
                   help="a JSON object laid over the data the step started with (default: that data as it was)")


def cmd_fork(args: argparse.Namespace) -> int:
    with open_client(args) as pw:
        data = parse_json(args.input, "--input") if args.input is not None else None
        new = pw.fork(args.run_id, step=args.step, new_run_id=args.new_run_id, input=data)
        print(as_json({"runId": new, "forkedFrom": {"runId": args.run_id, "step": args.step}}))
        return 0
