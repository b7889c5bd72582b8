"""Interrupts: ``parkway interrupts``, ``interrupt``, ``resume``; each command's arguments (``add_*``)
beside its function (``cmd_*``), and how an interrupt reads for people (``describe``)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, TextIO

from ..runtime import kinds
from ..runtime.errors import InvalidAnswer, ParkwayError
from .ask import ask, cli_words, contract_of
from .common import ago, as_json, dump, interactive, now_ms, open_client, parse_json, span, warn_missing, when
from .parsing import Subcommands, age, integer, subcommand

if TYPE_CHECKING:
    from ..client import Parkway
    from ..runtime.protocol import Interrupt


def add_interrupts(sub: Subcommands) -> None:
    i = subcommand(
        sub,
        "interrupts",
        "list pending interrupts (questions waiting for a person), newest first",
        cmd_interrupts,
        "Each interrupt shows its request id, run, workflow/node, question, options, how long it has been\n"
        "waiting and when it expires (UTC). --json prints {items, nextCursor} instead.\n"
        "exit status: 0 (also when none are pending), 1 error",
    )
    i.add_argument("--workflow", metavar="NAME", help="only this workflow's interrupts (its name, e.g. approval)")
    i.add_argument("--run-id", metavar="ID", help="only this run's interrupts")
    i.add_argument("--order", choices=["newest", "expiring"], default="newest",
                   help="newest first (default), or the soonest to expire first")
    i.add_argument("--limit", type=integer(1, 1000), default=50, metavar="N",
                   help="at most N per page, 1-1000 (default 50)")
    i.add_argument("--cursor", metavar="CURSOR",
                   help="the next page: the cursor a previous page printed ('more: --cursor ...' or nextCursor)")
    i.add_argument("--tokens", action="store_true",
                   help="include resume tokens (whoever holds one can answer the interrupt)")
    i.add_argument("--audience", metavar="WHO",
                   help="only the interrupts asking this audience now, e.g. team:ops or user:ann "
                   "(escalations move them)")
    i.add_argument("--tenant", metavar="ID", help="only the interrupts of runs started with this tenant")
    i.add_argument("--session", metavar="ID", help="only the interrupts of this session's branch runs")
    i.add_argument("--older-than", type=age, metavar="AGE",
                   help="only interrupts created at least AGE ago: 90s, 15m, 2h, 7d (newest order)")
    i.add_argument("--newer-than", type=age, metavar="AGE",
                   help="only interrupts created at most AGE ago (newest order)")
    i.add_argument("--status", choices=["pending", "resolved", "cancelled", "expired"], default="pending",
                   help="pending (default), or those that ended so within the retention, newest end first, each "
                   "with its lifecycle record (then --order newest only, no --tokens)")
    i.add_argument("--json", action="store_true",
                   help="print the page as one JSON object: items (camelCase, times in epoch ms) and nextCursor "
                   "(null on the last page)")


def cmd_interrupts(args: argparse.Namespace) -> int:
    with open_client(args) as pw:
        page = pw.list_interrupts(
            workflow=args.workflow,
            run_id=args.run_id,
            order=args.order,
            limit=args.limit,
            cursor=args.cursor,
            include_tokens=args.tokens,
            audience=args.audience,
            tenant=args.tenant,
            session=args.session,
            created_before=ago(args.older_than),
            created_after=ago(args.newer_than),
            status=args.status,
        )
        warn_missing(page.missing_shards, "interrupts")
        if args.json:
            print(as_json(dump(page)))
            return 0
        if not page.items:
            print(f"no {args.status} interrupts")
        now = now_ms()
        for interrupt in page.items:
            if args.status == "pending":
                describe(interrupt, sys.stdout, now)
            else:
                describe_ended(interrupt, sys.stdout)
        if page.next_cursor:
            print(f"more: --cursor {page.next_cursor}")
        return 0


def describe(interrupt: Interrupt, out: TextIO, now: int | None = None) -> None:
    """One pending interrupt, for people: the question, its options, its times, its token if shown."""
    now = now_ms() if now is None else now
    req = interrupt.asked()
    out.write(f"- {interrupt.request_id}  run {interrupt.run_id}  {interrupt.workflow}/{interrupt.node}\n")
    out.write(f"  {req.kind}: {req.question}\n")
    if interrupt.audience or interrupt.tenant:
        asked = [f"asks {interrupt.audience}"] if interrupt.audience else []
        out.write("  " + ", ".join(asked + ([f"tenant {interrupt.tenant}"] if interrupt.tenant else [])) + "\n")
    for line in kinds.get(req.kind).notes(req):
        out.write(f"    {line}\n")
    for option in req.options:
        out.write(
            f"    [{option.id}] {option.label}" + (f" - {option.description}" if option.description else "") + "\n"
        )
    left = interrupt.expires_at - now
    expiry = f"expires in {span(left)}" if left > 0 else f"expired {span(-left)} ago"
    out.write(
        f"  waiting since {span(now - interrupt.created_at)} ({when(interrupt.created_at)}), "
        f"{expiry} ({when(interrupt.expires_at)})\n"
    )
    if interrupt.resume_token:
        out.write(f"  token: {interrupt.resume_token}\n")


def describe_ended(interrupt: Interrupt, out: TextIO) -> None:
    """One ended interrupt, for people: how it ended, when, after how long, by whom, refusals."""
    life = interrupt.lifecycle
    out.write(f"- {interrupt.request_id}  run {interrupt.run_id}  {interrupt.workflow}/{interrupt.node}\n")
    if life is None:
        return
    line = f"  {life.outcome or life.status}"
    if life.ended_at is not None:
        line += f" at {when(life.ended_at)}"
    if life.wait_ms is not None:
        line += f" after {span(life.wait_ms)}"
    if life.responder:
        line += f" by {life.responder}"
    if life.reason:
        line += f" ({life.reason})"
    out.write(line + f"; {life.presentation}, {life.option_count} option(s)")
    if life.schema_id:
        out.write(f", contract {life.schema_id} v{life.schema_version}")
    out.write(f"; {life.failures} answer(s) refused\n" if life.failures else "\n")


def add_interrupt(sub: Subcommands) -> None:
    i = subcommand(
        sub,
        "interrupt",
        "print one interrupt, open or ended, with its lifecycle record, as JSON",
        cmd_interrupt,
        "Prints the interrupt: requestId, runId, workflow, node, request (null once ended if its input is\n"
        "not captured) and lifecycle (status, presentation, optionCount, schemaId/Version, outcome, endedAt,\n"
        "waitMs, responder, reason, answer if captured, failures). Read for the retention of run summaries\n"
        "after the run's records are gone. On stderr, one line in words.\n"
        "exit status: 0, 1 error (no such interrupt, a bad id, Redis unreachable)",
    )
    i.add_argument("request_id", metavar="REQUEST", help="the request id (i<n>_<nonce>_<run id> carries its run)")
    i.add_argument("--run-id", metavar="RUN", help="the run, for a request id that does not carry it (a session's)")


def cmd_interrupt(args: argparse.Namespace) -> int:
    with open_client(args) as pw:
        interrupt = pw.get_interrupt(args.request_id, run_id=args.run_id)
        print(as_json(dump(interrupt)))
        describe_ended(interrupt, sys.stderr)
        return 0


# keyed by the outcomes' values (ResumeOutcome, CancelOutcome are str enums)
RESUME_EXIT = {"accepted": 0, "already_resolved": 3, "expired": 4, "unknown": 5}

RESUME_STATUSES = (
    "exit status: 0 accepted, 3 already resolved (answered or cancelled before), 4 expired,\n"
    "5 unknown (no such interrupt, or a token this deployment's PARKWAY_SECRET did not sign),\n"
    "1 error (an answer that does not fit: the interrupt stays open, the token still works), 2 usage error"
)


def add_resume(sub: Subcommands) -> None:
    s = subcommand(
        sub,
        "resume",
        "answer an interrupt by its resume token",
        cmd_resume,
        "Prints the outcome as JSON: {outcome, runId, requestId}. Give one of --select, --text, --value; at a\n"
        "terminal, without one, it shows the question (a contract's fields too) and asks until the answer fits.\n"
        + RESUME_STATUSES,
        imports=True,
    )
    s.add_argument("token", help="the resume token, RUN.REQUEST.SIGNATURE (see `parkway interrupts --tokens`)")
    group = s.add_mutually_exclusive_group()
    group.add_argument("--select", nargs="+", metavar="ID",
                       help="the option id(s) to pick, for a choice (one) or multi-choice (one or more) request")
    group.add_argument("--text", metavar="TEXT",
                       help="the answer to a text request (at most the request's maxLength characters)")
    group.add_argument("--value", metavar="JSON",
                       help="the answer as a JSON value, for requests that take one (a contract's response object)")
    s.add_argument("--multi", action="store_true", help="send --select as a list even with one id (multi-choice)")
    s.add_argument("--request-id", metavar="ID",
                   help="the request id the person saw: refused (exit 1) if the token is for another request")
    s.add_argument("--responder", metavar="WHO",
                   help="who answers (recorded in the interrupt.resumed event; at most 200 characters)")
    s.add_argument("--or-start", action="store_true",
                   help="if the interrupt expired, start its workflow again as a new run (resume_or_start): prints "
                        "{outcome: resumed | started, runId, restartedFrom}; exit 0 for either")
    s.add_argument("--input", metavar="JSON", help="with --or-start: the new run's input (default: the expired run's)")


def cmd_resume(args: argparse.Namespace) -> int:
    kwargs: dict[str, Any] = {}
    if args.select:
        kwargs["selected"] = args.select if len(args.select) > 1 or args.multi else args.select[0]
    elif args.value is not None:
        kwargs["value"] = parse_json(args.value, "--value")
    elif args.text is not None:
        kwargs["value"] = args.text
    elif not interactive():
        print("usage: parkway resume TOKEN (--select ID... | --text TEXT | --value JSON)\nparkway resume: error: "
              "give one of --select, --text or --value (at a terminal, without one, it asks)", file=sys.stderr)
        return 2
    if args.input is not None and not args.or_start:
        raise ParkwayError("--input goes with --or-start (the input of the run it starts if the interrupt expired)")
    with open_client(args) as pw:
        if args.select:
            _check_select(pw, args.token)
        if not kwargs:
            from ..runtime.protocol import Interrupt

            found = pw.lookup(args.token)
            if isinstance(found, Interrupt):
                try:
                    kwargs = ask(found.asked(), contract=contract_of(pw, found.asked()))
                except KeyboardInterrupt:
                    print(f"\nnot answered: interrupt {found.request_id} of run {found.run_id} is still waiting "
                          "and the token still works", file=sys.stderr)
                    return 130
        try:
            if args.or_start:
                started = pw.resume_or_start(args.token, request_id=args.request_id, responder=args.responder,
                                             input=parse_json(args.input, "--input") if args.input else None,
                                             **kwargs)
                print(as_json(dump(started)))
                return {"resumed": 0, "started": 0, "already_resolved": 3, "expired": 4}.get(started.outcome, 5)
            result = pw.resume(args.token, request_id=args.request_id, responder=args.responder, **kwargs)
        except InvalidAnswer as exc:
            raise ParkwayError(cli_words(exc.message)) from None
        print(as_json(dump(result)))
        return RESUME_EXIT[result.outcome]


def _check_select(pw: Parkway, token: str) -> None:
    """Refuse --select for a question that takes text (the library takes ``selected=<text>`` from
    clients that send text that way; on the command line --select means option ids)."""
    from ..runtime.protocol import Interrupt

    found = pw.lookup(token)
    if isinstance(found, Interrupt) and kinds.get(found.asked().kind).cli_flag == "--text":
        raise ParkwayError(f"a {found.asked().kind} question takes --text TEXT, not --select")
